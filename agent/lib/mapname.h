/* The names runtimes give their maps, "perf-<pid>.map", and their jitdumps, "jit-<pid>.dump". */
#ifndef PERFMAPD_MAPNAME_H
#define PERFMAPD_MAPNAME_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static inline void map_name(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "perf-%d.map", (int)pid);
}

/* The pid a name "perf-<pid>.map" is for; false for any other name. */
static inline bool map_name_pid(const char *name, pid_t *pid)
{
	char *end;
	long v;

	if (strncmp(name, "perf-", 5) || name[5] < '1' || name[5] > '9')
		return false;
	v = strtol(name + 5, &end, 10);
	if (strcmp(end, ".map") || v <= 0 || v > 0x7fffffff)
		return false;
	*pid = (pid_t)v;
	return true;
}

/*
 * The pid of a path whose last component is "jit-<pid>.dump" (perf's own
 * test for a jitdump marker, tools/perf/util/jitdump.c), of @len bytes, not
 * NUL-terminated; 0 for any other path.
 */
static inline pid_t jitdump_name_pid(const char *path, size_t len)
{
	const char *base = path + len;
	unsigned long v = 0;
	size_t n;

	while (base > path && base[-1] != '/')
		base--;
	n = (size_t)(path + len - base);
	if (n < 10 || n > 20 || memcmp(base, "jit-", 4) || memcmp(path + len - 5, ".dump", 5) ||
	    base[4] < '1' || base[4] > '9')
		return 0;
	for (base += 4; base < path + len - 5; base++) {
		if (*base < '0' || *base > '9')
			return 0;
		v = v * 10 + (unsigned long)(*base - '0');
	}
	return v > 0x7fffffff ? 0 : (pid_t)v;
}

#endif /* PERFMAPD_MAPNAME_H */

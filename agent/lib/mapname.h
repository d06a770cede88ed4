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

/* A producer's jitdump, "jit-<pid>.dump" (a marker's name: perfmap__jitdump_name_pid()). */
static inline void jitdump_name(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "jit-%d.dump", (int)pid);
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

#endif /* PERFMAPD_MAPNAME_H */

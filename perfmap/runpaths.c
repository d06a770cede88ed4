/* Where the agent for a map directory keeps its lock and status socket; shared with perfmapctl. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "perfmap_tools.h"

#define ID_MAX 40  /* escaped characters kept before the hash takes over */

static bool plain(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || (c == '.' && !first);
}

/*
 * systemd-escape's rule: "/var/tmp/x" -> "var-tmp-x", and every byte that is
 * not plain becomes \xNN, '-' included, so that "/x/a-b" ("x-a\x2db") and
 * "/x/a/b" ("x-a-b") stay apart. A name longer than ID_MAX is cut and gets
 * the path's hash: cut names are longer than any uncut one, so they cannot
 * meet either.
 */
static void escape_id(const char *real, char *id, size_t cap)
{
	uint64_t h = 1469598103934665603ull;
	const char *s;
	size_t n = 0;
	char esc[8];

	for (s = real; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	for (s = real + 1; *s && n <= ID_MAX; s++) {
		if (*s == '/')
			snprintf(esc, sizeof(esc), "-");
		else if (plain(*s, s == real + 1))
			snprintf(esc, sizeof(esc), "%c", *s);
		else
			snprintf(esc, sizeof(esc), "\\x%02x", (unsigned char)*s);
		n += snprintf(id + n, cap - n, "%s", esc);
	}
	if (!n)
		snprintf(id, cap, "root");
	else if (n > ID_MAX)
		snprintf(id + ID_MAX, cap - ID_MAX, "-%016llx", (unsigned long long)h);
}

int perfmap__run_paths(const char *run_dir, const char *map_dir, char *lock, char *sock,
		       size_t len)
{
	char real[PATH_MAX], id[ID_MAX + 32];

	if (!realpath(map_dir, real))
		return -errno;
	escape_id(real, id, sizeof(id));
	if ((size_t)snprintf(lock, len, "%s/%s.lock", run_dir, id) >= len ||
	    (size_t)snprintf(sock, len, "%s/%s.sock", run_dir, id) >= len ||
	    strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int perfmap__hold_path(const char *run_dir, const char *map_dir, char *path, size_t len)
{
	char lock[PATH_MAX];
	size_t n;
	int err;

	err = perfmap__run_paths(run_dir, map_dir, lock, path, len < sizeof(lock) ? len : sizeof(lock));
	if (err)
		return err;
	/* "<id>.sock" -> "<id>.hold": as long, and as sure to fit. */
	n = strlen(path);
	memcpy(path + n - 5, ".hold", 5);
	return 0;
}

int perfmap__archived_dump_name(const char *map_name, char *buf, size_t len)
{
	size_t n = strlen(map_name);

	if (n < 10 || strncmp(map_name, "perf-", 5) || strcmp(map_name + n - 4, ".map"))
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "jit-%.*s.dump", (int)(n - 9), map_name + 5) >= len)
		return -ENAMETOOLONG;
	return 0;
}

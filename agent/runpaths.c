/* Where the agent for a map directory keeps its lock and status socket; shared with perfmapctl. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "instance.h"

/* systemd-escape style: "/var/tmp/x" -> "var-tmp-x"; long paths by hash. */
int instance_paths(const char *run_dir, const char *map_dir, char *lock, char *sock,
		   size_t len)
{
	char real[PATH_MAX], id[80];
	const char *s;
	uint64_t h = 1469598103934665603ull;
	size_t n = 0;

	if (!realpath(map_dir, real))
		return -errno;
	for (s = real; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	for (s = real + 1; *s && n < 40; s++)
		id[n++] = (*s == '/' || *s == '.' || *s == ' ') ? '-' : *s;
	id[n] = '\0';
	/* Escaping is not one-to-one and is cut short: a hash keeps names apart. */
	if (!n)
		snprintf(id, sizeof(id), "root");
	else if (*s)
		snprintf(id + n, sizeof(id) - n, "-%016llx", (unsigned long long)h);
	if ((size_t)snprintf(lock, len, "%s/%s.lock", run_dir, id) >= len ||
	    (size_t)snprintf(sock, len, "%s/%s.sock", run_dir, id) >= len ||
	    strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}


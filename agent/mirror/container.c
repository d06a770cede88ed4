/* A process's container: the id engines put in the cgroup path, read from /proc/<pid>/cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mirror/container.h"

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The last run of exactly 64 hex digits in [p, end): its start, or NULL. */
static const char *last_id(const char *p, const char *end)
{
	const char *found = NULL, *run;

	while (p < end) {
		if (!is_hex(*p)) {
			p++;
			continue;
		}
		for (run = p; p < end && is_hex(*p); p++)
			;
		if (p - run == CONTAINER_ID_LEN)
			found = run;
	}
	return found;
}

/* The path part of a "hierarchy:controllers:path" line [line, nl): its start, or NULL. */
static const char *line_path(const char *line, const char *nl)
{
	const char *p = memchr(line, ':', (size_t)(nl - line));

	p = p ? memchr(p + 1, ':', (size_t)(nl - p - 1)) : NULL;
	return p ? p + 1 : NULL;
}

int container_parse_cgroup(const char *buf, struct container_id *c)
{
	const char *line, *nl, *path, *id, *where = NULL, *where_end = NULL;
	bool v2 = false;

	memset(c, 0, sizeof(*c));
	/*
	 * The id may be in the v2 line ("0::") or, on a hybrid layout with the
	 * cgroupfs manager, only in the v1 lines: the first line holding one
	 * wins; without any, the v2 path, else the first.
	 */
	for (line = buf; *line; line = *nl ? nl + 1 : nl) {
		nl = strchr(line, '\n');
		if (!nl)
			nl = line + strlen(line);
		path = line_path(line, nl);
		if (!path)
			continue;
		id = last_id(path, nl);
		if (id) {
			memcpy(c->id, id, CONTAINER_ID_LEN);
			where = path;
			where_end = nl;
			break;
		}
		if (!where || (!v2 && !strncmp(line, "0::", 3))) {
			v2 = !strncmp(line, "0::", 3);
			where = path;
			where_end = nl;
		}
	}
	if (!where)
		return -EINVAL;
	snprintf(c->cgroup, sizeof(c->cgroup), "%.*s", (int)(where_end - where), where);
	return 0;
}

int container_of(pid_t pid, struct container_id *c)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	buf[n] = '\0';
	return container_parse_cgroup(buf, c);
}

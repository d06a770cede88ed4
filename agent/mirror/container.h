/* Which container a process is in: the container id in its cgroup path, as engines name them. */
#ifndef PERFMAPD_CONTAINER_H
#define PERFMAPD_CONTAINER_H

#include <stddef.h>
#include <sys/types.h>

#define CONTAINER_ID_LEN 64
#define CONTAINER_SHORT_LEN 12

struct container_id {
	char id[CONTAINER_ID_LEN + 1];   /* 64 lowercase hex digits, or "" when none was found */
	char cgroup[256];                /* its cgroup path (v2, else the first), cut; not escaped */
};

/*
 * From the text of /proc/<pid>/cgroup (NUL-terminated, no system call): the
 * last run of exactly 64 hex digits in the chosen path, as podman, docker,
 * containerd and CRI-O put them ("libpod-<id>", "docker-<id>.scope",
 * "cri-containerd-<id>.scope", "/docker/<id>"). 0 or -EINVAL.
 */
int container_parse_cgroup(const char *buf, struct container_id *c);
/* The same for a live process: 0, -ENOENT when gone, or -errno. */
int container_of(pid_t pid, struct container_id *c);

#endif /* PERFMAPD_CONTAINER_H */

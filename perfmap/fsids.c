/* A process's namespaces and a thread's file-system ids: for a privileged tool acting as a process. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Are @groups the thread's own already? Then keeping them takes no privilege. */
static bool groups_are_ours(const gid_t *groups, size_t n)
{
	int have = getgroups(0, NULL);
	bool same;
	gid_t *g;

	if (have < 0 || (size_t)have != n)
		return false;
	if (!n)
		return true;
	g = calloc(n, sizeof(*g));
	same = g && getgroups(have, g) == have && !memcmp(g, groups, n * sizeof(*g));
	free(g);
	return same;
}

int perfmap__take_fsids(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups)
{
	/* The system call: glibc's setgroups() changes every thread's (nptl's setxid). */
	if (!groups_are_ours(groups, ngroups) && syscall(SYS_setgroups, ngroups, groups))
		return -errno;
	setfsgid(gid);
	setfsuid(uid);
	/* setfsuid() fails silently, saying the id it had; asked again with -1, the id now. */
	if ((gid_t)setfsgid((gid_t)-1) != gid || (uid_t)setfsuid((uid_t)-1) != uid)
		return -EPERM;
	return 0;
}

uint64_t perfmap__ns_inode(pid_t pid, const char *ns)
{
	char path[64];
	struct stat st;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns);
	return stat(path, &st) ? 0 : (uint64_t)st.st_ino;
}

uint64_t perfmap__ns_inode_at(int dirfd, const char *ns)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "ns/%s", ns);
	return fstatat(dirfd, path, &st, 0) ? 0 : (uint64_t)st.st_ino;
}

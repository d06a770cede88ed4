/*
 * Files inside another process's root (a container's /tmp, a producer's
 * working directory), for every tool that reads them as root: the
 * directories resolved inside that root without following any link the
 * process planted, never on FUSE (a server that never answers would hang
 * the reader), and a jitdump's name told apart by perf's own rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static int openat2_fd(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags, .resolve = resolve };
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* The mount id of what @fd is on, asked of the VFS: cached attributes, no request to a server. */
static int mount_id(int fd, uint64_t *id)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx))
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID))
		return -ENOTSUP;
	*id = sx.stx_mnt_id;
	return 0;
}

int perfmap__mountinfo_fuse(FILE *f, uint64_t id)
{
	char line[4096], *end, *sep;
	bool at_start = true;

	while (fgets(line, sizeof(line), f)) {
		/* A line longer than the buffer comes in pieces: only a line's start names a mount. */
		bool starts = at_start;

		at_start = strchr(line, '\n') != NULL;
		if (!starts || strtoull(line, &end, 10) != id || *end != ' ')
			continue;
		sep = strstr(line, " - ");
		return sep && !strncmp(sep + 3, "fuse", 4);
	}
	return -ENOENT;
}

/* Is mount @id FUSE, by @pid's mount table? Not shown there (a root inside a mount): taken to be. */
static bool mount_is_fuse(pid_t pid, uint64_t id)
{
	char path[64];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	ret = perfmap__mountinfo_fuse(f, id);
	fclose(f);
	return ret != 0;
}

/*
 * Is @fd on FUSE? Asked of the mount table, never of the file system: a FUSE
 * server that admits root answers statfs() itself, and need never answer.
 * What cannot be told (no mount id, a mount the table does not show, FUSE
 * refusing root the attributes) is refused as if it were: it may be.
 */
static bool on_fuse(pid_t pid, int fd, uint64_t *id)
{
	return mount_id(fd, id) || mount_is_fuse(pid, *id);
}

int perfmap__root_open_dir(pid_t pid, const char *path, struct stat *st,
			   enum perfmap_root_refusal *why)
{
	uint64_t root_mnt = 0, dir_mnt = 0;
	char root[32];
	int rfd, dfd;

	*why = PERFMAP_ROOT_OK;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	/* O_PATH: the magic link is the process's root itself; nothing inside is looked up yet. */
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0) {
		if (errno != ENOENT && errno != ESRCH)
			*why = PERFMAP_ROOT_UNREACHABLE;
		return errno == ENOENT ? -ESRCH : -errno;
	}
	/* A FUSE root answers the lookup below from a server the container runs. */
	if (on_fuse(pid, rfd, &root_mnt)) {
		*why = PERFMAP_ROOT_FUSE;
		close(rfd);
		return -EPERM;
	}
	while (*path == '/')
		path++;
	dfd = openat2_fd(rfd, *path ? path : ".", O_PATH | O_DIRECTORY | O_CLOEXEC,
			 RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	close(rfd);
	if (dfd < 0) {
		if (dfd == -ELOOP || dfd == -ENOTDIR)
			*why = PERFMAP_ROOT_DIR;
		return dfd;
	}
	/* Its own mount (a tmpfs on /tmp) is looked up in the mount table too. */
	if (mount_id(dfd, &dir_mnt) || (dir_mnt != root_mnt && mount_is_fuse(pid, dir_mnt)))
		*why = PERFMAP_ROOT_FUSE;
	else if (fstat(dfd, st))
		*why = PERFMAP_ROOT_UNREACHABLE;
	if (*why) {
		close(dfd);
		return -EPERM;
	}
	return dfd;
}

pid_t perfmap__jitdump_name_pid(const char *path, size_t len)
{
	const char *base = path + len;
	unsigned long v = 0;
	size_t n;

	/* perf's own test for a marker (tools/perf/util/jitdump.c): "jit-<pid>.dump". */
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

int perfmap__jitdump_open(pid_t pid, const char *path, uid_t owner, uint64_t ino,
			  struct stat *st, enum perfmap_root_refusal *why)
{
	const struct perfmap_open_opts oo = { .sz = sizeof(oo), .check_owner = true, .owner = owner };
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat dst;
	int dfd, fd;
	size_t n;

	*why = PERFMAP_ROOT_OK;
	if (!slash || path[0] != '/')
		return -EINVAL;
	n = (size_t)(slash - path);
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	dfd = perfmap__root_open_dir(pid, n ? dir : "/", &dst, why);
	if (dfd < 0)
		return dfd;
	/* The last name as itself (no link, no FIFO, one link, @owner's), then reopened. */
	fd = perfmap__open_map_at(dfd, slash + 1, O_RDONLY, &oo, st);
	close(dfd);
	if (fd < 0)
		return fd;
	/* The file the kernel saw mapped, not one renamed over its name since. */
	if (ino && (uint64_t)st->st_ino != ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

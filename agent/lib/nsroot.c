/* Opening maps inside another process's root without following anything it planted. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/mapname.h"
#include "lib/nsroot.h"

/* A file with this much less on disk than its size is sparse: its reader would read nothing. */
#define SPARSE_SLACK (64u << 10)

/* What the log says of each refusal; its count is a status key of perfmapd_counters.def's (refused_*). */
static const char *const refusals[NSR__COUNT] = {
	[NSR_NONE] = "accepted",
	[NSR_SYMLINK] = "is a symlink, refused",
	[NSR_NOT_REGULAR] = "is not a regular file, refused",
	[NSR_HARD_LINKED] = "has more than one hard link, refused",
	[NSR_TOO_LARGE] = "is larger than the size bound, refused",
	[NSR_SPARSE] = "is sparse (holes), refused",
	[NSR_DIR] = "is a symlink or not a directory, refused",
	[NSR_FUSE] = "is on FUSE (or a mount its mount table does not show), whose server could hang the agent, refused",
	[NSR_ROOT] = "cannot be reached (its root or /proc refused it), refused",
	[NSR_OWNER] = "is owned by another uid than its process's, refused",
};

const char *ns_refusal_str(enum ns_refusal r)
{
	return r < NSR__COUNT ? refusals[r] : "?";
}

static int openat2_fd(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct open_how how = { .flags = flags, .mode = mode, .resolve = resolve };
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

int nsroot_mountinfo_fuse(FILE *f, uint64_t id)
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
	ret = nsroot_mountinfo_fuse(f, id);
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

int nsroot_open_dir(pid_t pid, const char *path, struct stat *st, enum ns_refusal *why)
{
	uint64_t root_mnt = 0, dir_mnt = 0;
	char root[32];
	int rfd, dfd;

	*why = NSR_NONE;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	/* O_PATH: the magic link is the process's root itself; nothing inside is looked up yet. */
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0) {
		if (errno != ENOENT && errno != ESRCH)
			*why = NSR_ROOT;
		return errno == ENOENT ? -ESRCH : -errno;
	}
	/* A FUSE root answers the lookup below from a server the container runs. */
	if (on_fuse(pid, rfd, &root_mnt)) {
		*why = NSR_FUSE;
		close(rfd);
		return -EPERM;
	}
	while (*path == '/')
		path++;
	dfd = openat2_fd(rfd, *path ? path : ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
			 RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	close(rfd);
	if (dfd < 0) {
		if (dfd == -ELOOP || dfd == -ENOTDIR)
			*why = NSR_DIR;
		return dfd;
	}
	/* Its own mount (a tmpfs on /tmp) is looked up in the mount table too. */
	if (mount_id(dfd, &dir_mnt) || (dir_mnt != root_mnt && mount_is_fuse(pid, dir_mnt)))
		*why = NSR_FUSE;
	else if (fstat(dfd, st))
		*why = NSR_ROOT;
	if (*why) {
		close(dfd);
		return -EPERM;
	}
	return dfd;
}

enum ns_refusal nsroot_check(const struct stat *st, uint64_t max_bytes)
{
	if (S_ISLNK(st->st_mode))
		return NSR_SYMLINK;
	if (!S_ISREG(st->st_mode))
		return NSR_NOT_REGULAR;
	if (st->st_nlink > 1)
		return NSR_HARD_LINKED;
	if (max_bytes && (uint64_t)st->st_size > max_bytes)
		return NSR_TOO_LARGE;
	if ((uint64_t)st->st_size > (uint64_t)st->st_blocks * 512 + SPARSE_SLACK)
		return NSR_SPARSE;
	return NSR_NONE;
}

int nsroot_open_file(int dirfd, const char *name, uint64_t max_bytes, struct stat *st,
		     enum ns_refusal *why)
{
	const uint64_t resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
				 RESOLVE_NO_XDEV;
	char self[32];
	int pfd, fd;

	*why = NSR_NONE;
	/* O_PATH opens neither a FIFO (no hang) nor a device (no driver); a symlink as itself. */
	pfd = openat2_fd(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0, resolve);
	if (pfd < 0) {
		if (pfd == -ELOOP)
			*why = NSR_SYMLINK;
		else if (pfd == -EXDEV)
			*why = NSR_NOT_REGULAR;  /* something mounted over the name */
		return pfd;
	}
	if (fstat(pfd, st)) {
		fd = -errno;
		goto close_pfd;
	}
	*why = nsroot_check(st, max_bytes);
	if (*why) {
		fd = -EPERM;
		goto close_pfd;
	}
	/* Through /proc/self/fd: exactly the inode checked, nothing swapped in between. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
close_pfd:
	close(pfd);
	return fd;
}

int nsroot_open_map(int dirfd, pid_t ns_pid, uint64_t max_bytes, struct stat *st,
		    enum ns_refusal *why)
{
	char name[32];

	map_name(ns_pid, name, sizeof(name));
	return nsroot_open_file(dirfd, name, max_bytes, st, why);
}

int nsroot_create_map(int dirfd, pid_t ns_pid, mode_t mode)
{
	const uint64_t resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
				 RESOLVE_NO_XDEV;
	char name[32];
	int fd;

	map_name(ns_pid, name, sizeof(name));
	fd = openat2_fd(dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			mode & 0666, resolve);
	if (fd < 0)
		return fd;
	/* The child's file, as a runtime's own would be: its ids already, its parent's mode, not the umask's. */
	if (fchmod(fd, mode & 0666)) {
		int err = -errno;

		unlinkat(dirfd, name, 0);
		close(fd);
		return err;
	}
	return fd;
}

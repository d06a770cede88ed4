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
#include "perfmap_tools.h"

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

int nsroot_mountinfo_fuse(FILE *f, uint64_t id)
{
	return perfmap__mountinfo_fuse(f, id);
}

int nsroot_open_dir(pid_t pid, const char *path, struct stat *st, enum ns_refusal *why)
{
	static const enum ns_refusal as_ns[] = {
		[PERFMAP_ROOT_OK] = NSR_NONE, [PERFMAP_ROOT_DIR] = NSR_DIR,
		[PERFMAP_ROOT_FUSE] = NSR_FUSE, [PERFMAP_ROOT_UNREACHABLE] = NSR_ROOT,
	};
	enum perfmap_root_refusal r;
	int fd = perfmap__root_open_dir(pid, path, st, &r);

	*why = as_ns[r];
	return fd;
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

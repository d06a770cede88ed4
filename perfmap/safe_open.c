/* Opening a map path in a world-writable directory without following anyone's trap. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

const char *perfmap_open_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case ELOOP:
		return "is a symlink, refused";
	case EINVAL:
		return "is not a regular file, refused";
	case EMLINK:
		return "has more than one hard link, refused";
	case EPERM:
		return "is owned by another user, refused";
	case EFBIG:
		return "is larger than the size bound, refused";
	case EAGAIN:
		return "changed while being opened, refused";
	default:
		return strerror(err < 0 ? -err : err);
	}
}

int perfmap__check_map_inode(const struct stat *st, bool check_owner, uid_t owner,
			     uint64_t max_bytes)
{
	if (S_ISLNK(st->st_mode))
		return -ELOOP;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	/* A second link may be a trap pointing at a file of somebody else. */
	if (st->st_nlink > 1)
		return -EMLINK;
	if (check_owner && st->st_uid != owner)
		return -EPERM;
	if (max_bytes && (uint64_t)st->st_size > max_bytes)
		return -EFBIG;
	return 0;
}

int perfmap__reopen_fd(int fd, int flags)
{
	char proc[32] = "/proc/self/fd/";
	int nfd;

	proc[14 + perfmap__utoa(proc + 14, (uint64_t)fd)] = '\0';
	nfd = open(proc, flags);
	return nfd >= 0 ? nfd : -errno;
}

/*
 * Reopen what @pfd (an O_PATH fd) names, for reading. Going through
 * /proc/self/fd opens exactly the inode that was checked, so nothing can be
 * swapped in between. Without /proc, open the path again and make sure it is
 * still the same inode.
 */
static int reopen_checked(int pfd, const char *path, const struct stat *st)
{
	const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	struct stat st2;
	int fd;

	fd = perfmap__reopen_fd(pfd, flags);
	if (fd != -ENOENT)
		return fd;

	fd = open(path, flags | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st2) || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int perfmap_open_map(const char *path, const struct perfmap_open_opts *opts)
{
	struct stat st;
	int pfd, err;

	if (!path || (opts && opts->sz < sizeof(opts->sz)))
		return -EINVAL;

	/*
	 * O_PATH opens neither a FIFO (no hang) nor a device (no driver open);
	 * with O_NOFOLLOW a symlink is opened as itself and shows in fstat.
	 */
	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st)) {
		err = -errno;
		goto close_pfd;
	}
	err = perfmap__check_map_inode(&st, OPTS_HAS(opts, owner) && opts->check_owner,
				       OPTS_HAS(opts, owner) ? opts->owner : 0,
				       OPTS_GET(opts, max_bytes, 0));
	if (err)
		goto close_pfd;
	/* The fd on success, or -errno. */
	err = reopen_checked(pfd, path, &st);

close_pfd:
	close(pfd);
	return err;
}

int perfmap__open_map_at(int dirfd, const char *name, int flags,
			 const struct perfmap_open_opts *opts, struct stat *st)
{
	int pfd, fd, err;

	if (!name || (opts && opts->sz < sizeof(opts->sz)))
		return -EINVAL;
	pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st)) {
		err = -errno;
		goto close_pfd;
	}
	err = perfmap__check_map_inode(st, OPTS_HAS(opts, owner) && opts->check_owner,
				       OPTS_HAS(opts, owner) ? opts->owner : 0,
				       OPTS_GET(opts, max_bytes, 0));
	if (err)
		goto close_pfd;
	/* Only through /proc: the name may be anybody's by now, the inode is the one checked. */
	fd = perfmap__reopen_fd(pfd, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	close(pfd);
	return fd;

close_pfd:
	close(pfd);
	return err;
}

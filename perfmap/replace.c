/* Replacing or moving a map: read lease, rename, and a way back if a writer comes. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap_tools.h"

/*
 * Why a read lease: F_SETLEASE F_RDLCK is granted only while no one has the
 * file open for writing (open fds and writable mappings alike), and from then
 * on any open for writing must first break the lease, which we see with
 * F_GETLEASE. So "no writer" holds from the check to the swap, with no window,
 * unlike a scan of /proc. The scan only names the writer for the message and
 * stands in where leases are unavailable (no CAP_LEASE, a filesystem without).
 */
static int take_lease(int fd, const struct stat *st, bool name_writers,
		      struct perfmap_replace_result *res)
{
	int err;

	if (!fcntl(fd, F_SETLEASE, F_RDLCK)) {
		res->guarded = true;
		return 0;
	}
	err = errno;
	/* Refused because of a writer: the scan only names it, when asked to. */
	if (err == EAGAIN && !name_writers) {
		res->why = "open for writing";
		return -EBUSY;
	}
	perfmap__writers_find(st->st_dev, st->st_ino, &res->writers);
	if (err == EAGAIN || res->writers.count) {
		res->why = "open for writing";
		return -EBUSY;
	}
	if (res->writers.hidden) {
		res->why = "cannot see every process's open files (no lease either): run as root";
		return -EACCES;
	}
	return 0;
}

/* Still no writer since the lease was taken? */
static bool lease_intact(int fd, const struct perfmap_replace_result *res)
{
	return !res->guarded || fcntl(fd, F_GETLEASE) == F_RDLCK;
}

/* A temporary file next to @path with the owner, group and mode of @st. */
static int make_temp(const char *path, const struct stat *st, char *tmp, size_t len)
{
	char copy[PATH_MAX], copy2[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", path);
	snprintf(copy2, sizeof(copy2), "%s", path);
	if ((size_t)snprintf(tmp, len, "%s/.%s.XXXXXX", dirname(copy), basename(copy2)) >= len)
		return -ENAMETOOLONG;
	/* O_EXCL underneath: never through somebody's symlink. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((fchown(fd, st->st_uid, st->st_gid) && st->st_uid != geteuid()) ||
	    fchmod(fd, st->st_mode & 07777)) {
		int err = -errno;

		close(fd);
		unlink(tmp);
		return err;
	}
	return fd;
}

static int fill_temp(int src_fd, int tmp_fd, perfmap_fill_fn fill, void *ctx)
{
	int err = fill(src_fd, tmp_fd, ctx);

	/* The data is on disk before any name points to it. */
	if (!err && fsync(tmp_fd))
		err = -errno;
	return err;
}

static void sync_dir(const char *path)
{
	char copy[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", path);
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/*
 * Exchange rather than rename: if a writer opened the file between the last
 * lease check and the swap, it is waiting on the old inode, and exchanging
 * back puts that inode at the path again, so none of its lines are lost.
 * Takes care of @tmp whatever happens.
 */
static int swap_in(const char *tmp, const char *path, int src_fd,
		   struct perfmap_replace_result *res)
{
	int err;

	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE)) {
		/* EINVAL: no RENAME_EXCHANGE on this filesystem, plain rename. */
		err = errno == EINVAL && !rename(tmp, path) ? 0 : -errno;
		if (err)
			unlink(tmp);
		return err;
	}
	if (lease_intact(src_fd, res)) {
		/* The temporary name now holds the old inode. */
		unlink(tmp);
		return 0;
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE)) {
		/* Never unlink the original: leave it aside and say where. */
		snprintf(res->kept, sizeof(res->kept), "%s", tmp);
		res->why = "opened for writing during the swap; the original could not be put back";
		return -EBUSY;
	}
	unlink(tmp);
	res->why = "opened for writing during the swap; original put back";
	return -EBUSY;
}

/*
 * A lease broken while SIGIO was blocked left a SIGIO pending: take it now,
 * with the lease gone, or it is delivered (and kills) when the mask is restored.
 */
static void drain_sigio(const sigset_t *sigio)
{
	const struct timespec now = { 0, 0 };

	while (sigtimedwait(sigio, NULL, &now) > 0)
		;
}

/*
 * The guard both operations run under: SIGIO blocked (a lease break is
 * announced with SIGIO, whose default action kills) and a read lease taken.
 */
static int guard_begin(int fd, const struct stat *st, bool name_writers,
		       struct perfmap_replace_result *res, sigset_t *old)
{
	sigset_t sigio;
	int err;

	sigemptyset(&sigio);
	sigaddset(&sigio, SIGIO);
	sigprocmask(SIG_BLOCK, &sigio, old);
	err = take_lease(fd, st, name_writers, res);
	if (err)
		sigprocmask(SIG_SETMASK, old, NULL);
	return err;
}

static void guard_end(int fd, const struct perfmap_replace_result *res, const sigset_t *old)
{
	sigset_t sigio;

	sigemptyset(&sigio);
	sigaddset(&sigio, SIGIO);
	if (res->guarded)
		fcntl(fd, F_SETLEASE, F_UNLCK);
	drain_sigio(&sigio);
	sigprocmask(SIG_SETMASK, old, NULL);
}

int perfmap__replace(const char *path, int src_fd, perfmap_fill_fn fill, void *ctx,
		struct perfmap_replace_result *res)
{
	struct stat st, now;
	char tmp[PATH_MAX];
	sigset_t old;
	int tmp_fd, err;

	memset(res, 0, sizeof(*res));
	if (fstat(src_fd, &st))
		return -errno;
	err = guard_begin(src_fd, &st, true, res, &old);
	if (err)
		return err;
	tmp_fd = make_temp(path, &st, tmp, sizeof(tmp));
	if (tmp_fd < 0) {
		err = tmp_fd;
		res->why = "cannot create a temporary file beside it";
		goto release_lease;
	}
	err = fill_temp(src_fd, tmp_fd, fill, ctx);
	close(tmp_fd);
	if (err)
		goto remove_temp;
	if (!lease_intact(src_fd, res)) {
		res->why = "opened for writing while being compacted";
		err = -EBUSY;
		goto remove_temp;
	}
	if (lstat(path, &now) || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
		res->why = "replaced by another file meanwhile";
		err = -ESTALE;
		goto remove_temp;
	}
	err = swap_in(tmp, path, src_fd, res);
	if (!err)
		sync_dir(path);
	goto release_lease;

remove_temp:
	unlink(tmp);
release_lease:
	guard_end(src_fd, res, &old);
	return err;
}

int perfmap__write_atomic(const char *path, int src_fd, perfmap_fill_fn fill,
		      void *ctx, struct perfmap_replace_result *res)
{
	struct stat st = { .st_mode = 0600, .st_uid = geteuid(), .st_gid = getegid() };
	char tmp[PATH_MAX];
	int tmp_fd, err;

	memset(res, 0, sizeof(*res));
	tmp_fd = make_temp(path, &st, tmp, sizeof(tmp));
	if (tmp_fd < 0) {
		res->why = "cannot create a temporary file beside it";
		return tmp_fd;
	}
	err = fill_temp(src_fd, tmp_fd, fill, ctx);
	close(tmp_fd);
	/* rename() replaces a symlink at @path, never what it points to. */
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int perfmap__move_aside(int dirfd, const char *name, int fd, uint64_t size, const char *dest,
			struct perfmap_replace_result *res)
{
	struct stat st, now;
	sigset_t old;
	int err;

	memset(res, 0, sizeof(*res));
	if (fstat(fd, &st))
		return -errno;
	/* The agent moves maps in its event loop: no /proc scan to name a writer. */
	err = guard_begin(fd, &st, false, res, &old);
	if (err)
		return err;
	if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) ||
	    now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
		res->why = "replaced by another file meanwhile";
		err = -ESTALE;
		goto release_lease;
	}
	/* Under the lease nobody can write to it: its size now is its size at the rename. */
	if (size != UINT64_MAX && (fstat(fd, &now) || (uint64_t)now.st_size != size)) {
		res->why = "written to since it was judged";
		err = -ESTALE;
		goto release_lease;
	}
	if (renameat2(dirfd, name, dirfd, dest, RENAME_NOREPLACE)) {
		err = -errno;
		res->why = "cannot rename it";
		goto release_lease;
	}
	if (lease_intact(fd, res))
		goto release_lease;
	/* A writer opened it by its old name: give the name back to it. */
	err = -EBUSY;
	if (renameat2(dirfd, dest, dirfd, name, RENAME_NOREPLACE)) {
		snprintf(res->kept, sizeof(res->kept), "%s", dest);
		res->why = "opened for writing while being moved; could not be put back";
	} else {
		res->why = "opened for writing while being moved; put back";
	}

release_lease:
	guard_end(fd, res, &old);
	return err;
}

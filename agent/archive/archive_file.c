/*
 * Writing one archived map, or the jitdump archived beside it (its bytes as
 * they are: a dump is binary). The file is made under a temporary name in the
 * archive directory and linked to its name with RENAME_NOREPLACE: an archive
 * already there is never replaced (a crash, a pid's second map in the same
 * millisecond); the next free name "<name>-dupN.map" ("-dupN.dump") is taken instead.
 * Its mtime is the time the agent wrote it, never the map's: the quota
 * orders by it, and the map's mtime is its owner's to choose.
 * It is synced, then its name, before the caller removes the staged map: the
 * map is on disk in one place or the other whatever stops the machine. It
 * carries the staged map's name (ARCHIVE_STAGED_XATTR), set before the
 * link: a kill between the link and the staged map's removal is told from a
 * map not yet stored at the next start, and the map is not archived twice.
 * Also the archive directory itself: made ours, cleared of half-written files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "archive/archive_file.h"
#include "archive/archive_quota.h"
#include "lib/log.h"
#include "perfmap_tools.h"

#define MAX_DUPS 1000
#define COPY_BUF (64u << 10)

/*
 * A jitdump's bytes as they are, its first @rq->max_map_bytes at most: the
 * event loop moved none larger, so one larger now was grown by its owner
 * after the move (a prefix of a dump reads as far as its last whole record).
 */
static int copy_verbatim(const struct archive_file_req *rq, int out_fd, struct archive_file_res *res)
{
	uint64_t left = rq->max_map_bytes ? rq->max_map_bytes : UINT64_MAX;
	char *buf = malloc(COPY_BUF);
	ssize_t n;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (left) {
		n = read(rq->src_fd, buf, left < COPY_BUF ? (size_t)left : COPY_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		err = perfmap__write_all(out_fd, buf, (size_t)n);
		if (err)
			break;
		left -= (uint64_t)n;
	}
	/* One byte more than the bound: there is a rest, left behind. */
	if (!err && !left && read(rq->src_fd, buf, 1) > 0)
		res->truncated = true;
	free(buf);
	return err;
}

/* The contents, compacted unless the map is past @max_map_bytes or too large to hold. */
static int fill(const struct archive_file_req *rq, int out_fd, struct archive_file_res *res)
{
	struct perfmap_compact_job job = { .max_bytes = rq->max_map_bytes,
					   .max_table_bytes = rq->max_table_bytes };
	int err;

	if (rq->verbatim)
		return copy_verbatim(rq, out_fd, res);
	/*
	 * The policy moves no map over --max-map-bytes: one over it now was
	 * written to by its owner after the move. Its first bytes are kept.
	 */
	if (rq->max_map_bytes && rq->src_size > rq->max_map_bytes) {
		err = perfmap__stream_fill(rq->src_fd, out_fd, &job);
		res->uncompacted = "written to after it was moved aside, past --max-map-bytes: its first --max-map-bytes kept";
	} else {
		err = perfmap__compact_fill(rq->src_fd, out_fd, &job);
		if (job.uncompacted)
			res->uncompacted = "too many entries to compact in the table's memory bound";
	}
	if (err == -EFBIG) {
		/* Grown while being read: the same as above. */
		if (ftruncate(out_fd, 0) || lseek(out_fd, 0, SEEK_SET) || lseek(rq->src_fd, 0, SEEK_SET))
			return -errno;
		err = perfmap__stream_fill(rq->src_fd, out_fd, &job);
		res->uncompacted = "written to after it was moved aside, past --max-map-bytes: its first --max-map-bytes kept";
	}
	res->entries = (unsigned long)job.table.entries;
	res->lines = (unsigned long)job.table.lines_out;
	return err;
}

/* "perf-1-2.map" -> "perf-1-2-dup3.map"; "jit-1-2.dump" -> "jit-1-2-dup3.dump". */
static void dup_name(const char *name, unsigned int n, char *buf, size_t len)
{
	const char *ext = archive_file__is_dump(name) ? ".dump" : ".map";
	size_t stem = strlen(name);

	if (stem > strlen(ext) && !strcmp(name + stem - strlen(ext), ext))
		stem -= strlen(ext);
	snprintf(buf, len, "%.*s-dup%u%s", (int)stem, name, n, ext);
}

bool archive_file__is_dump(const char *name)
{
	size_t n = strlen(name);

	return n > 9 && !strncmp(name, "jit-", 4) && !strcmp(name + n - 5, ".dump");
}

/* Give @tmp its name, or the first free one after it; never replace a file. */
static int place(int dfd, const char *tmp, const char *name, struct archive_file_res *res)
{
	unsigned int n;
	int err = 0;

	snprintf(res->name, sizeof(res->name), "%s", name);
	for (n = 2; n < MAX_DUPS; n++) {
		if (!renameat2(dfd, tmp, dfd, res->name, RENAME_NOREPLACE))
			return 0;
		err = -errno;
		/* A file system without RENAME_NOREPLACE: a link fails just the same on a name taken. */
		if (err == -EINVAL && !linkat(dfd, tmp, dfd, res->name, 0)) {
			unlinkat(dfd, tmp, 0);
			return 0;
		}
		if (err == -EINVAL)
			err = -errno;
		if (err != -EEXIST)
			return err;
		dup_name(name, n, res->name, sizeof(res->name));
	}
	return -EEXIST;
}

int archive_file__write(const struct archive_file_req *rq, struct archive_file_res *res)
{
	char path[4096], *tmp;
	struct stat st;
	int fd, err;

	memset(res, 0, sizeof(*res));
	if ((size_t)snprintf(path, sizeof(path), "%s/" ARCHIVE_TMP_PREFIX "XXXXXX", rq->dir) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	tmp = strrchr(path, '/') + 1;
	/* O_EXCL underneath, in a directory that is root's alone. */
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		res->why = "cannot create a temporary file in the archive";
		return -errno;
	}
	err = fill(rq, fd, res);
	if (err) {
		res->why = "cannot read or write it";
		goto unlink_tmp;
	}
	/*
	 * Before the chown: a user.* attribute needs write access, which the
	 * agent has to its own file only. A file system without such
	 * attributes archives the map all the same; a kill after the link
	 * then costs a second copy at the next start, never the map.
	 */
	if (rq->staged && fsetxattr(fd, ARCHIVE_STAGED_XATTR, rq->staged, strlen(rq->staged), 0) &&
	    errno != ENOTSUP) {
		err = -errno;
		res->why = "cannot mark it with its staged map's name";
		goto unlink_tmp;
	}
	/* The owner's share: the quota counts a user's maps by the file's uid. */
	if (fchown(fd, rq->uid, rq->gid)) {
		err = -errno;
		res->why = "cannot give it its owner's uid";
		goto unlink_tmp;
	}
	/* The quota's index counts it from now on, as a listing would have found it. */
	if (fstat(fd, &st)) {
		err = -errno;
		res->why = "cannot stat what was written";
		goto unlink_tmp;
	}
	res->cost = archive_quota__cost(&st);
	res->at = st.st_mtim;
	/* Its data before its name: a name linked to blocks not yet written would be all the crash left. */
	if (fsync(fd)) {
		err = -errno;
		res->why = "cannot sync it to disk";
		goto unlink_tmp;
	}
	err = place(rq->dir_fd, tmp, rq->name, res);
	if (err) {
		res->why = "cannot link it to a free name";
		goto unlink_tmp;
	}
	close(fd);
	res->linked = true;
	/*
	 * Its name before the staged map's removal, which may be on another
	 * file system. Linked but not synced, it stays: the caller keeps the
	 * staged map, which the next start finds archived by its mark.
	 */
	if (fsync(rq->dir_fd)) {
		res->why = "cannot sync the archive directory";
		return -errno;
	}
	return 0;
unlink_tmp:
	close(fd);
	unlinkat(rq->dir_fd, tmp, 0);
	return err;
}

/* Does the archived map @name carry @staged's mark? */
static bool marked(int dir_fd, const char *name, const char *staged)
{
	char mark[128];
	ssize_t n;
	int fd;

	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = fgetxattr(fd, ARCHIVE_STAGED_XATTR, mark, sizeof(mark));
	close(fd);
	return n == (ssize_t)strlen(staged) && !memcmp(mark, staged, (size_t)n);
}

int archive_file__find(int dir_fd, const char *name, const char *staged, char *found, size_t len)
{
	char cand[128];  /* as struct archive_file_res's name */
	unsigned int n;

	/*
	 * Every name place() can give, not only up to the first free one: the
	 * quota may have evicted an older map under an earlier name since.
	 */
	snprintf(cand, sizeof(cand), "%s", name);
	for (n = 2; n <= MAX_DUPS; n++) {
		if (marked(dir_fd, cand, staged)) {
			snprintf(found, len, "%s", cand);
			return 0;
		}
		dup_name(name, n, cand, sizeof(cand));
	}
	return -ENOENT;
}

/* ---- the directory ---- */

int archive_dir__make(const char *dir)
{
	char path[4096], *p;
	struct stat st;

	snprintf(path, sizeof(path), "%s", dir);
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			goto say_error;
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		goto say_error;
	if (lstat(path, &st))
		goto say_error;
	/*
	 * Others able to write here could plant links among the archives we
	 * delete. Able to search it, a user could reach the archived maps
	 * chowned to them, write them past what the quota counts or link them
	 * elsewhere, and read the names of everyone's: 077 clear, as the journal.
	 */
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		pr_err("archive %s: must be a directory owned by uid %u with no access for group or others (mode %03o; chmod 700 it)",
		       dir, (unsigned int)geteuid(), (unsigned int)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
say_error:
	pr_err("archive %s: %s", dir, strerror(errno));
	return -errno;
}

/*
 * Files the worker was writing when the agent stopped: never linked to a
 * name, never complete. One another agent on the same archive writes now is
 * open: a write lease is granted only on a file nobody has open.
 */
void archive_dir__remove_temporaries(int dir_fd)
{
	struct dirent *de;
	DIR *d;
	int fd, tfd;

	fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, ARCHIVE_TMP_PREFIX, strlen(ARCHIVE_TMP_PREFIX)))
			continue;
		tfd = openat(dir_fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (tfd < 0)
			continue;
		if (!fcntl(tfd, F_SETLEASE, F_WRLCK) && !unlinkat(dir_fd, de->d_name, 0))
			pr_info("archive: removed %s, a part of a map left by an agent that died writing it",
				de->d_name);
		close(tfd);
	}
	closedir(d);
}

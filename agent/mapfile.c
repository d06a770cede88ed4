/*
 * Where a forked child's map is written. A new map is built in an unnamed
 * O_TMPFILE and linked in whole: a profiler sees no map or a complete one,
 * and linkat() never follows or replaces what is at the name. A map the
 * child's runtime made first is appended to, in whole lines, never truncated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "internal.h"
#include "log.h"
#include "mapfile.h"
#include "perfmap.h"

#define COPY_READ_BUF (256u << 10)
#define COPY_OUT_BUF (64u << 10)

void mapfile_name(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "perf-%d.map", (int)pid);
}

bool mapfile_pid(const char *name, pid_t *pid)
{
	char *end;
	long v;

	if (strncmp(name, "perf-", 5))
		return false;
	v = strtol(name + 5, &end, 10);
	if (end == name + 5 || strcmp(end, ".map") || v <= 0 || v > 0x7fffffff)
		return false;
	*pid = (pid_t)v;
	return true;
}

int mapfile_stat(const struct agent *a, pid_t pid, struct stat *st)
{
	char name[32];

	mapfile_name(pid, name, sizeof(name));
	return fstatat(a->map_dir_fd, name, st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

/*
 * File times come from the coarse clock (up to a jiffy behind) and /proc
 * start times are whole ticks: a map written just after its process started
 * can look older than it. Only a map older by more than both counts as an
 * earlier process's; a pid reused within that slack is caught by its exit
 * event instead (archive.c, retain_evict_pid).
 */
#define STALE_SLACK_NS (20 * 1000000LL)

bool mapfile_older_than(const struct stat *st, int64_t start_real_ns)
{
	int64_t mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;

	return mtime + STALE_SLACK_NS < start_real_ns;
}

int64_t mapfile_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Hardened open of a map in the map directory: no symlink, FIFO, device or hard link. */
static int open_map(struct agent *a, const char *name, int flags, uid_t owner,
		    struct stat *st)
{
	int pfd, fd, err;

	pfd = openat(a->map_dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st)) {
		err = -errno;
		goto close_pfd;
	}
	err = perfmap__check_map_inode(st, true, owner, a->cfg.max_map_bytes);
	if (err)
		goto close_pfd;
	fd = perfmap__reopen_fd(pfd, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	close(pfd);
	return fd;

close_pfd:
	close(pfd);
	return err;
}

/* The first entry of a map, for telling a runtime's own copy of the parent's entries. */
static bool first_entry(int fd, char *buf, size_t cap, struct perfmap_record *rec)
{
	ssize_t n = pread(fd, buf, cap, 0);
	char *nl;

	if (n <= 0)
		return false;
	nl = memchr(buf, '\n', n);
	return nl && perfmap_parse_line(buf, nl - buf, 0, rec) == PERFMAP_REJECT_NONE;
}

static bool same_first_entry(int parent_fd, int child_fd)
{
	char a[PERFMAP_LINE_MAX], b[PERFMAP_LINE_MAX];
	struct perfmap_record ra, rb;

	return first_entry(parent_fd, a, sizeof(a), &ra) &&
	       first_entry(child_fd, b, sizeof(b), &rb) && ra.start == rb.start &&
	       ra.size == rb.size && ra.name_len == rb.name_len &&
	       !memcmp(ra.name, rb.name, ra.name_len);
}

static bool ends_in_newline(int fd, off_t size)
{
	char c;

	return size == 0 || (pread(fd, &c, 1, size - 1) == 1 && c == '\n');
}

/* The parent's entries, up to @limit bytes, into @dst_fd. */
static long copy_entries(int parent_fd, uint64_t limit, int dst_fd)
{
	char *buf = malloc(COPY_READ_BUF), *out = malloc(COPY_OUT_BUF);
	long n = -ENOMEM;

	if (buf && out && lseek(parent_fd, 0, SEEK_SET) == 0)
		n = perfmap__copy_fd(parent_fd, limit, dst_fd, buf, COPY_READ_BUF,
				     out, COPY_OUT_BUF);
	free(buf);
	free(out);
	return n;
}

/* Where the last whole line of the first @size bytes ends; 0 if none does. */
static off_t whole_lines_end(int fd, off_t size)
{
	char buf[4096];
	off_t end = size;
	ssize_t n;
	char *nl;

	while (end > 0) {
		n = end < (off_t)sizeof(buf) ? end : (off_t)sizeof(buf);
		if (pread(fd, buf, n, end - n) != n)
			return 0;
		nl = memrchr(buf, '\n', n);
		if (nl)
			return end - n + (nl - buf) + 1;
		end -= n;
	}
	return 0;
}

/*
 * The parent's map byte for byte, up to its last whole line within @limit:
 * what the parent's profiler would read, in the kernel's own copy (no
 * parsing: 10k entries in a fraction of a millisecond). The file is unnamed
 * until done, so nobody sees a part.
 */
static off_t copy_raw(int parent_fd, uint64_t limit, int dst_fd)
{
	off_t end = whole_lines_end(parent_fd, (off_t)limit), in = 0;
	char buf[65536];
	ssize_t n;

	while (in < end) {
		n = copy_file_range(parent_fd, &in, dst_fd, NULL, end - in, 0);
		if (n > 0)
			continue;
		if (n == 0)
			return -EIO;  /* shrank under us */
		if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		/* Older kernels and some filesystems: read and write. */
		n = pread(parent_fd, buf, end - in < (off_t)sizeof(buf) ? end - in : (off_t)sizeof(buf), in);
		if (n <= 0)
			return n ? -errno : -EIO;
		if (perfmap__write_all(dst_fd, buf, n))
			return -errno;
		in += n;
	}
	return end;
}

/* Lines in the first @len bytes of @fd: the entry count for the log. */
static long count_lines(int fd, off_t len)
{
	char buf[65536];
	off_t off = 0;
	long lines = 0;
	ssize_t n;
	char *p, *e;

	while (off < len && (n = pread(fd, buf, len - off < (off_t)sizeof(buf) ?
				       len - off : (off_t)sizeof(buf), off)) > 0) {
		for (p = buf, e = buf + n; (p = memchr(p, '\n', e - p)); p++)
			lines++;
		off += n;
	}
	return lines;
}

/* Link an open O_TMPFILE at @name; EEXIST when anything is there. */
static int link_tmpfile(struct agent *a, int fd, const char *name)
{
	char proc[64];

	if (!linkat(fd, "", a->map_dir_fd, name, AT_EMPTY_PATH))
		return 0;
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	/* Without CAP_DAC_READ_SEARCH, AT_EMPTY_PATH is refused: go through /proc. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, a->map_dir_fd, name, AT_SYMLINK_FOLLOW) ? -errno : 0;
}

static int create_copy(struct agent *a, const struct copy_req *rq, int parent_fd,
		       uint64_t limit, const char *name, struct copy_result *res)
{
	struct stat st;
	off_t copied;
	int fd, err;

	fd = openat(a->map_dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		res->why = "cannot be made: no unnamed file (O_TMPFILE) in the map directory";
		return -errno;
	}
	/* The child's runtime must be able to append to it, and nobody else to read it. */
	if (fchown(fd, rq->uid, rq->gid) || fchmod(fd, 0600)) {
		err = -errno;
		res->why = "cannot be given to the child's uid";
		goto close_fd;
	}
	copied = copy_raw(parent_fd, limit, fd);
	if (copied < 0) {
		err = (int)copied;
		res->why = "cannot be filled with the parent's entries";
		goto close_fd;
	}
	err = link_tmpfile(a, fd, name);
	if (err) {
		res->why = "cannot be linked in";
		goto close_fd;
	}
	if (!fstat(fd, &st)) {
		res->size = st.st_size;
		res->mtime_ns = mapfile_mtime_ns(&st);
	}
	res->kind = COPY_CREATED;
	/* Counted after the link: the child's profiler is not kept waiting for a log line. */
	res->entries = count_lines(parent_fd, copied);
close_fd:
	close(fd);
	return err;
}

static int append_copy(struct agent *a, const struct copy_req *rq, int parent_fd,
		       uint64_t limit, const char *name, struct copy_result *res)
{
	struct stat st;
	long n;
	int fd, err = 0;

	fd = open_map(a, name, O_RDWR | O_APPEND, rq->uid, &st);
	if (fd < 0) {
		res->why = perfmap_open_strerror(fd);
		res->refused = true;
		return fd;
	}
	if (mapfile_older_than(&st, rq->child_start_real_ns)) {
		res->why = "was left by an earlier process with this pid";
		err = -ESTALE;
		goto close_fd;
	}
	if (same_first_entry(parent_fd, fd)) {
		res->kind = COPY_BY_RUNTIME;
		goto close_fd;
	}
	/* Our lines would glue onto the runtime's unfinished one. */
	if (!ends_in_newline(fd, st.st_size)) {
		res->why = "ends in an unfinished line";
		err = -EAGAIN;
		goto close_fd;
	}
	n = copy_entries(parent_fd, limit, fd);
	if (n < 0) {
		err = (int)n;
		res->why = "cannot take the parent's entries";
		goto close_fd;
	}
	res->kind = COPY_APPENDED;
	res->entries = n;
	if (!fstat(fd, &st)) {
		res->size = st.st_size;
		res->mtime_ns = mapfile_mtime_ns(&st);
	}
close_fd:
	close(fd);
	return err;
}

int mapfile_copy(struct agent *a, const struct copy_req *rq, struct copy_result *res)
{
	char pname[32], cname[32];
	struct stat pst;
	int pfd, err;

	memset(res, 0, sizeof(*res));
	mapfile_name(rq->parent, pname, sizeof(pname));
	mapfile_name(rq->child, cname, sizeof(cname));
	res->on_pid = rq->parent;
	pfd = open_map(a, pname, O_RDONLY, rq->uid, &pst);
	if (pfd == -ENOENT)
		return 0;
	if (pfd < 0) {
		res->why = perfmap_open_strerror(pfd);
		res->refused = true;
		return pfd;
	}
	/* An earlier holder of the parent's pid wrote it: not the parent's code. */
	if (mapfile_older_than(&pst, rq->parent_start_real_ns))
		goto close_parent;
	if (a->cfg.dry_run) {
		res->kind = COPY_CREATED;
		goto close_parent;
	}
	res->on_pid = rq->child;
	/* Whole lines up to the size now: the parent may be appending as we read. */
	err = create_copy(a, rq, pfd, pst.st_size, cname, res);
	if (err == -EEXIST)
		err = append_copy(a, rq, pfd, pst.st_size, cname, res);
	close(pfd);
	return err;

close_parent:
	close(pfd);
	return 0;
}

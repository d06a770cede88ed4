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

#include "clock.h"
#include "mapfile.h"
#include "mapname.h"
#include "perfmap_tools.h"
#include "privs.h"
#include "procfs.h"

#define COPY_READ_BUF (256u << 10)
#define COPY_OUT_BUF (64u << 10)

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

/* Link an open O_TMPFILE at @name; -EEXIST when anything is there. */
static int link_tmpfile(int dirfd, int fd, const char *name)
{
	char proc[64];

	if (!linkat(fd, "", dirfd, name, AT_EMPTY_PATH))
		return 0;
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	/* Without CAP_DAC_READ_SEARCH, AT_EMPTY_PATH is refused: go through /proc. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) ? -errno : 0;
}

static void map_info_of(const struct stat *st, struct span born, struct map_info *mi)
{
	mi->dev = st->st_dev;
	mi->ino = st->st_ino;
	mi->size = st->st_size;
	mi->uid = st->st_uid;
	mi->born = born;
}

/* The parent's map, hardened, and still the file the policy judged. */
static int open_parent(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
		       struct stat *st, struct copy_result *res)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .check_owner = true, .owner = rq->uid,
		     .max_bytes = max_bytes);
	char name[32];
	int fd;

	map_name(rq->parent, name, sizeof(name));
	fd = perfmap__open_map_at(dirfd, name, O_RDONLY, &oopts, st);
	if (fd < 0) {
		res->why = perfmap_open_strerror(fd);
		res->refused = true;
		return fd;
	}
	if (st->st_dev != rq->parent_map->dev || st->st_ino != rq->parent_map->ino) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int mapfile_create(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
		   struct copy_result *res)
{
	uint64_t t0 = clock_mono_ns(), linked_lo;
	struct stat pst, st;
	char name[32];
	off_t copied;
	int pfd, fd, err;

	pfd = open_parent(dirfd, rq, max_bytes, &pst, res);
	if (pfd < 0)
		return pfd;
	fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		res->why = "cannot be made: no unnamed file (O_TMPFILE) in the map directory";
		goto close_parent;
	}
	/*
	 * The child's runtime must be able to append to it, and nobody else to
	 * read it. The mode first, while the file is still ours: changing it
	 * after would take CAP_FOWNER for another reason than the link below.
	 */
	if (fchmod(fd, 0600) || fchown(fd, rq->uid, rq->gid)) {
		err = -errno;
		res->why = "cannot be given to the child's uid";
		goto close_fd;
	}
	/* Whole lines up to the size now: the parent may be appending as we read. */
	copied = copy_raw(pfd, pst.st_size, fd);
	if (copied < 0) {
		err = (int)copied;
		res->why = "cannot be filled with the parent's entries";
		goto close_fd;
	}
	map_name(rq->child, name, sizeof(name));
	/* Read late, the child may be gone and its pid another's: not that one's map to make. */
	if (procfs_pid_held(rq->child, rq->child_start_ticks)) {
		err = -ESRCH;
		goto close_fd;
	}
	linked_lo = clock_boot_ns();
	err = link_tmpfile(dirfd, fd, name);
	if (err) {
		res->why = "cannot be linked in";
		goto close_fd;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		res->why = "cannot be read back";
		goto close_fd;
	}
	map_info_of(&st, (struct span){ linked_lo, clock_boot_ns() }, &res->map);
	res->kind = COPY_CREATED;
	res->took_ns = clock_mono_ns() - t0;
	/* Counted after the link: the child's profiler is not kept waiting for a log line. */
	res->entries = count_lines(pfd, copied);
close_fd:
	close(fd);
close_parent:
	close(pfd);
	return err;
}

int mapfile_append(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
		   struct copy_result *res)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .check_owner = true, .owner = rq->uid,
		     .max_bytes = max_bytes);
	uint64_t t0 = clock_mono_ns();
	struct stat pst, st;
	char name[32];
	int pfd, fd, err = 0;
	long n;

	pfd = open_parent(dirfd, rq, max_bytes, &pst, res);
	if (pfd < 0)
		return pfd;
	map_name(rq->child, name, sizeof(name));
	/* The file at the child's path is another process's once that one holds the pid. */
	if (procfs_pid_held(rq->child, rq->child_start_ticks)) {
		err = -ESRCH;
		goto close_parent;
	}
	/* The one write open of another uid's file: CAP_DAC_OVERRIDE for it alone. */
	privs_override_begin();
	fd = perfmap__open_map_at(dirfd, name, O_RDWR | O_APPEND, &oopts, &st);
	privs_override_end();
	if (fd < 0) {
		err = fd;
		res->why = perfmap_open_strerror(fd);
		res->refused = true;
		goto close_parent;
	}
	if (same_first_entry(pfd, fd)) {
		res->kind = COPY_BY_RUNTIME;
		goto close_fd;
	}
	/* Our lines would glue onto the runtime's unfinished one. */
	if (!ends_in_newline(fd, st.st_size)) {
		res->why = "ends in an unfinished line";
		err = -EAGAIN;
		goto close_fd;
	}
	n = copy_entries(pfd, pst.st_size, fd);
	if (n < 0) {
		err = (int)n;
		res->why = "cannot take the parent's entries";
		goto close_fd;
	}
	res->kind = COPY_APPENDED;
	res->entries = n;
	res->took_ns = clock_mono_ns() - t0;
	if (!fstat(fd, &st))
		map_info_of(&st, SPAN_UNKNOWN, &res->map);
close_fd:
	close(fd);
close_parent:
	close(pfd);
	return err;
}

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

#include "lib/clock.h"
#include "lib/inherit.h"
#include "store/mapfile.h"
#include "lib/mapname.h"
#include "perfmap_tools.h"
#include "lib/privs.h"
#include "lib/procfs.h"

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

/*
 * The next stretch of data at or after @off and before @end: [*lo, *hi).
 * Holes (a file extended by truncate or a seek past its end) read as NULs,
 * which no map line holds: they are skipped, never read nor written, so a
 * copy costs what the parent really wrote. Without SEEK_DATA, all is data.
 */
static bool next_data(int fd, off_t off, off_t end, off_t *lo, off_t *hi)
{
	off_t d, h;

	if (off >= end)
		return false;
	d = lseek(fd, off, SEEK_DATA);
	if (d < 0) {
		if (errno == ENXIO)
			return false;  /* nothing but a hole from @off on */
		*lo = off;
		*hi = end;
		return true;
	}
	if (d >= end)
		return false;
	h = lseek(fd, d, SEEK_HOLE);
	*lo = d;
	*hi = h < 0 || h > end ? end : h;
	return true;
}

/*
 * Room for @len more bytes past @size, taken before the first byte is
 * appended: a full filesystem then refuses the whole append, where a write
 * that ran out of space halfway would leave half a line at the end of the
 * child's map. The canonical lines are never longer than the parent's raw
 * ones (padding, 0x and CRs go; bytes are replaced one for one), so the
 * parent's data is enough. Filesystems without fallocate() go on without.
 */
static int reserve(int fd, off_t size, off_t len)
{
	if (len <= 0 || !fallocate(fd, FALLOC_FL_KEEP_SIZE, size, len))
		return 0;
	return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -errno;
}

/*
 * The end of the last '\n' in [lo, hi) of @fd, or -1 when there is none in
 * its last PERFMAP_LINE_MAX bytes: what ends in a longer run without one is
 * no line anyone reads, and a dense map without newlines is not read whole.
 */
static off_t last_newline(int fd, off_t lo, off_t hi)
{
	char buf[4096];
	off_t end = hi;
	ssize_t n;
	char *nl;

	while (end > lo && hi - end < PERFMAP_LINE_MAX) {
		n = end - lo < (off_t)sizeof(buf) ? end - lo : (off_t)sizeof(buf);
		if (pread(fd, buf, n, end - n) != n)
			return -1;
		nl = memrchr(buf, '\n', n);
		if (nl)
			return end - n + (nl - buf) + 1;
		end -= n;
	}
	return -1;
}

/*
 * Where the last whole line of the first @size bytes ends; 0 if none does.
 * Holes are skipped. -ECANCELED when @gate says the copy is stopped.
 */
static off_t whole_lines_end(int fd, off_t size, const struct copy_gate *gate)
{
	off_t off = 0, lo, hi, end = 0, nl;

	/* Forwards, stretch by stretch: a stretch's newline is found near its end. */
	while (next_data(fd, off, size, &lo, &hi)) {
		if (gate && gate->stopped && gate->stopped(gate->arg))
			return -ECANCELED;
		nl = last_newline(fd, lo, hi);
		if (nl > 0)
			end = nl;
		off = hi;
	}
	return end;
}

/* [lo, hi) of @src into @dst at the same offset. */
static int copy_range(int src, int dst, off_t lo, off_t hi)
{
	char buf[65536];
	off_t in = lo, out;
	ssize_t n, w;

	while (in < hi) {
		out = in;
		n = copy_file_range(src, &in, dst, &out, hi - in, 0);
		if (n > 0)
			continue;
		if (n == 0)
			return -EIO;  /* shrank under us */
		if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		/* Older kernels and some filesystems: read and write. */
		n = pread(src, buf, hi - in < (off_t)sizeof(buf) ? hi - in : (off_t)sizeof(buf), in);
		if (n <= 0)
			return n ? -errno : -EIO;
		w = pwrite(dst, buf, n, in);
		if (w < 0)
			return -errno;
		if (w != n)
			return -EIO;  /* short: it sets no errno, and whatever errno holds is stale */
		in += n;
	}
	return 0;
}

/*
 * Write-behind for a large copy off the event loop: each chunk is sent to
 * the disk as soon as it is written, and the one before it waited for, so
 * that no copy piles up dirty pages whose writeback stalls every writer on
 * the file system (the event loop's small copies first).
 */
#define WRITE_BEHIND_CHUNK (4 << 20)

struct write_behind {
	bool on;
	off_t prev_lo, prev_len;
};

static void write_behind(struct write_behind *wb, int fd, off_t lo, off_t len)
{
	if (!wb->on)
		return;
	sync_file_range(fd, lo, len, SYNC_FILE_RANGE_WRITE);
	if (wb->prev_len)
		sync_file_range(fd, wb->prev_lo, wb->prev_len, SYNC_FILE_RANGE_WAIT_BEFORE |
				SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
	wb->prev_lo = lo;
	wb->prev_len = len;
}

/*
 * The parent's map byte for byte, up to its last whole line within @limit:
 * what the parent's profiler would read, in the kernel's own copy (no
 * parsing: 10k entries in a fraction of a millisecond). Only its data is
 * copied, at the same offsets; its holes stay holes. More than @max_data
 * bytes of data: -EFBIG. The file is unnamed until done, so nobody sees a part.
 */
static off_t copy_raw(int parent_fd, uint64_t limit, uint64_t max_data, int dst_fd,
		      const struct copy_gate *gate, uint64_t *written)
{
	off_t end = whole_lines_end(parent_fd, (off_t)limit, gate), off = 0, lo, hi;
	struct write_behind wb = { .on = gate != NULL };
	int err;

	*written = 0;
	if (end < 0)
		return end;
	while (next_data(parent_fd, off, end, &lo, &hi)) {
		if (hi - lo > WRITE_BEHIND_CHUNK)
			hi = lo + WRITE_BEHIND_CHUNK;
		if (max_data && *written + (hi - lo) > max_data)
			return -EFBIG;
		/* Stopped (the child exec'd or ended, the agent stops): no more to write. */
		if (gate && gate->stopped && gate->stopped(gate->arg))
			return -ECANCELED;
		err = copy_range(parent_fd, dst_fd, lo, hi);
		if (err)
			return err;
		write_behind(&wb, dst_fd, lo, hi - lo);
		*written += hi - lo;
		off = hi;
	}
	/* A hole at the end, or data shorter than the last stretch: the size as it was. */
	if (ftruncate(dst_fd, end))
		return -errno;
	return end;
}

/* perfmap_keep_fn for copy_entries(). */
static bool inherited_has(void *ctx, uint64_t start, uint64_t size)
{
	(void)size;
	return inherit_has(ctx, start);
}

/*
 * The next chunk of whole lines of [@lo, @hi) of @fd in @buf: their length,
 * in *@whole, and the bytes consumed (0 at the end, or -errno). A run longer
 * than the buffer without a newline is no line anyone reads: it is passed
 * over up to its end, never judged or written in pieces.
 */
static ssize_t next_lines(int fd, off_t lo, off_t hi, char *buf, size_t cap, bool *skipping,
			  size_t *whole)
{
	ssize_t n = pread(fd, buf, (size_t)(hi - lo) < cap ? (size_t)(hi - lo) : cap, lo);
	char *nl, *first;

	*whole = 0;
	if (n <= 0)
		return n < 0 ? -errno : 0;
	nl = memrchr(buf, '\n', (size_t)n);
	if (!nl) {
		*skipping = true;
		return n;
	}
	if (*skipping) {
		/* The rest of the long run, up to its newline, is not a line. */
		first = memchr(buf, '\n', (size_t)n);
		*skipping = false;
		memmove(buf, first + 1, (size_t)(nl - first));
		*whole = (size_t)(nl - first);
		return n - (buf + n - (nl + 1));
	}
	*whole = (size_t)(nl - buf) + 1;
	return (ssize_t)*whole;
}

/*
 * The lines of [@lo, @hi) of @fd into @dst, but those naming memory @in
 * lacks: the parent's bytes otherwise, as copy_raw() leaves them. A line the
 * stretch's end cuts is no line. Written behind, a chunk at a time, and
 * stopped when the gate says so. 0 or -errno.
 */
static int filter_stretch(int fd, off_t lo, off_t hi, int dst, const struct inherit *in,
			  const struct copy_gate *gate, char *buf, long *left_out,
			  uint64_t *written)
{
	struct write_behind wb = { .on = gate != NULL };
	bool skipping = false;
	size_t whole, kept;
	ssize_t n;
	int err;

	while (lo < hi) {
		if (gate && gate->stopped && gate->stopped(gate->arg))
			return -ECANCELED;
		n = next_lines(fd, lo, hi, buf, COPY_READ_BUF, &skipping, &whole);
		if (n <= 0)
			return (int)n;
		kept = inherit_filter(in, buf, whole, left_out);
		err = perfmap__write_all(dst, buf, kept);
		if (err)
			return err;
		write_behind(&wb, dst, (off_t)*written, (off_t)kept);
		*written += kept;
		lo += n;
	}
	return 0;
}

/*
 * The parent's lines up to its whole lines' end, those naming memory the
 * child lacks left out; -EFBIG past @max_data bytes of data. The bytes
 * written, or -errno.
 */
static off_t copy_filtered(int parent_fd, uint64_t limit, uint64_t max_data, int dst_fd,
			   const struct copy_gate *gate, const struct inherit *in,
			   long *left_out, uint64_t *written)
{
	off_t end = whole_lines_end(parent_fd, (off_t)limit, gate), off = 0, lo, hi;
	char *buf = malloc(COPY_READ_BUF);
	uint64_t read = 0;
	int err = 0;

	*written = 0;
	if (end < 0 || !buf) {
		free(buf);
		return end < 0 ? end : -ENOMEM;
	}
	while (!err && next_data(parent_fd, off, end, &lo, &hi)) {
		read += hi - lo;
		err = max_data && read > max_data ? -EFBIG :
		      filter_stretch(parent_fd, lo, hi, dst_fd, in, gate, buf, left_out, written);
		off = hi;
	}
	free(buf);
	return err ? err : (off_t)*written;
}

/*
 * Does the parent's map name memory the child lacks? Only each line's start
 * address is read, and the first such line ends the look: most children
 * inherited everything, and their copy stays the cheap one. 1, 0, or -errno
 * (-EFBIG past @max_data bytes of data, as the copy itself would).
 */
static int names_other(int fd, off_t limit, uint64_t max_data, const struct inherit *in)
{
	char *buf = malloc(COPY_READ_BUF);
	off_t off = 0, lo, hi;
	uint64_t read = 0;
	bool skipping;
	size_t whole;
	ssize_t n;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (!ret && next_data(fd, off, limit, &lo, &hi)) {
		read += hi - lo;
		if (max_data && read > max_data) {
			ret = -EFBIG;
			break;
		}
		skipping = false;
		for (off = lo; !ret && off < hi; off += n) {
			n = next_lines(fd, off, hi, buf, COPY_READ_BUF, &skipping, &whole);
			if (n <= 0) {
				ret = (int)n;
				break;
			}
			ret = inherit_names_other(in, buf, whole);
		}
		off = hi;
	}
	free(buf);
	return ret;
}

/*
 * The parent's entries, up to @limit bytes, into @dst_fd as canonical lines,
 * stretch by stretch of data (a line a hole cuts is no line); -EFBIG past
 * @max_data bytes read. Those naming memory @in lacks are left out.
 */
static long copy_entries(int parent_fd, uint64_t limit, uint64_t max_data, int dst_fd,
			 const struct inherit *in, long *left_out, uint64_t *written)
{
	char *buf = malloc(COPY_READ_BUF), *out = malloc(COPY_OUT_BUF);
	off_t off = 0, lo, hi, before = lseek(dst_fd, 0, SEEK_END), after;
	uint64_t read = 0;
	long n = 0, total = 0;

	if (!buf || !out)
		n = -ENOMEM;
	while (n >= 0 && next_data(parent_fd, off, (off_t)limit, &lo, &hi)) {
		read += hi - lo;
		if (max_data && read > max_data)
			n = -EFBIG;
		else if (lseek(parent_fd, lo, SEEK_SET) != lo)
			n = -errno;
		else
			n = perfmap__copy_fd_if(parent_fd, hi - lo, dst_fd, buf, COPY_READ_BUF,
						out, COPY_OUT_BUF, in->known ? inherited_has : NULL,
						(void *)in, left_out);
		total += n > 0 ? n : 0;
		off = hi;
	}
	after = lseek(dst_fd, 0, SEEK_END);
	*written = before >= 0 && after > before ? (uint64_t)(after - before) : 0;
	free(buf);
	free(out);
	return n < 0 ? n : total;
}

/* Lines in the first @len bytes of @fd: the entry count for the log. Holes hold none. */
static long count_lines(int fd, off_t len)
{
	char buf[65536];
	off_t off = 0, lo, hi;
	long lines = 0;
	ssize_t n;
	char *p, *e;

	while (next_data(fd, off, len, &lo, &hi)) {
		for (off = lo; off < hi && (n = pread(fd, buf, hi - off < (off_t)sizeof(buf) ?
						      hi - off : (off_t)sizeof(buf), off)) > 0; off += n)
			for (p = buf, e = buf + n; (p = memchr(p, '\n', e - p)); p++)
				lines++;
		off = hi;
	}
	return lines;
}

int mapfile_link_tmpfile(int dirfd, int fd, const char *name)
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

/*
 * An open of @name in the map directory failed: a refusal of what is at the
 * path (a trap: its identity goes with it, for the policy to say it once), or
 * the system's error (out of fds, of memory), the agent's state, not the file's.
 */
static void open_failed(struct copy_result *res, int err, const char *what, int dirfd,
			const char *name)
{
	struct stat st;

	res->refused = err == -ELOOP || err == -EINVAL || err == -EMLINK || err == -EPERM ||
		       err == -EFBIG || err == -EAGAIN;
	res->why = res->refused ? perfmap_open_strerror(err) : what;
	if (!res->refused || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return;
	res->trap_dev = st.st_dev;
	res->trap_ino = st.st_ino;
	snprintf(res->trap_name, sizeof(res->trap_name), "%s", name);
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
		open_failed(res, fd, "cannot be made: the parent's map cannot be opened", dirfd, name);
		return fd;
	}
	if (st->st_dev != rq->parent_map->dev || st->st_ino != rq->parent_map->ino) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int mapfile_open_parent(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
			struct copy_result *res)
{
	struct stat st;

	return open_parent(dirfd, rq, max_bytes, &st, res);
}

/* @parent_fd when the caller opened it (mapfile_open_parent), else the parent's map opened here. */
static int parent_of(int dirfd, int parent_fd, const struct copy_req *rq, uint64_t max_bytes,
		     struct stat *st, struct copy_result *res)
{
	int fd;

	if (parent_fd < 0)
		return open_parent(dirfd, rq, max_bytes, st, res);
	fd = fcntl(parent_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0 || fstat(fd, st)) {
		if (fd >= 0)
			close(fd);
		res->why = "cannot be read";
		return -errno;
	}
	return fd;
}

static int gate_enter(const struct copy_gate *gate)
{
	return gate ? gate->enter(gate->arg) : 0;
}

static void gate_leave(const struct copy_gate *gate, int err, const struct copy_result *res)
{
	if (gate)
		gate->leave(gate->arg, err, res);
}

/* The filled O_TMPFILE @fd at the child's path, unless another process holds the pid by now. */
static int link_child(int dirfd, int fd, const struct copy_req *rq, struct copy_result *res)
{
	uint64_t linked_lo;
	struct stat st;
	char name[32];
	int err;

	map_name(rq->child, name, sizeof(name));
	/* Read late, the child may be gone and its pid another's: not that one's map to make. */
	if (procfs_pid_held(rq->child, rq->child_start_ticks))
		return -ESRCH;
	linked_lo = clock_boot_ns();
	err = mapfile_link_tmpfile(dirfd, fd, name);
	if (err) {
		res->why = "cannot be linked in";
		return err;
	}
	if (fstat(fd, &st)) {
		res->why = "cannot be read back";
		return -errno;
	}
	map_info_of(&st, (struct span){ linked_lo, clock_boot_ns() }, &res->map);
	res->kind = COPY_CREATED;
	return 0;
}

/*
 * A new map's contents: the parent's bytes as they are (holes kept) when the
 * child inherited all they name, else the entries it did inherit, as
 * canonical lines. The bytes written, or -errno.
 */
static off_t fill_copy(int pfd, const struct stat *pst, const struct copy_req *rq, int fd,
		       const struct copy_gate *gate, struct copy_result *res)
{
	struct inherit in = { 0 };
	off_t end;
	long n;

	inherit_read(rq->child, rq->child_start_ticks, &in);
	res->unfiltered = !in.known;
	n = in.known ? names_other(pfd, pst->st_size, rq->max_data, &in) : 0;
	if (n < 0) {
		end = n;
		goto release;
	}
	/*
	 * Whole lines up to the size now (the parent may be appending as we
	 * read), as they are when the child inherited all they name. Off the
	 * loop (gated), a copy may be large: written behind.
	 */
	if (!n) {
		end = copy_raw(pfd, pst->st_size, rq->max_data, fd, gate, &res->bytes);
		goto release;
	}
	end = copy_filtered(pfd, pst->st_size, rq->max_data, fd, gate, &in, &res->left_out,
			    &res->bytes);
release:
	inherit_release(&in);
	return end;
}

int mapfile_create(int dirfd, int parent_fd, const struct copy_req *rq, uint64_t max_bytes,
		   const struct copy_gate *gate, struct copy_result *res)
{
	uint64_t t0 = clock_mono_ns();
	struct stat pst, st;
	char name[32];
	off_t copied;
	int pfd, fd, err;

	pfd = parent_of(dirfd, parent_fd, rq, max_bytes, &pst, res);
	if (pfd < 0)
		return pfd;
	map_name(rq->child, name, sizeof(name));
	/* The child's runtime made its map first: it is appended to; no copy is filled for nothing. */
	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		err = -EEXIST;
		goto close_parent;
	}
	fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
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
	copied = fill_copy(pfd, &pst, rq, fd, gate, res);
	if (copied < 0) {
		err = (int)copied;
		res->why = err == -EFBIG ? "cannot be filled: the parent's map grew past what was allowed for it" :
			   err == -ECANCELED ? "stopped" : "cannot be filled with the parent's entries";
		goto close_fd;
	}
	/* Whoever waits on this copy learns at once whether it shows at the path. */
	err = gate_enter(gate);
	if (err)
		goto close_fd;
	err = link_child(dirfd, fd, rq, res);
	res->took_ns = clock_mono_ns() - t0;
	gate_leave(gate, err, res);
	if (err)
		goto close_fd;
	/* Counted after the link: the child's profiler is not kept waiting for a log line. */
	res->entries = count_lines(res->left_out ? fd : pfd, copied);
close_fd:
	close(fd);
close_parent:
	close(pfd);
	return err;
}

/* The parent's entries appended to the child's @fd, for mapfile_append(). */
static int append_entries(int pfd, const struct stat *pst, const struct copy_req *rq, int fd,
			  struct copy_result *res)
{
	struct inherit in = { 0 };
	struct stat st;
	long n;
	int err;

	if (same_first_entry(pfd, fd)) {
		res->kind = COPY_BY_RUNTIME;
		return 0;
	}
	/* Our lines would glue onto the runtime's unfinished one. */
	if (fstat(fd, &st) || !ends_in_newline(fd, st.st_size)) {
		res->why = "ends in an unfinished line";
		return -EAGAIN;
	}
	/* No more than the data the copy may take: a sparse parent's holes are not reserved. */
	err = reserve(fd, st.st_size, rq->max_data && (uint64_t)pst->st_size > rq->max_data ?
				      (off_t)rq->max_data : pst->st_size);
	if (err) {
		res->why = "has no room for the parent's entries";
		return err;
	}
	inherit_read(rq->child, rq->child_start_ticks, &in);
	res->unfiltered = !in.known;
	n = copy_entries(pfd, pst->st_size, rq->max_data, fd, &in, &res->left_out, &res->bytes);
	inherit_release(&in);
	if (n < 0) {
		res->why = n == -EFBIG ? "cannot take the parent's entries: its map grew past what was allowed for it" :
					 "cannot take the parent's entries";
		return (int)n;
	}
	res->kind = COPY_APPENDED;
	res->entries = n;
	if (!fstat(fd, &st))
		map_info_of(&st, SPAN_UNKNOWN, &res->map);
	return 0;
}

int mapfile_append(int dirfd, int parent_fd, const struct copy_req *rq, uint64_t max_bytes,
		   const struct copy_gate *gate, struct copy_result *res)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .check_owner = true, .owner = rq->uid,
		     .max_bytes = max_bytes);
	uint64_t t0 = clock_mono_ns();
	struct stat pst, st;
	char name[32];
	int pfd, fd, err = 0;

	pfd = parent_of(dirfd, parent_fd, rq, max_bytes, &pst, res);
	if (pfd < 0)
		return pfd;
	/* From here on the child's file may change: whoever waits on the copy knows. */
	err = gate_enter(gate);
	if (err)
		goto close_parent;
	map_name(rq->child, name, sizeof(name));
	/* The file at the child's path is another process's once that one holds the pid. */
	if (procfs_pid_held(rq->child, rq->child_start_ticks)) {
		err = -ESRCH;
		goto leave_gate;
	}
	/* The one write open of another uid's file: CAP_DAC_OVERRIDE for it alone. */
	privs_override_begin();
	fd = perfmap__open_map_at(dirfd, name, O_RDWR | O_APPEND, &oopts, &st);
	privs_override_end();
	if (fd < 0) {
		err = fd;
		open_failed(res, fd, "cannot be opened", dirfd, name);
		goto leave_gate;
	}
	err = append_entries(pfd, &pst, rq, fd, res);
	res->took_ns = clock_mono_ns() - t0;
	close(fd);
leave_gate:
	gate_leave(gate, err, res);
close_parent:
	close(pfd);
	return err;
}

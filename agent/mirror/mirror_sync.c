/*
 * One mirror brought up to date: its source opened inside its process's
 * root and checked (owner, kind, size), its host file made, its complete
 * lines appended in bounded passes; followed across a rewrite in place, a
 * file renamed over it, and what an exec read of either image.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget.h"
#include "lib/clock.h"
#include "lib/mapname.h"
#include "mirror/mirror_internal.h"
#include "perfmap_tools.h"

/* ---- refusals, counted once per file ---- */

void mirror__refuse(struct mirrors *m, struct mirror *mi, enum ns_refusal why,
		   const struct stat *st)
{
	char name[32];

	if (st && st->st_dev == mi->refused.dev && st->st_ino == mi->refused.ino)
		return;  /* looked at again (a retry): counted already */
	if (st) {
		mi->refused.dev = st->st_dev;
		mi->refused.ino = st->st_ino;
	}
	m->stats.refused[why]++;
	m->stats.refused_total++;
	map_name(mi->ns_pid, name, sizeof(name));
	if (!st || log_first_time(st->st_dev, st->st_ino, name))
		pr_warn("mirror %d (%s): %s/%s in %s %s", (int)mi->pid, mi->comm, m->cfg.ns_map_dir,
			name, mirror__where(mi), ns_refusal_str(why));
}

static void stop(struct mirrors *m, struct mirror *mi, const char *why)
{
	mi->src.stopped = true;
	pr_warn("mirror %d (%s): %s; mirrored no further, %llu bytes at %s/perf-%d.map", (int)mi->pid,
		mi->comm, why, (unsigned long long)mi->dst.bytes, m->cfg.map_dir, (int)mi->pid);
}

/* ---- marks: how far the source was read, when ---- */

static void mark(struct mirror *mi, uint64_t now_ns)
{
	mi->src.marks[mi->src.nmarks % MARKS].ns = now_ns;
	mi->src.marks[mi->src.nmarks % MARKS].offset = mi->src.offset;
	mi->src.nmarks++;
}

/*
 * The source's offset before which every line was read before @at_ns, so
 * written before it: by an image that exec'd at @at_ns, surely its old
 * one. Lines after it may be either image's. With the marks of that time
 * overwritten, the oldest one left: lines may be kept twice, none lost.
 */
uint64_t mirror__offset_before(const struct mirror *mi, uint64_t at_ns)
{
	unsigned int i, n = mi->src.nmarks < MARKS ? mi->src.nmarks : MARKS;
	uint64_t best = 0, oldest = UINT64_MAX;
	bool found = false;

	for (i = 0; i < n; i++) {
		if (mi->src.marks[i].offset < oldest)
			oldest = mi->src.marks[i].offset;
		if (mi->src.marks[i].ns < at_ns && mi->src.marks[i].offset >= best) {
			best = mi->src.marks[i].offset;
			found = true;
		}
	}
	if (found)
		return best;
	return mi->src.nmarks > MARKS ? oldest : 0;
}

/* What the mirror remembers of its source's bytes, to tell an append from a rewrite. */
#define WINDOW 64

/* FNV-1a of @len bytes of @fd at @off; 0 when they cannot be read whole. */
static uint64_t window_hash(int fd, uint64_t off, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned char b[WINDOW];
	size_t i;

	if (pread(fd, b, len, (off_t)off) != (ssize_t)len)
		return 0;
	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h | 1;
}

/* The first and the last WINDOW bytes read so far, hashed once more was read. */
void mirror__remember(struct mirror *mi)
{
	size_t n = mi->src.offset < WINDOW ? (size_t)mi->src.offset : WINDOW;

	mi->src.head_hash = window_hash(mi->src.fd, 0, n);
	mi->src.tail_hash = window_hash(mi->src.fd, mi->src.offset - n, n);
}

/* ---- the source ---- */

void mirror__close_source(struct mirrors *m, struct mirror *mi)
{
	struct uid_count *u = mirror__uid(m, mi->uid);

	if (mi->src.fd < 0)
		return;
	close(mi->src.fd);
	mi->src.fd = -1;
	if (u && u->open)
		u->open--;
	m->open--;
}

/*
 * The owner of a map is its process's uid; root's too, in a rootful
 * container's own directory (a runtime that dropped root after making it).
 * Root's file anywhere else is root's: in a user namespace whose root is
 * some user, it is a host file that user bind-mounted there; in the host's
 * directories, a name is any host process's.
 */
bool mirror__owner_ok(const struct mirror *mi, const struct stat *st)
{
	return st->st_uid == mi->uid ||
	       (st->st_uid == 0 && mi->root_ok && !mi->dir->is_host && !mi->uid_changed);
}

void mirror__try_source(struct mirrors *m, struct mirror *mi)
{
	struct uid_count *u;
	enum ns_refusal why;
	struct stat st;
	int fd;

	if (mi->src.fd >= 0 || mi->src.stopped)
		return;
	u = mirror__uid(m, mi->uid);
	if (!u || m->open >= MIRRORS_OPEN_MAX || (mi->uid && u->open >= MIRRORS_PER_UID)) {
		if (!mi->refused.over_limit) {
			mi->refused.over_limit = true;
			m->stats.over_limit++;
		}
		return;
	}
	fd = nsroot_open_map(mi->dir->fd, mi->ns_pid, m->cfg.max_bytes, &st, &why);
	if (fd < 0) {
		if (why)
			mirror__refuse(m, mi, why, &st);
		return;
	}
	if (!mirror__owner_ok(mi, &st)) {
		close(fd);
		mirror__refuse(m, mi, NSR_OWNER, &st);
		return;
	}
	/* Another file at the name than the one mirrored so far: a new map, read from its start. */
	if (st.st_dev != mi->src.dev || st.st_ino != mi->src.ino)
		mi->src.offset = 0;
	if (mirror__earlier_holders(m, mi, fd, &st)) {
		close(fd);
		return;
	}
	mi->src.fd = fd;
	mi->src.dev = st.st_dev;
	mi->src.ino = st.st_ino;
	mi->dst.mode = st.st_mode & 0666;
	mi->src.nmarks = 0;
	mirror__remember(mi);
	u->open++;
	m->open++;
	mark(mi, clock_boot_ns());
	pr_info("mirror %d (%s): %s/perf-%d.map in %s -> %s/perf-%d.map", (int)mi->pid, mi->comm,
		m->cfg.ns_map_dir, (int)mi->ns_pid, mirror__where(mi), m->cfg.map_dir, (int)mi->pid);
}

/* ---- the mirror file ---- */

/*
 * The mirror an exec let go of is still at the path: it could not be moved
 * (busy, the archive's queue full). The new image's lines go on in it, after
 * the old one's, as they would without the agent: nothing is lost. 0, or
 * -EEXIST when the file there is not that mirror.
 */
static int take_back(struct mirrors *m, struct mirror *mi, const char *name)
{
	struct stat st;
	int fd;

	if (!mi->prev.ino)
		return -EEXIST;
	fd = openat(m->cfg.map_dir_fd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || st.st_dev != mi->prev.dev || st.st_ino != mi->prev.ino ||
	    !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return -EEXIST;
	}
	mi->dst.fd = fd;
	mi->dst.dev = st.st_dev;
	mi->dst.ino = st.st_ino;
	/* Its size is its owner's to change: past the bound, it is at the bound. */
	mi->dst.bytes = (uint64_t)st.st_size;
	if (mi->src.offset < mi->prev.offset)
		mi->src.offset = mi->prev.offset;  /* its lines up to there are in it already */
	mirror__remember(mi);
	mi->prev.ino = 0;
	pr_info("mirror %d (%s): %s/%s could not be moved at its exec; the new image's lines follow the old one's in it",
		(int)mi->pid, mi->comm, m->cfg.map_dir, name);
	return 0;
}

int mirror__make_dest(struct mirrors *m, struct mirror *mi)
{
	mode_t mode = mi->dst.mode ? mi->dst.mode : 0600;
	char name[32];
	struct stat st;
	int fd, err;

	map_name(mi->pid, name, sizeof(name));
	/* As readable as the map it mirrors: a runtime's 0600 stays 0600 on the host. */
	fd = openat(m->cfg.map_dir_fd, name,
		    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		err = -errno;
		if (err == -EEXIST && !take_back(m, mi, name))
			return 0;
		/* Another file there (a busy move, a planted one): tried again at each tick, said once. */
		if (err == -EEXIST && !mi->refused.dest_blocked) {
			mi->refused.dest_blocked = true;
			m->stats.dest_taken++;
			pr_warn("mirror %d (%s): %s/%s is another file; mirrored once it is gone",
				(int)mi->pid, mi->comm, m->cfg.map_dir, name);
		}
		return err;
	}
	/* The process's own file, as if its runtime had written it on the host. */
	if (fchown(fd, mi->uid, mi->gid) || fchmod(fd, mode) || fstat(fd, &st)) {
		err = -errno;
		unlinkat(m->cfg.map_dir_fd, name, 0);
		close(fd);
		return err;
	}
	mi->dst.fd = fd;
	mi->dst.dev = st.st_dev;
	mi->dst.ino = st.st_ino;
	mi->dst.bytes = 0;
	mi->prev.ino = 0;
	mi->refused.dest_blocked = false;
	return 0;
}

/* Remove the mirror file the agent made, while its name is still that file. */
void mirror__drop_dest(struct mirrors *m, struct mirror *mi)
{
	char name[32];
	struct stat st;

	/* A copy into it (the map dir's case) shares its fd: gone first. */
	mirror__copy_free(m, mi);
	if (mi->dst.fd < 0)
		return;
	map_name(mi->pid, name, sizeof(name));
	if (!fstatat(m->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_dev == mi->dst.dev && st.st_ino == mi->dst.ino)
		unlinkat(m->cfg.map_dir_fd, name, 0);
	close(mi->dst.fd);
	mi->dst.fd = -1;
}

/* The mirror file as the policy sees a map: for retention and the archive. */
int mirror__dest_info(const struct mirror *mi, struct map_info *out)
{
	struct stat st;

	if (mi->dst.fd < 0 || fstat(mi->dst.fd, &st))
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	out->size = st.st_size;
	out->disk_bytes = (uint64_t)st.st_blocks * 512;
	out->uid = st.st_uid;
	out->born = SPAN_UNKNOWN;
	out->seen_ns = clock_boot_ns();
	return 0;
}

/* ---- bringing a mirror up to date ---- */

static void lag_sample(struct mirrors *m, uint64_t ns)
{
	uint64_t ms = ns / 1000000;

	if (ms > m->stats.lag_max_ms)
		m->stats.lag_max_ms = ms;
	m->stats.lag[ms < MIRROR_LAG_BINS ? ms : MIRROR_LAG_BINS - 1]++;
}

static size_t count_lines(const char *p, size_t n)
{
	const char *end = p + n;
	size_t k = 0;

	while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) {
		k++;
		p++;
	}
	return k;
}

/*
 * Its runtime wrote it anew (a JVM's Compiler.perfmap rewrites the whole
 * file; a restart truncates it): shorter than what was read, or other bytes
 * where the first or the last of what was read were. The mirror follows:
 * emptied and read again from the start, never holding more than its map.
 */
static bool rewritten(struct mirror *mi, const struct stat *st)
{
	size_t n = mi->src.offset < WINDOW ? (size_t)mi->src.offset : WINDOW;

	if ((uint64_t)st->st_size < mi->src.offset)
		return true;
	return n && (window_hash(mi->src.fd, 0, n) != mi->src.head_hash ||
		     window_hash(mi->src.fd, mi->src.offset - n, n) != mi->src.tail_hash);
}

static void restart(struct mirrors *m, struct mirror *mi)
{
	m->stats.rewritten++;
	mi->src.offset = 0;
	mi->prev.offset = 0;  /* an old mirror taken back gets the new map whole */
	mi->src.nmarks = 0;
	if (mi->dst.fd >= 0 && !ftruncate(mi->dst.fd, 0))
		mi->dst.bytes = 0;
}

/*
 * Its name holds another file than the open source (a runtime that renames
 * a new map over its old one, or makes it anew): the mirror follows the new
 * one from its start, as a reader of the name would.
 */
void mirror__follow_name(struct mirrors *m, struct mirror *mi, uint64_t now_ns)
{
	struct stat st;
	char name[32];

	if (mi->src.fd >= 0) {
		map_name(mi->ns_pid, name, sizeof(name));
		if (fstatat(mi->dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) ||
		    (st.st_dev == mi->src.dev && st.st_ino == mi->src.ino))
			return;
		/* The new file is its map now, whole: the mirror holds it and nothing else. */
		mirror__close_source(m, mi);
		restart(m, mi);
	}
	mirror__try_source(m, mi);
	mirror__sync(m, mi, PASS_BYTES, false, now_ns);
}

/*
 * The whole lines in m->buf's first @got bytes appended as the canonical
 * lines of their entries, and nothing else: a map in a namespace is any
 * bytes its owner wrote, and the mirror on the host is a map. The bytes of
 * the source they took, or -errno; in *@wrote, the bytes appended (the
 * canonical lines at m->buf's start).
 */
static long append_lines(struct mirrors *m, struct mirror *mi, size_t got, size_t *wrote)
{
	char *nl = got ? memrchr(m->buf, '\n', got) : NULL;
	size_t whole = nl ? (size_t)(nl - m->buf) + 1 : 0;
	uint64_t dropped = 0;
	size_t n;
	int err;

	*wrote = 0;
	if (!whole)
		return 0;
	n = perfmap__canonical_lines(m->buf, whole, &dropped);
	err = n ? perfmap__write_all(mi->dst.fd, m->buf, n) : 0;
	if (err) {
		/* A part written (a full disk): taken back, no torn line stays. */
		if (ftruncate(mi->dst.fd, (off_t)mi->dst.bytes))
			pr_debug("mirror %d: cannot cut a partial append: %s", (int)mi->pid,
				 strerror(errno));
		return err;
	}
	m->stats.lines_dropped += dropped;
	*wrote = n;
	return (long)whole;
}

/*
 * One pass over @mi: its complete lines not mirrored yet, up to @cap bytes,
 * appended to the mirror in one write; charged to its uid's budget (as a
 * debt when @final: an exit or exec reads what is there). True when it is
 * up to date afterwards (nothing complete left to read).
 */
static bool sync_pass(struct mirrors *m, struct mirror *mi, size_t cap, bool final,
		      uint64_t now_ns, size_t *spent)
{
	size_t want, got, wrote;
	uint64_t had;
	struct stat st;
	ssize_t n;
	long whole;

	*spent = 0;
	if (mi->src.fd < 0 || mi->src.stopped || fstat(mi->src.fd, &st))
		return true;
	if (nsroot_check(&st, 0) == NSR_SPARSE) {
		/* A hole made after it was opened: gigabytes of nothing to read. */
		mirror__refuse(m, mi, NSR_SPARSE, NULL);
		stop(m, mi, "its map became sparse");
		return true;
	}
	if ((uint64_t)st.st_size != mi->src.offset && rewritten(mi, &st))
		restart(m, mi);
	mi->src.behind = (uint64_t)st.st_size - mi->src.offset;
	if (!mi->src.behind)
		return true;
	/* Its host path first: nothing is read for a mirror that cannot be written. */
	if (mi->dst.fd < 0 && mirror__make_dest(m, mi))
		return false;
	if (m->cfg.max_bytes && mi->dst.bytes >= m->cfg.max_bytes) {
		m->stats.over_size++;
		stop(m, mi, "the mirror reached --max-map-bytes");
		return true;
	}
	had = mi->src.behind;
	want = mi->src.behind < cap ? (size_t)mi->src.behind : cap;
	if (m->cfg.max_bytes && want > m->cfg.max_bytes - mi->dst.bytes)
		want = (size_t)(m->cfg.max_bytes - mi->dst.bytes);
	if (!final && !budget__take(m->budget, mi->uid, want, now_ns))
		return false;
	n = pread(mi->src.fd, m->buf, want, (off_t)mi->src.offset);
	got = n > 0 ? (size_t)n : 0;
	whole = append_lines(m, mi, got, &wrote);
	budget__settle(m->budget, mi->uid, final ? 0 : want, whole > 0 ? (uint64_t)whole : 0);
	if (whole < 0) {
		pr_warn("mirror %d (%s): cannot append to %s/perf-%d.map: %s; tried again at the next tick",
			(int)mi->pid, mi->comm, m->cfg.map_dir, (int)mi->pid, strerror((int)-whole));
		return false;
	}
	if (!whole) {
		/* A line longer than a whole pass is no symbol's: the writer is not a runtime. */
		if (got == PASS_BYTES) {
			m->stats.over_size++;
			stop(m, mi, "a line longer than 256 KiB");
		}
		/* Only a partial line (its runtime is writing it), or a read cut short by a bound. */
		return got >= had;
	}
	*spent = (size_t)whole;
	mi->src.offset += (uint64_t)whole;
	mirror__remember(mi);
	mark(mi, clock_boot_ns());
	mi->dst.bytes += wrote;
	mi->src.behind -= (uint64_t)whole;
	m->stats.bytes += wrote;
	m->stats.lines += count_lines(m->buf, wrote);
	/* Up to date when all there was got read: what is left is a partial line. */
	return got >= had;
}

size_t mirror__sync(struct mirrors *m, struct mirror *mi, size_t cap, bool final, uint64_t now_ns)
{
	size_t spent, total = 0;
	bool done = false;

	while (!done && total < cap) {
		done = sync_pass(m, mi, cap - total < PASS_BYTES ? cap - total : PASS_BYTES, final,
				 now_ns, &spent);
		total += spent;
		if (!spent)
			break;
	}
	if (done || !mi->src.behind) {
		/*
		 * What it caught up with was written after the last time it was
		 * found up to date: the lag is at most the time since.
		 */
		if (total && mi->src.polled_ns)
			lag_sample(m, now_ns - mi->src.polled_ns);
		mi->src.polled_ns = now_ns;
	}
	return total;
}

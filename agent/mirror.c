/* Mirrors of maps in other namespaces at the host's path, and fork copies inside containers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "log.h"
#include "mapname.h"
#include "mirror.h"
#include "perfmap_tools.h"
#include "pidmap.h"

/* Bounds on what processes in other namespaces can make the agent do (per tick, per uid, in all). */
#define PASS_BYTES (256u << 10)       /* read of one mirror at a time */
#define TICK_BYTES (8u << 20)         /* read of all mirrors in one tick */
#define TICK_POLLS 4096               /* mirrors looked at in one tick */
#define FINAL_BYTES (4u << 20)        /* read at an exit or exec, past the budgets */
/*
 * Open mirrors (an fd on the source, one on the mirror) per uid; root's
 * processes (every rootful container's) only within the whole. Waiting ones
 * cost memory only, and are bounded in all.
 */
#define MIRRORS_PER_UID 1024
#define MIRRORS_OPEN_MAX 16384
#define MIRRORS_MAX 65536
#define DIRS_MAX 4096
#define TAGS_MAX 16384
#define ENDED_MAX 16384
#define MARKS 8
#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_EXCL_UNLINK)

/* A directory where processes in other namespaces write maps: a container's /tmp, or ours. */
struct nsdir {
	struct nsdir *next;
	int fd;                      /* O_PATH, resolved inside a root */
	int wd;                      /* its inotify watch; -1: none (the map dir: mapwatch's) */
	dev_t dev;
	ino_t ino;
	bool is_map_dir;
	size_t refs;
	/* The mount namespace it was last resolved for, and when: for processes gone before they are looked at. */
	uint64_t mnt_ns;
	uint64_t resolved_ns;
	char tag[CONTAINER_SHORT_LEN + 2];  /* the container of the processes that use it, if any */
	struct pidmap by_name;       /* its mirrors, by the pid in their map's name */
};

struct mirror {
	struct pidmap_node node;     /* by host pid */
	struct pidmap_node name_node; /* in dir->by_name, by its own pid */
	struct nsdir *dir;
	pid_t pid, ns_pid;
	uint64_t start_ticks;
	uid_t uid;
	gid_t gid;
	int src_fd;                  /* -1: waiting for its map to appear */
	dev_t src_dev;
	ino_t src_ino;
	uint64_t offset;             /* of the source, mirrored: complete lines */
	int dst_fd;                  /* -1: not made yet */
	dev_t dst_dev;
	ino_t dst_ino;
	/* The mirror an exec let go of, and how far it had read: taken back if it could not be moved. */
	dev_t prev_dev;
	ino_t prev_ino;
	uint64_t prev_offset;
	uint64_t dst_bytes;
	uint64_t polled_ns;          /* last found up to date */
	/* When how much of the source was read: which lines an exec's old image surely wrote. */
	struct { uint64_t ns, offset; } marks[MARKS];
	unsigned int nmarks;
	uint64_t behind;             /* bytes of the source not mirrored yet */
	bool stopped;                /* at the size bound, or a line too long: no more reads */
	bool over_limit;             /* counted once as over the bounds on open mirrors */
	/* The copy made for it at a fork, as made: an exec finding it unwritten removes it. */
	dev_t copy_dev;
	ino_t copy_ino;
	uint64_t copy_size;
	char tag[CONTAINER_SHORT_LEN + 2];
	char comm[LOG_COMM_LEN];
};

/* The container of an ended mirror, until its map is archived. */
struct tag_rec {
	struct pidmap_node node;
	uint64_t start_ticks;
	char tag[CONTAINER_SHORT_LEN + 2];
};

/*
 * A map a mirrored process left in its own root when it ended: a later
 * process at its pid there (pid reuse in the container) must not take its
 * entries for its own. Keyed by the file's inode number.
 */
struct ended_rec {
	struct pidmap_node node;
	dev_t dev;
	ino_t ino;
	uint64_t size;
};

static pid_t ended_key(ino_t ino)
{
	return (pid_t)(ino % 0x7ffffffe) + 1;
}

struct uid_count {
	struct pidmap_node node;     /* keyed by uid */
	size_t n;
};

struct mirrors {
	struct mirror_config cfg;
	dev_t map_dev;
	ino_t map_ino;
	int ifd;
	struct nsdir *dirs;
	size_t ndirs;
	struct pidmap by_pid;
	struct pidmap tags;
	struct pidmap ended;
	struct pidmap uids;
	struct budget *budget;
	size_t poll_bucket;          /* where the last tick's polls stopped */
	size_t open;                 /* mirrors holding their source open */
	bool rescan_pending;         /* inotify overflowed: look for every waiting map */
	char *buf;
	struct mirror_stats stats;
};

static struct mirror *mirror_of_name(struct pidmap_node *n)
{
	return (struct mirror *)((char *)n - offsetof(struct mirror, name_node));
}

static struct mirror *find(const struct mirrors *m, pid_t pid)
{
	return (struct mirror *)pidmap_find(&m->by_pid, pid);
}

/* ---- directories ---- */

static struct nsdir *dir_get(struct mirrors *m, int fd, const struct stat *st, uint64_t mnt_ns,
			     uint64_t now_ns)
{
	char self[32];
	struct nsdir *d;

	for (d = m->dirs; d; d = d->next)
		if (d->dev == st->st_dev && d->ino == st->st_ino) {
			close(fd);
			d->refs++;
			d->mnt_ns = mnt_ns;
			d->resolved_ns = now_ns;
			return d;
		}
	if (m->ndirs >= DIRS_MAX)
		goto close_fd;
	d = calloc(1, sizeof(*d));
	if (!d || pidmap_init(&d->by_name, 16))
		goto free_dir;
	d->fd = fd;
	d->dev = st->st_dev;
	d->ino = st->st_ino;
	d->refs = 1;
	d->mnt_ns = mnt_ns;
	d->resolved_ns = now_ns;
	d->is_map_dir = st->st_dev == m->map_dev && st->st_ino == m->map_ino;
	d->wd = -1;
	if (!d->is_map_dir) {
		/* The magic link names exactly the directory resolved, not whatever is at its path now. */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		d->wd = inotify_add_watch(m->ifd, self, WATCH_MASK);
		if (d->wd < 0)
			pr_warn("mirror: cannot watch a directory of another namespace: %s; its new maps are found at the next fork or exec",
				strerror(errno));
	}
	d->next = m->dirs;
	m->dirs = d;
	m->ndirs++;
	return d;
free_dir:
	if (d)
		pidmap_fini(&d->by_name);
	free(d);
close_fd:
	close(fd);
	return NULL;
}

static void dir_put(struct mirrors *m, struct nsdir *d)
{
	struct nsdir **pp;

	if (!d || --d->refs)
		return;
	for (pp = &m->dirs; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	m->ndirs--;
	if (d->wd >= 0)
		inotify_rm_watch(m->ifd, d->wd);
	close(d->fd);
	pidmap_fini(&d->by_name);  /* empty: its nodes were taken out by their mirrors */
	free(d);
}

/*
 * The directory last resolved for @mnt_ns, with a reference: for a process
 * that was gone before its fork was read (its /proc/<pid>/root with it), its
 * mount namespace's. A namespace whose root changed (a container's init
 * pivots) was resolved again by each later process, the newest wins.
 */
static struct nsdir *dir_of_mnt_ns(struct mirrors *m, uint64_t mnt_ns)
{
	struct nsdir *d, *best = NULL;

	if (!mnt_ns)
		return NULL;
	for (d = m->dirs; d; d = d->next)
		if (d->mnt_ns == mnt_ns && (!best || d->resolved_ns > best->resolved_ns))
			best = d;
	if (best)
		best->refs++;
	return best;
}

static struct nsdir *dir_of_wd(const struct mirrors *m, int wd)
{
	struct nsdir *d;

	for (d = m->dirs; d; d = d->next)
		if (d->wd == wd)
			return d;
	return NULL;
}

/* ---- per-uid counts ---- */

static struct uid_count *uid_count(struct mirrors *m, uid_t uid, bool make)
{
	struct uid_count *u = (struct uid_count *)pidmap_find(&m->uids, (pid_t)uid);

	if (u || !make)
		return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->node.pid = (pid_t)uid;
	pidmap_insert(&m->uids, &u->node);
	return u;
}

/* ---- the mirror itself ---- */

static void say_refused(const struct mirrors *m, const struct mirror *mi, enum ns_refusal why,
			const struct stat *st)
{
	char name[32];

	map_name(mi->ns_pid, name, sizeof(name));
	if (!st || log_first_time(st->st_dev, st->st_ino, name))
		pr_warn("mirror %d (%s): %s/%s in %s%s %s", (int)mi->pid, mi->comm,
			m->cfg.ns_map_dir, name, mi->tag[0] ? "container " : "its namespace",
			mi->tag[0] ? mi->tag + 1 : "", ns_refusal_str(why));
}

static void refuse(struct mirrors *m, const struct mirror *mi, enum ns_refusal why,
		   const struct stat *st)
{
	m->stats.refused[why]++;
	m->stats.refused_total++;
	say_refused(m, mi, why, st);
}

static void mark(struct mirror *mi, uint64_t now_ns)
{
	mi->marks[mi->nmarks % MARKS].ns = now_ns;
	mi->marks[mi->nmarks % MARKS].offset = mi->offset;
	mi->nmarks++;
}

/*
 * The source's offset before which every line was read before @at_ns, so
 * written before it: by an image that exec'd at @at_ns, surely its old
 * one. Lines after it may be either image's. With the marks of that time
 * overwritten, the oldest one left: lines may be kept twice, none lost.
 */
static uint64_t offset_before(const struct mirror *mi, uint64_t at_ns)
{
	uint64_t best = 0, oldest = UINT64_MAX;
	unsigned int i, n = mi->nmarks < MARKS ? mi->nmarks : MARKS;
	bool found = false;

	for (i = 0; i < n; i++) {
		if (mi->marks[i].offset < oldest)
			oldest = mi->marks[i].offset;
		if (mi->marks[i].ns < at_ns && mi->marks[i].offset >= best) {
			best = mi->marks[i].offset;
			found = true;
		}
	}
	if (found)
		return best;
	return mi->nmarks > MARKS ? oldest : 0;
}

/*
 * Pid reuse inside a container: the map at the name is one an ended mirrored
 * process left there (the same inode). Its entries are that process's, kept
 * on the host by its own mirror. Unwritten since, it is removed, as the host
 * archives an earlier holder's map; written since, only what follows it is
 * this process's. True when the file is gone and @fd is not to be used.
 */
static bool earlier_holders(struct mirrors *m, struct mirror *mi, int fd, const struct stat *st)
{
	struct ended_rec *e = (struct ended_rec *)pidmap_find(&m->ended,
							      ended_key(st->st_ino));
	struct stat at;
	char name[32];

	(void)fd;
	if (!e || e->dev != st->st_dev || e->ino != st->st_ino)
		return false;
	pidmap_remove(&m->ended, e->node.pid);
	map_name(mi->ns_pid, name, sizeof(name));
	if ((uint64_t)st->st_size == e->size &&
	    !fstatat(mi->dir->fd, name, &at, AT_SYMLINK_NOFOLLOW) && at.st_dev == st->st_dev &&
	    at.st_ino == st->st_ino && !unlinkat(mi->dir->fd, name, 0)) {
		m->stats.ns_stale_removed++;
		pr_info("mirror %d (%s): %s/%s in %s%s was an earlier process's, unwritten since it ended (its mirror has it); removed",
			(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name,
			mi->tag[0] ? "container " : "its namespace", mi->tag[0] ? mi->tag + 1 : "");
		free(e);
		return true;
	}
	m->stats.ns_stale_skipped++;
	mi->offset = e->size < (uint64_t)st->st_size ? e->size : 0;
	pr_info("mirror %d (%s): %s/perf-%d.map holds an earlier process's entries; mirrored from byte %llu on",
		(int)mi->pid, mi->comm, m->cfg.ns_map_dir, (int)mi->ns_pid,
		(unsigned long long)mi->offset);
	free(e);
	return false;
}

/* Open the mirror's source if it is there now; refusals are counted and said. */
static void try_source(struct mirrors *m, struct mirror *mi)
{
	struct uid_count *u;
	enum ns_refusal why;
	struct stat st;
	int fd;

	if (mi->src_fd >= 0 || mi->stopped)
		return;
	u = uid_count(m, mi->uid, true);
	if (!u || m->open >= MIRRORS_OPEN_MAX || (mi->uid && u->n >= MIRRORS_PER_UID)) {
		if (!mi->over_limit) {
			mi->over_limit = true;
			m->stats.over_limit++;
		}
		return;
	}
	fd = nsroot_open_map(mi->dir->fd, mi->ns_pid, m->cfg.max_bytes, &st, &why);
	if (fd < 0) {
		if (why)
			refuse(m, mi, why, &st);
		return;
	}
	/* Another file at the name than the one mirrored so far: a new map, read from its start. */
	if (st.st_dev != mi->src_dev || st.st_ino != mi->src_ino)
		mi->offset = 0;
	if (earlier_holders(m, mi, fd, &st)) {
		close(fd);
		return;
	}
	mi->src_fd = fd;
	mi->src_dev = st.st_dev;
	mi->src_ino = st.st_ino;
	mi->nmarks = 0;
	u->n++;
	m->open++;
	mark(mi, clock_boot_ns());
	pr_info("mirror %d (%s): %s/perf-%d.map in %s%s -> %s/perf-%d.map", (int)mi->pid, mi->comm,
		m->cfg.ns_map_dir, (int)mi->ns_pid, mi->tag[0] ? "container " : "its namespace",
		mi->tag[0] ? mi->tag + 1 : "", m->cfg.map_dir, (int)mi->pid);
}

/*
 * The mirror an exec let go of is still at the path: it could not be moved
 * (busy, the archive's queue full). The new image's lines go on in it, after
 * the old one's, as they would without the agent: nothing is lost. 0, or -1
 * (errno set) when the file there is not that mirror.
 */
static int take_back(struct mirrors *m, struct mirror *mi, const char *name)
{
	struct stat st;
	int fd;

	if (!mi->prev_ino) {
		errno = EEXIST;
		return -1;
	}
	fd = openat(m->cfg.map_dir_fd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || st.st_dev != mi->prev_dev || st.st_ino != mi->prev_ino ||
	    !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		errno = EEXIST;
		return -1;
	}
	mi->dst_fd = fd;
	mi->dst_dev = st.st_dev;
	mi->dst_ino = st.st_ino;
	mi->dst_bytes = (uint64_t)st.st_size;
	/* Its lines up to where it had read are in it already. */
	if (mi->offset < mi->prev_offset)
		mi->offset = mi->prev_offset;
	mi->prev_ino = 0;
	pr_info("mirror %d (%s): %s/%s could not be moved at its exec; the new image's lines follow the old one's in it",
		(int)mi->pid, mi->comm, m->cfg.map_dir, name);
	return 0;
}

static int make_dest(struct mirrors *m, struct mirror *mi)
{
	mode_t mode = 0600;
	char name[32];
	struct stat st;
	int fd;

	/* As readable as the map it mirrors: a runtime's 0600 stays 0600 on the host. */
	if (mi->src_fd >= 0 && !fstat(mi->src_fd, &st))
		mode = st.st_mode & 0666;
	map_name(mi->pid, name, sizeof(name));
	fd = openat(m->cfg.map_dir_fd, name,
		    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST && !take_back(m, mi, name))
		return 0;
	if (fd < 0) {
		if (errno == EEXIST) {
			m->stats.dest_taken++;
			pr_warn("mirror %d (%s): %s/%s is another file; not mirrored", (int)mi->pid,
				mi->comm, m->cfg.map_dir, name);
		}
		return -errno;
	}
	/* The process's own file, as if its runtime had written it on the host. */
	if (fchown(fd, mi->uid, mi->gid) || fchmod(fd, mode) || fstat(fd, &st)) {
		int err = -errno;

		unlinkat(m->cfg.map_dir_fd, name, 0);
		close(fd);
		return err;
	}
	mi->dst_fd = fd;
	mi->dst_dev = st.st_dev;
	mi->dst_ino = st.st_ino;
	mi->dst_bytes = 0;
	mi->prev_ino = 0;
	return 0;
}

/* Remove the mirror file the agent made, while its name is still that file. */
static void drop_dest(struct mirrors *m, struct mirror *mi)
{
	char name[32];
	struct stat st;

	if (mi->dst_fd < 0)
		return;
	map_name(mi->pid, name, sizeof(name));
	if (!fstatat(m->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_dev == mi->dst_dev && st.st_ino == mi->dst_ino)
		unlinkat(m->cfg.map_dir_fd, name, 0);
	close(mi->dst_fd);
	mi->dst_fd = -1;
}

static void lag_sample(struct mirrors *m, uint64_t ns)
{
	uint64_t ms = ns / 1000000;

	if (ms > m->stats.lag_max_ms)
		m->stats.lag_max_ms = ms;
	m->stats.lag[ms < MIRROR_LAG_BINS ? ms : MIRROR_LAG_BINS - 1]++;
}

static void stop(struct mirrors *m, struct mirror *mi, const char *why)
{
	mi->stopped = true;
	pr_warn("mirror %d (%s): %s; mirrored no further, %llu bytes at %s/perf-%d.map", (int)mi->pid,
		mi->comm, why, (unsigned long long)mi->dst_bytes, m->cfg.map_dir, (int)mi->pid);
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
 * One pass over @mi: its complete lines not mirrored yet, up to @cap bytes
 * (and its uid's budget unless @final), appended to the mirror in one write.
 * True when it is up to date afterwards (nothing complete left to read).
 */
static bool sync_pass(struct mirrors *m, struct mirror *mi, size_t cap, bool final,
		      uint64_t now_ns, size_t *spent)
{
	enum ns_refusal why;
	size_t want, got, whole;
	uint64_t had;
	struct stat st;
	int err;
	ssize_t n;
	char *nl;

	*spent = 0;
	if (mi->src_fd < 0 || mi->stopped)
		return true;
	if (fstat(mi->src_fd, &st))
		return true;
	why = nsroot_check(&st, 0);
	if (why == NSR_SPARSE) {
		/* A hole made after it was opened: gigabytes of nothing to read. */
		refuse(m, mi, why, NULL);
		stop(m, mi, "its map became sparse");
		return true;
	}
	/* Cut short by its runtime (a restart writing it anew): read again from the start. */
	if ((uint64_t)st.st_size < mi->offset)
		mi->offset = 0;
	mi->behind = (uint64_t)st.st_size - mi->offset;
	if (!mi->behind)
		return true;
	had = mi->behind;
	want = mi->behind < cap ? (size_t)mi->behind : cap;
	if (m->cfg.max_bytes && mi->dst_bytes + want > m->cfg.max_bytes) {
		want = (size_t)(m->cfg.max_bytes - mi->dst_bytes);
		if (!want) {
			m->stats.over_size++;
			stop(m, mi, "the mirror reached --max-map-bytes");
			return true;
		}
	}
	if (!final && !budget__take(m->budget, mi->uid, want, now_ns))
		return false;
	n = pread(mi->src_fd, m->buf, want, (off_t)mi->offset);
	got = n > 0 ? (size_t)n : 0;
	nl = got ? memrchr(m->buf, '\n', got) : NULL;
	whole = nl ? (size_t)(nl - m->buf) + 1 : 0;
	if (!final)
		budget__settle(m->budget, mi->uid, want, whole);
	if (!whole) {
		/* A line longer than a whole pass is no symbol's: the writer is not a runtime. */
		if (got == PASS_BYTES) {
			m->stats.over_size++;
			stop(m, mi, "a line longer than 256 KiB");
		}
		return true;  /* only a partial line: its runtime is writing it */
	}
	if (mi->dst_fd < 0) {
		err = make_dest(m, mi);
		/* Another file at the host's path stops it; out of fds or space, the next tick tries. */
		if (err == -EEXIST)
			mi->stopped = true;
		if (err)
			return err == -EEXIST;
	}
	err = perfmap__write_all(mi->dst_fd, m->buf, whole);
	if (err) {
		pr_warn("mirror %d (%s): cannot append to %s/perf-%d.map: %s; tried again at the next tick",
			(int)mi->pid, mi->comm, m->cfg.map_dir, (int)mi->pid, strerror(-err));
		return false;
	}
	*spent = whole;
	mi->offset += whole;
	mark(mi, clock_boot_ns());
	mi->dst_bytes += whole;
	mi->behind -= whole;
	m->stats.bytes += whole;
	m->stats.lines += count_lines(m->buf, whole);
	/* Up to date when all there was got read: what is left is a partial line. */
	return got >= had;
}

/* Bring @mi up to date within @cap bytes; the lag is sampled when it is. */
static size_t sync_mirror(struct mirrors *m, struct mirror *mi, size_t cap, bool final,
			  uint64_t now_ns)
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
	if (done || !mi->behind) {
		/*
		 * What it caught up with was written after the last time it was
		 * found up to date: the lag is at most the time since.
		 */
		if (total && mi->polled_ns)
			lag_sample(m, now_ns - mi->polled_ns);
		mi->polled_ns = now_ns;
	}
	return total;
}

static void close_source(struct mirrors *m, struct mirror *mi)
{
	struct uid_count *u = uid_count(m, mi->uid, false);

	if (mi->src_fd < 0)
		return;
	close(mi->src_fd);
	mi->src_fd = -1;
	if (u && u->n)
		u->n--;
	m->open--;
}

static void close_mirror(struct mirrors *m, struct mirror *mi)
{
	pidmap_remove(&mi->dir->by_name, mi->ns_pid);
	pidmap_remove(&m->by_pid, mi->pid);
	close_source(m, mi);
	if (mi->dst_fd >= 0)
		close(mi->dst_fd);
	dir_put(m, mi->dir);
	free(mi);
}

/* The mirror file as the policy sees a map: for retention and the archive. */
static int dest_info(const struct mirror *mi, struct map_info *out)
{
	struct stat st;

	if (mi->dst_fd < 0 || fstat(mi->dst_fd, &st))
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

void mirrors__poll(struct mirrors *m, uint64_t now_ns)
{
	struct pidmap_node *n, *next;
	size_t i, polls = 0, bytes = 0, start = m->poll_bucket;

	if (m->rescan_pending) {
		/* Creations the queue lost: every waiting mirror looks once. */
		m->rescan_pending = false;
		pidmap_for_each(&m->by_pid, i, n, next)
			try_source(m, (struct mirror *)n);
	}
	for (i = 0; i < m->by_pid.nbuckets; i++) {
		size_t b = (start + i) % m->by_pid.nbuckets;

		for (n = m->by_pid.buckets[b]; n; n = n->next) {
			bytes += sync_mirror(m, (struct mirror *)n,
					     bytes < TICK_BYTES ? TICK_BYTES - bytes : 0, false, now_ns);
			polls++;
		}
		if (polls >= TICK_POLLS || bytes >= TICK_BYTES) {
			m->poll_bucket = b + 1;
			return;
		}
	}
}

int mirrors__attach(struct mirrors *m, const struct ns_req *rq, enum ns_place *place,
		    uint64_t now_ns)
{
	struct mirror *mi = find(m, rq->pid);
	struct container_id cid;
	enum ns_refusal why;
	struct nsdir *d;
	struct stat st;
	int fd;

	*place = NS_REFUSED;
	fd = nsroot_open_dir(rq->pid, m->cfg.ns_map_dir, &st, &why);
	if (fd == -ESRCH && mi) {
		/* Gone since its exec: its mirror goes on where it was, until its exit ends it. */
		*place = NS_MIRRORED;
		return 0;
	}
	if (fd == -ESRCH) {
		/* Gone already: its mount namespace's directory, if a process of it was looked at. */
		d = dir_of_mnt_ns(m, rq->mnt_ns);
		if (!d)
			return fd;
		if (d->is_map_dir && rq->ns_pid == rq->pid) {
			dir_put(m, d);
			m->stats.shared++;
			*place = NS_OURS;
			return 0;
		}
		goto make;
	}
	if (fd < 0) {
		if (!why)
			return fd;
		m->stats.refused[why]++;
		m->stats.refused_total++;
		/* Said once per mount namespace: each of its processes meets the same directory. */
		if (log_first_time(rq->mnt_ns, 0, "mirror-dir"))
			pr_warn("mirror %d (%s): %s in its root %s (said once for its mount namespace)",
				(int)rq->pid, rq->comm, m->cfg.ns_map_dir, ns_refusal_str(why));
		return 0;
	}
	/* Placed again after an exec: the same directory and name, the same mirror goes on. */
	if (mi && mi->dir->dev == st.st_dev && mi->dir->ino == st.st_ino &&
	    mi->ns_pid == rq->ns_pid) {
		close(fd);
		snprintf(mi->comm, sizeof(mi->comm), "%s", rq->comm);  /* the new image's name */
		mi->dir->mnt_ns = rq->mnt_ns;
		mi->dir->resolved_ns = now_ns;
		*place = NS_MIRRORED;
		return 0;
	}
	/*
	 * Elsewhere by now (a container's init moved into its root): the old
	 * one ends, and what its exec began at the host path goes, being lines
	 * of a map that is no longer the process's.
	 */
	if (mi) {
		drop_dest(m, mi);
		m->stats.ended++;
		close_mirror(m, mi);
	}
	/* Its map directory is ours and its pid the host's: its map is where a host process's is. */
	if (st.st_dev == m->map_dev && st.st_ino == m->map_ino && rq->ns_pid == rq->pid) {
		close(fd);
		m->stats.shared++;
		*place = NS_OURS;
		return 0;
	}
	d = dir_get(m, fd, &st, rq->mnt_ns, now_ns);
	if (!d) {
		m->stats.over_limit++;
		return 0;
	}
make:
	if (m->by_pid.count >= MIRRORS_MAX) {
		dir_put(m, d);
		m->stats.over_limit++;
		return 0;
	}
	if (pidmap_find(&d->by_name, rq->ns_pid)) {
		/* Two live processes' maps at one name (pid namespaces sharing a /tmp): neither is taken. */
		m->stats.ambiguous++;
		pr_warn("mirror %d (%s): %s/perf-%d.map is another process's too; not mirrored",
			(int)rq->pid, rq->comm, m->cfg.ns_map_dir, (int)rq->ns_pid);
		dir_put(m, d);
		return 0;
	}
	mi = calloc(1, sizeof(*mi));
	if (!mi) {
		dir_put(m, d);
		return -ENOMEM;
	}
	mi->node.pid = rq->pid;
	mi->name_node.pid = rq->ns_pid;
	mi->dir = d;
	mi->pid = rq->pid;
	mi->ns_pid = rq->ns_pid;
	mi->start_ticks = rq->start_ticks;
	mi->uid = rq->uid;
	mi->gid = rq->gid;
	mi->src_fd = -1;
	mi->dst_fd = -1;
	mi->polled_ns = now_ns;
	snprintf(mi->comm, sizeof(mi->comm), "%s", rq->comm);
	if (!container_of(rq->pid, &cid) && cid.id[0])
		snprintf(d->tag, sizeof(d->tag), "c%.*s", CONTAINER_SHORT_LEN, cid.id);
	/* Its directory's container (a process gone before it was read has no cgroup to read). */
	memcpy(mi->tag, d->tag, sizeof(mi->tag));
	pidmap_insert(&m->by_pid, &mi->node);
	pidmap_insert(&d->by_name, &mi->name_node);
	m->stats.started++;
	*place = NS_MIRRORED;
	try_source(m, mi);
	return 0;
}

bool mirrors__has(const struct mirrors *m, pid_t pid)
{
	return find(m, pid) != NULL;
}

void mirrors__sync(struct mirrors *m, pid_t pid, uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);

	if (mi)
		sync_mirror(m, mi, PASS_BYTES, false, now_ns);
}

/* The parent's complete lines, up to the size bound, appended to @fd; bytes or -errno. */
static long copy_lines(struct mirrors *m, const struct mirror *parent, int fd, uint64_t now_ns,
		       uid_t uid)
{
	uint64_t off = 0, limit;
	struct stat st;
	long total = 0;
	ssize_t n;
	char *nl;
	int err;

	if (fstat(parent->src_fd, &st))
		return -errno;
	limit = (uint64_t)st.st_size;
	if (m->cfg.max_bytes && limit > m->cfg.max_bytes)
		return -EFBIG;
	if (!budget__take(m->budget, uid, limit, now_ns))
		return -EDQUOT;
	while (off < limit) {
		n = pread(parent->src_fd, m->buf, limit - off < PASS_BYTES ? limit - off : PASS_BYTES,
			  (off_t)off);
		if (n <= 0)
			break;
		nl = memrchr(m->buf, '\n', (size_t)n);
		if (!nl)
			break;
		err = perfmap__write_all(fd, m->buf, (size_t)(nl - m->buf) + 1);
		if (err) {
			budget__settle(m->budget, uid, limit, (uint64_t)total);
			return err;
		}
		off += (uint64_t)(nl - m->buf) + 1;
		total += nl - m->buf + 1;
	}
	budget__settle(m->budget, uid, limit, (uint64_t)total);
	return total;
}

int mirrors__copy(struct mirrors *m, pid_t parent_pid, const struct ns_req *rq,
		  uint64_t now_ns)
{
	struct mirror *parent = find(m, parent_pid), *child = find(m, rq->pid);
	struct stat st;
	long n;
	int fd;

	if (!parent || parent->src_fd < 0 || !child)
		return -ENOENT;
	if (child->dir != parent->dir)
		return -EXDEV;  /* another root: the parent's map is not there */
	if (child->dir->is_map_dir) {
		/*
		 * The map dir itself: perf-<child's own pid>.map there is the
		 * name of a host pid. The entries go straight to its mirror.
		 */
		if (child->dst_fd >= 0)
			return -EEXIST;
		fd = make_dest(m, child);
		if (fd)
			return fd;
		n = copy_lines(m, parent, child->dst_fd, now_ns, rq->uid);
		if (n > 0)
			child->dst_bytes += (uint64_t)n;
	} else {
		fd = fstat(parent->src_fd, &st) ? -errno :
		     nsroot_create_map(child->dir->fd, rq->ns_pid, rq->uid, rq->gid, st.st_mode);
		if (fd < 0) {
			if (fd == -EEXIST)
				m->stats.ns_copies_existing++;
			else
				m->stats.ns_copies_failed++;
			return fd;
		}
		n = copy_lines(m, parent, fd, now_ns, rq->uid);
		if (!fstat(fd, &st)) {
			child->copy_dev = st.st_dev;
			child->copy_ino = st.st_ino;
			child->copy_size = (uint64_t)st.st_size;
		}
		close(fd);
		/* Mirrored at once: the copy is in the host's mirror as it is in the container. */
		try_source(m, child);
		sync_mirror(m, child, FINAL_BYTES, true, now_ns);
	}
	if (n < 0) {
		m->stats.ns_copies_failed++;
		return (int)n;
	}
	m->stats.ns_copies++;
	pr_info("copy %d -> %d in %s%s: %s/perf-%d.map -> %s/perf-%d.map, %ld bytes",
		(int)parent_pid, (int)rq->pid, child->tag[0] ? "container " : "its namespace",
		child->tag[0] ? child->tag + 1 : "", m->cfg.ns_map_dir, (int)parent->ns_pid,
		child->dir->is_map_dir ? m->cfg.map_dir : m->cfg.ns_map_dir,
		child->dir->is_map_dir ? (int)rq->pid : (int)rq->ns_pid, n);
	return 0;
}

/*
 * The map in the container is only the copy made at its fork, unwritten: as
 * on the host, the new image must not start with its parent's entries. It
 * is removed there (the host's mirror of it is archived by the caller); a
 * file the new image makes at the name is mirrored anew.
 */
static bool drop_copy(struct mirrors *m, struct mirror *mi)
{
	struct stat st, at;
	char name[32];

	if (!mi->copy_ino || fstat(mi->src_fd, &st) || st.st_dev != mi->copy_dev ||
	    st.st_ino != mi->copy_ino || (uint64_t)st.st_size != mi->copy_size)
		return false;
	map_name(mi->ns_pid, name, sizeof(name));
	/* Only while the name is still that file: nothing else of the container's is removed. */
	if (fstatat(mi->dir->fd, name, &at, AT_SYMLINK_NOFOLLOW) || at.st_dev != st.st_dev ||
	    at.st_ino != st.st_ino || unlinkat(mi->dir->fd, name, 0))
		return false;
	m->stats.ns_copies_dropped++;
	pr_info("exec %d (%s): %s/%s in %s%s was only its parent's entries, copied at its fork; removed",
		(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name,
		mi->tag[0] ? "container " : "its namespace", mi->tag[0] ? mi->tag + 1 : "");
	close_source(m, mi);
	mi->copy_ino = 0;
	mi->offset = 0;
	mi->src_ino = 0;
	return true;
}

int mirrors__exec(struct mirrors *m, pid_t pid, uint64_t at_ns, struct map_info *mi_out,
		  uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);
	uint64_t from;
	int err;

	if (!mi)
		return -ENOENT;
	sync_mirror(m, mi, FINAL_BYTES, true, now_ns);
	err = dest_info(mi, mi_out);
	if (!err) {
		mi->prev_dev = mi_out->dev;
		mi->prev_ino = mi_out->ino;
		mi->prev_offset = mi->offset;
	}
	if (mi->dst_fd >= 0)
		close(mi->dst_fd);
	mi->dst_fd = -1;
	mi->dst_bytes = 0;
	mi->stopped = false;
	if (mi->src_fd >= 0 && drop_copy(m, mi)) {
		mi->prev_offset = 0;  /* the new image's map is a new file, read from its start */
		return err ?: 1;
	}
	if (err || mi->src_fd < 0)
		return err;
	/*
	 * Lines read after the exec may be the new image's: they begin its new
	 * mirror too, read again once the caller has moved the old one away.
	 */
	from = offset_before(mi, at_ns);
	if (from < mi->offset)
		mi->offset = from;
	return 0;
}

static void keep_ended(struct mirrors *m, const struct mirror *mi)
{
	struct ended_rec *e;
	struct stat st;

	if (mi->src_fd < 0 || fstat(mi->src_fd, &st) || m->ended.count >= ENDED_MAX)
		return;
	e = (struct ended_rec *)pidmap_remove(&m->ended, ended_key(st.st_ino));
	if (!e)
		e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->node.pid = ended_key(st.st_ino);
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = (uint64_t)st.st_size;
	pidmap_insert(&m->ended, &e->node);
}

static void keep_tag(struct mirrors *m, const struct mirror *mi)
{
	struct tag_rec *t;

	if (!mi->tag[0] || m->tags.count >= TAGS_MAX)
		return;
	t = (struct tag_rec *)pidmap_remove(&m->tags, mi->pid);
	if (!t)
		t = calloc(1, sizeof(*t));
	if (!t)
		return;
	t->node.pid = mi->pid;
	t->start_ticks = mi->start_ticks;
	memcpy(t->tag, mi->tag, sizeof(t->tag));
	pidmap_insert(&m->tags, &t->node);
}

int mirrors__end(struct mirrors *m, pid_t pid, struct map_info *mi_out, uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);
	int err;

	if (!mi)
		return -ENOENT;
	/* A map made just before the exit, before its creation was read: it is there still. */
	try_source(m, mi);
	sync_mirror(m, mi, FINAL_BYTES, true, now_ns);
	if (mi->behind > PASS_BYTES) {
		/* More than an exit's read was written in its last tick: the rest is not mirrored. */
		m->stats.cut_at_exit++;
		pr_warn("mirror %d (%s): %llu bytes of its map were not mirrored before its exit",
			(int)mi->pid, mi->comm, (unsigned long long)mi->behind);
	}
	err = dest_info(mi, mi_out);
	if (!err)
		keep_tag(m, mi);
	keep_ended(m, mi);
	m->stats.ended++;
	close_mirror(m, mi);
	return err;
}

bool mirrors__claims(const struct mirrors *m, pid_t name_pid, dev_t dev, ino_t ino)
{
	const struct nsdir *d;
	struct pidmap_node *n;
	const struct mirror *mi;

	for (d = m->dirs; d; d = d->next) {
		if (!d->is_map_dir)
			continue;
		n = pidmap_find(&d->by_name, name_pid);
		if (!n)
			return false;
		mi = mirror_of_name(n);
		/* Not opened yet: the file there is taken for its, as it will be; nothing is moved. */
		return mi->src_fd < 0 || (mi->src_dev == dev && mi->src_ino == ino);
	}
	return false;
}

const char *mirrors__tag(const struct mirrors *m, pid_t pid, uint64_t start_ticks)
{
	const struct tag_rec *t = (const struct tag_rec *)pidmap_find(&m->tags, pid);
	const struct mirror *mi = find(m, pid);

	/* A live one's (its exec's archive), else an ended one's. */
	if (mi && mi->start_ticks == start_ticks)
		return mi->tag;
	return t && t->start_ticks == start_ticks ? t->tag : "";
}

void mirrors__on_map_dir(struct mirrors *m, pid_t name_pid, uint64_t now_ns)
{
	struct pidmap_node *n;
	struct nsdir *d;

	for (d = m->dirs; d; d = d->next) {
		if (!d->is_map_dir)
			continue;
		n = pidmap_find(&d->by_name, name_pid);
		if (n) {
			try_source(m, mirror_of_name(n));
			sync_mirror(m, mirror_of_name(n), PASS_BYTES, false, now_ns);
		}
		return;
	}
}

void mirrors__on_inotify(struct mirrors *m, uint64_t now_ns)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *e;
	struct pidmap_node *n;
	struct nsdir *d;
	ssize_t len;
	pid_t pid;
	char *p;

	/* A bounded batch per wake-up: a container making files in a loop cannot hold the loop. */
	for (int reads = 0; reads < 16; reads++) {
		len = read(m->ifd, buf, sizeof(buf));
		if (len <= 0)
			return;
		for (p = buf; p < buf + len; p += sizeof(*e) + e->len) {
			e = (const struct inotify_event *)p;
			if (e->mask & IN_Q_OVERFLOW) {
				m->rescan_pending = true;
				continue;
			}
			d = dir_of_wd(m, e->wd);
			if (!d)
				continue;
			if (e->mask & IN_IGNORED) {
				d->wd = -1;  /* unmounted or gone: its mirrors hold their files */
				continue;
			}
			if (!e->len || !map_name_pid(e->name, &pid))
				continue;
			n = pidmap_find(&d->by_name, pid);
			if (n) {
				try_source(m, mirror_of_name(n));
				sync_mirror(m, mirror_of_name(n), PASS_BYTES, false, now_ns);
			}
		}
	}
}

int mirrors__fd(const struct mirrors *m)
{
	return m->ifd;
}

size_t mirrors__active(const struct mirrors *m)
{
	return m->by_pid.count;
}

const struct mirror_stats *mirrors__stats(const struct mirrors *m)
{
	return &m->stats;
}

uint64_t mirrors__behind(const struct mirrors *m)
{
	struct pidmap_node *n, *next;
	uint64_t total = 0;
	size_t i;

	pidmap_for_each(&m->by_pid, i, n, next)
		total += ((const struct mirror *)n)->behind;
	return total;
}

uint64_t mirrors__lag_p99_ms(const struct mirrors *m)
{
	uint64_t total = 0, seen = 0;
	size_t i;

	for (i = 0; i < MIRROR_LAG_BINS; i++)
		total += m->stats.lag[i];
	if (!total)
		return 0;
	for (i = 0; i < MIRROR_LAG_BINS; i++) {
		seen += m->stats.lag[i];
		if (seen * 100 >= total * 99)
			return i;
	}
	return MIRROR_LAG_BINS - 1;
}

size_t mirrors__describe(const struct mirrors *m, char *buf, size_t len, size_t max)
{
	struct pidmap_node *n, *next;
	size_t i, used = 0, k = 0;
	int w;

	pidmap_for_each(&m->by_pid, i, n, next) {
		const struct mirror *mi = (const struct mirror *)n;

		if (k++ >= max || used >= len)
			break;
		w = snprintf(buf + used, len - used,
			     "mirror_%d: ns_pid=%d container=%s bytes=%llu behind=%llu%s\n",
			     (int)mi->pid, (int)mi->ns_pid, mi->tag[0] ? mi->tag + 1 : "-",
			     (unsigned long long)mi->dst_bytes, (unsigned long long)mi->behind,
			     mi->src_fd < 0 ? " waiting" : mi->stopped ? " stopped" : "");
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
	return used;
}

struct mirrors *mirrors__new(const struct mirror_config *cfg)
{
	struct mirrors *m = calloc(1, sizeof(*m));
	struct stat st;

	if (!m)
		return NULL;
	m->cfg = *cfg;
	m->ifd = -1;
	if (fstat(cfg->map_dir_fd, &st))
		goto free_m;
	m->map_dev = st.st_dev;
	m->map_ino = st.st_ino;
	m->buf = malloc(PASS_BYTES);
	m->budget = budget__new(cfg->rate, cfg->burst);
	if (!m->buf || !m->budget || pidmap_init(&m->by_pid, 64) || pidmap_init(&m->tags, 64) ||
	    pidmap_init(&m->ended, 64) ||
	    pidmap_init(&m->uids, 16))
		goto free_m;
	m->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (m->ifd < 0)
		goto free_m;
	return m;
free_m:
	mirrors__free(m);
	return NULL;
}

void mirrors__free(struct mirrors *m)
{
	struct pidmap_node *n, *next;
	size_t i;

	if (!m)
		return;
	if (m->by_pid.buckets)
		pidmap_for_each(&m->by_pid, i, n, next)
			close_mirror(m, (struct mirror *)n);
	pidmap_fini(&m->by_pid);
	pidmap_fini(&m->tags);
	pidmap_fini(&m->ended);
	pidmap_fini(&m->uids);
	budget__free(m->budget);
	free(m->buf);
	if (m->ifd >= 0)
		close(m->ifd);
	free(m);
}

/*
 * Jitdump producers' maps. A producer announces its dump by mapping it
 * executable (the marker perf's inject looks for); the kernel reports that
 * mapping (in/execmap.c) or /proc shows it (in/jitscan.c), and from then on
 * the dump is read at each tick, from where the last read ended, as
 * untrusted input (perfmap/jitdump.c bounds every size). Its functions are
 * written as perf-<pid>.map in the map directory for the producer and for
 * each descendant whose records it holds, in canonical lines: created whole
 * (O_TMPFILE, linked in), appended to as the dump grows, and rewritten only
 * when a move or a reload takes a range's name away. A map perfmapd did not
 * make is the process's own (or someone else's): never written, whatever
 * the dump says. Every write checks first that the map is still exactly as
 * perfmapd left it (inode, size): a runtime that starts writing its own map
 * at that path takes it over, and loses nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/mapname.h"
#include "lib/privs.h"
#include "lib/procfs.h"
#include "perfmap_tools.h"
#include "policy/policy.h"
#include "store/jitdumps.h"
#include "store/mapfile.h"

/* A dump's records read when its producer ends, at most: what it wrote last, not a flood. */
#define JITDUMP_DRAIN_RECORDS (JITDUMP_RECORDS_PER_TICK * 8)

enum target_state {
	T_NEW,       /* not written yet: waits for its map to settle, or for a function */
	T_OURS,      /* perfmapd's map: written as the dump grows */
	T_OWN,       /* a map perfmapd did not make, or took over since: left alone */
	T_REFUSED,   /* records of a pid that is not the producer's kin: never written */
	T_DONE,      /* its process is gone: nothing more written */
};

static const char *const target_state_str[] = {
	[T_NEW] = "new", [T_OURS] = "written", [T_OWN] = "own_map",
	[T_REFUSED] = "refused", [T_DONE] = "done",
};

/* A map written from a dump: the pid its records carry, and the process whose map it is. */
struct target {
	uint32_t rec_pid;
	pid_t pid;
	uint64_t start_ticks;
	enum target_state state;
	/* The map as perfmapd left it: nothing writes it but perfmapd while it stays so. */
	dev_t dev;
	ino_t ino;
	uint64_t size;
	uint64_t base;        /* bytes before the dump's lines: the copy of the parent's entries */
	uint64_t seq;         /* the dump's functions up to this one are in it */
	uint64_t removed;     /* the reader's removals when it was written whole */
	uint64_t lines;
	unsigned int tries;   /* looks for a process not in the table yet */
};

/* Ticks a pid in a dump's records is looked for in the table before it is taken to be gone. */
#define TARGET_TRIES 20

/* A uid's dumps' shared bound on what they keep (perfmap__jitdump_share()). */
struct uid_budget {
	uid_t uid;
	unsigned int dumps;
	struct perfmap_jitdump_budget b;
};

struct dump {
	struct dump *next;
	struct uid_budget *ub;
	pid_t owner;
	uint64_t owner_start;
	uid_t uid;
	gid_t gid;
	pid_t name_pid;       /* the N of jit-N.dump: the owner's pid as it sees it */
	bool foreign;         /* another pid namespace: its records' pids are that namespace's */
	const char *stopped;  /* why it stopped being read (said), or NULL */
	bool waiting;         /* a target waits for its map to settle: look again next tick */
	int fd;
	dev_t dev;
	ino_t ino;
	struct perfmap_jitdump *rd;
	uint64_t seen_seq, seen_removed;
	struct target t[JITDUMP_TARGETS_MAX];
	unsigned int nt;
	bool targets_full;
	char path[160];       /* escaped, for the status and the log */
};

/*
 * Markers refused lately, by (pid, inode): the same marker mapped again and
 * again (an mmap() loop costs its maker a microsecond, each look here a
 * /proc read and an open) is weighed once, not at every report of it.
 */
#define REFUSED_RECENT 256

struct refused_marker {
	pid_t pid;
	uint64_t ino;
};

struct jitdumps {
	const char *map_dir;
	int dirfd;
	struct policy *p;
	struct dump *dumps;
	size_t n;
	struct perfmap_jitdump_budget all;   /* every dump's together */
	struct uid_budget *ubs[JITDUMPS_MAX]; /* one per uid with a dump, at most one per dump */
	struct refused_marker refused[REFUSED_RECENT];
	uint64_t stops[__PERFMAP_JITDUMP_STOP_MAX]; /* dumps stopped, by the reason (the status's jitdump_stops) */
	unsigned int refused_next;
	struct jitdumps_stats st;
};

static bool refused_lately(const struct jitdumps *jd, pid_t pid, uint64_t ino)
{
	unsigned int i;

	for (i = 0; i < REFUSED_RECENT; i++)
		if (jd->refused[i].pid == pid && jd->refused[i].ino == ino)
			return true;
	return false;
}

static void note_refused(struct jitdumps *jd, pid_t pid, uint64_t ino)
{
	jd->refused[jd->refused_next++ % REFUSED_RECENT] = (struct refused_marker){ pid, ino };
}

struct jitdumps *jitdumps__new(const char *map_dir, int map_dir_fd, struct policy *p)
{
	struct jitdumps *jd = calloc(1, sizeof(*jd));

	if (!jd)
		return NULL;
	jd->map_dir = map_dir;
	jd->dirfd = map_dir_fd;
	jd->p = p;
	jd->all.max_funcs = JITDUMP_ALL_FUNCS_MAX;
	jd->all.max_name_bytes = JITDUMP_ALL_NAME_BYTES_MAX;
	return jd;
}

/* @uid's budget, made for its first dump: NULL without memory. */
static struct uid_budget *uid_budget_get(struct jitdumps *jd, uid_t uid)
{
	struct uid_budget **slot = NULL;
	unsigned int i;

	for (i = 0; i < JITDUMPS_MAX; i++) {
		if (jd->ubs[i] && jd->ubs[i]->uid == uid) {
			jd->ubs[i]->dumps++;
			return jd->ubs[i];
		}
		if (!jd->ubs[i] && !slot)
			slot = &jd->ubs[i];
	}
	if (!slot || !(*slot = calloc(1, sizeof(**slot))))
		return NULL;
	**slot = (struct uid_budget){ .uid = uid, .dumps = 1,
		.b = { .max_funcs = JITDUMP_UID_FUNCS_MAX, .max_name_bytes = JITDUMP_UID_NAME_BYTES_MAX } };
	return *slot;
}

static void uid_budget_put(struct jitdumps *jd, struct uid_budget *ub)
{
	unsigned int i;

	if (!ub || --ub->dumps)
		return;
	for (i = 0; i < JITDUMPS_MAX; i++)
		if (jd->ubs[i] == ub)
			jd->ubs[i] = NULL;
	free(ub);
}

static void dump_free(struct jitdumps *jd, struct dump *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	/* First: it gives back what it kept to the budgets. */
	perfmap__jitdump_free(d->rd);
	uid_budget_put(jd, d->ub);
	free(d);
}

void jitdumps__free(struct jitdumps *jd)
{
	struct dump *d, *next;

	if (!jd)
		return;
	for (d = jd->dumps; d; d = next) {
		next = d->next;
		dump_free(jd, d);
	}
	free(jd);
}

const struct jitdumps_stats *jitdumps__stats(const struct jitdumps *jd)
{
	return &jd->st;
}

size_t jitdumps__count(const struct jitdumps *jd)
{
	return jd->n;
}

static struct dump *dump_of(const struct jitdumps *jd, pid_t owner)
{
	struct dump *d;

	for (d = jd->dumps; d; d = d->next)
		if (d->owner == owner)
			return d;
	return NULL;
}

static size_t dumps_of_uid(const struct jitdumps *jd, uid_t uid)
{
	const struct dump *d;
	size_t n = 0;

	for (d = jd->dumps; d; d = d->next)
		n += d->uid == uid;
	return n;
}

/* ---- finding and opening a dump ---- */

/* Why a dump was refused, in words, from perfmap__jitdump_open()'s answer; NULL: it failed, not refused. */
static const char *refusal_str(int err, enum perfmap_root_refusal why)
{
	switch (why) {
	case PERFMAP_ROOT_DIR:
		return "is behind a symlink or a non-directory in the process's root, refused";
	case PERFMAP_ROOT_FUSE:
		return "is on FUSE (or a mount its mount table does not show), whose server could hang the agent, refused";
	case PERFMAP_ROOT_UNREACHABLE:
		return "cannot be reached (its root or /proc refused it), refused";
	case PERFMAP_ROOT_OK:
		break;
	}
	switch (err) {
	case -ELOOP:
	case -EINVAL:
	case -EMLINK:
		return perfmap_open_strerror(err);
	case -EPERM:
		return "is owned by another uid than its process's, refused";
	case -ESTALE:
		return "is not the file it mapped (replaced since), refused";
	default:
		return NULL;
	}
}

static void say_refused(struct jitdumps *jd, pid_t pid, const char *path, const struct stat *st,
			const char *why)
{
	jd->st.jitdump_refused++;
	if (log_first_time(st ? st->st_dev : 0, st ? st->st_ino : (uint64_t)pid, path))
		pr_warn("jitdump %d: %s %s; its code is not named from it", (int)pid, path, why);
}

/* Is the marker's dump one perfmapd may read for @pi? 0, or -errno (said when refused). */
static int admit(struct jitdumps *jd, const struct proc_info *pi, const char *path,
		 uint64_t *start)
{
	pid_t named = perfmap__jitdump_name_pid(path, strlen(path));

	/* The producer names its dump by its own pid; a file named for another is not its dump. */
	if (named != pi->pid && named != pi->ns_pid) {
		say_refused(jd, pi->pid, path, NULL, "is named for another pid");
		return -EPERM;
	}
	switch (policy__jitdump_target(jd->p, pi->pid, pi->start_ticks, pi->pid, pi->uid, start)) {
	case JITDUMP_TARGET_OK:
	case JITDUMP_TARGET_WAIT:
		break;
	case JITDUMP_TARGET_GONE:
		pr_debug("jitdump %d: %s: the process is not tracked (yet); a later pass finds it",
			 (int)pi->pid, path);
		return -ESRCH;
	case JITDUMP_TARGET_REFUSED:
		pr_debug("jitdump %d: %s: not the process's own (another uid, or another process at the pid)",
			 (int)pi->pid, path);
		return -EPERM;
	}
	*start = pi->start_ticks;
	if (jd->n >= JITDUMPS_MAX || dumps_of_uid(jd, pi->uid) >= JITDUMPS_PER_UID) {
		jd->st.jitdump_over_limit++;
		if (log_first_time(0, pi->uid, "jitdump bound"))
			pr_warn("jitdump %d: %s not read: uid %u has %d dumps read already (or all have %d); counted as jitdump_over_limit (said once per uid)",
				(int)pi->pid, path, (unsigned int)pi->uid, JITDUMPS_PER_UID,
				JITDUMPS_MAX);
		return -EMFILE;
	}
	return 0;
}

void jitdumps__marker(struct jitdumps *jd, pid_t pid, const char *path, uint64_t ino)
{
	enum perfmap_root_refusal why;
	const char *refused;
	struct proc_info pi;
	uint64_t start;
	struct stat st;
	struct dump *d;
	int fd, err;

	d = dump_of(jd, pid);
	if (d && (!ino || d->ino == ino))
		return;
	if (refused_lately(jd, pid, ino))
		return;
	if (d || procfs_read(pid, &pi)) {
		pr_debug("jitdump %d: %s: %s", (int)pid, path,
			 d ? "another dump is read for it already" : "gone before it was looked at");
		return;
	}
	err = admit(jd, &pi, path, &start);
	if (err) {
		/* Not in the table yet, or over a bound that may free up: weighed again at its next report. */
		if (err != -ESRCH && err != -EMFILE)
			note_refused(jd, pid, ino);
		return;
	}
	/*
	 * Inside its root, as a container's map is opened: no link followed, no
	 * FIFO or device, not on FUSE, single-linked; the process's own file (a
	 * link it made to another user's is not read for it); the inode the
	 * kernel saw mapped, not one renamed over it since.
	 */
	fd = perfmap__jitdump_open(pid, path, pi.uid, ino, &st, &why);
	if (fd < 0) {
		refused = refusal_str(fd, why);
		if (refused) {
			say_refused(jd, pid, path, NULL, refused);
			note_refused(jd, pid, ino);
		}
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto close_fd;
	d->rd = perfmap__jitdump_new();
	d->ub = d->rd ? uid_budget_get(jd, pi.uid) : NULL;
	if (!d->ub) {
		perfmap__jitdump_free(d->rd);
		free(d);
		goto close_fd;
	}
	perfmap__jitdump_set_limits(d->rd, JITDUMP_FUNCS_MAX, JITDUMP_NAME_BYTES_MAX);
	perfmap__jitdump_share(d->rd, &d->ub->b, &jd->all);
	/* A header lying about its pid (perf's inject would take it for another process's): no record read. */
	perfmap__jitdump_expect_pid(d->rd, (uint32_t)perfmap__jitdump_name_pid(path, strlen(path)));
	d->fd = fd;
	d->owner = pid;
	d->owner_start = start;
	d->uid = pi.uid;
	d->gid = pi.gid;
	d->name_pid = perfmap__jitdump_name_pid(path, strlen(path));
	d->foreign = d->name_pid != pid;
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	log_escape(d->path, sizeof(d->path), path, strlen(path), 0);
	d->next = jd->dumps;
	jd->dumps = d;
	jd->n++;
	jd->st.jitdump_found++;
	policy__jitdump_found(jd->p, pid, start);
	pr_info("jitdump %d (%s): reading %s%s", (int)pid, pi.comm, d->path,
		d->foreign ? " (in its own namespaces)" : "");
	return;
close_fd:
	close(fd);
}

/* ---- reading ---- */

/* @why: a string that outlives the dump (a literal, or perfmap__jitdump_stop_str()'s). */
static void say_stopped(struct dump *d, const char *why, uint64_t offset)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);

	if (d->stopped)
		return;
	d->stopped = why;
	pr_warn("jitdump %d: %s: %s at offset %llu; read no further (the %llu functions read before stay named)",
		(int)d->owner, d->path, why, (unsigned long long)offset,
		(unsigned long long)s->funcs);
}

/* Up to @budget records more of @d: the number read. */
static long read_dump(struct jitdumps *jd, struct dump *d, long budget)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);
	long n;

	if (d->stopped)
		return 0;
	if (s->offset >= JITDUMP_BYTES_MAX) {
		jd->st.jitdump_over_limit++;
		say_stopped(d, "larger than the bound (4 GiB)", s->offset);
		return 0;
	}
	n = perfmap__jitdump_read(d->rd, d->fd, (size_t)budget);
	if (n == -EBADMSG && (unsigned int)s->stop < __PERFMAP_JITDUMP_STOP_MAX)
		jd->stops[s->stop]++;
	if (n == -EBADMSG) {
		if (s->stop == PERFMAP_JITDUMP_TOO_MANY)
			jd->st.jitdump_over_limit++;
		else
			jd->st.jitdump_malformed++;
		say_stopped(d, perfmap__jitdump_stop_str(s->stop), s->stop_offset);
		return 0;
	}
	if (n < 0) {
		say_stopped(d, n == -EINVAL ? "not a regular file" : "cannot be read", s->offset);
		return 0;
	}
	jd->st.jitdump_records += (uint64_t)n;
	return n;
}

/* ---- writing ---- */

static void map_path_name(pid_t pid, char *name, size_t len)
{
	map_name(pid, name, len);
}

/*
 * The map at @t's path opened with @flags, if it is still exactly as
 * perfmapd left it: the fd, -ENOENT when none is there, -ESTALE when
 * another file is, or this one was written since.
 */
static int open_ours(struct jitdumps *jd, const struct target *t, int flags)
{
	struct stat st;
	char name[32];
	int fd;

	map_path_name(t->pid, name, sizeof(name));
	/* The file is the process's (0600): root writes it with DAC_OVERRIDE, for this open only. */
	privs_override_begin();
	fd = openat(jd->dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	privs_override_end();
	if (fd < 0)
		return errno == ELOOP ? -ESTALE : -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_dev != t->dev ||
	    st.st_ino != t->ino || (uint64_t)st.st_size != t->size) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* A new file with @t's map: its base copied from @old (or none), then every function of its pid. */
static int fill_tmpfile(struct jitdumps *jd, const struct dump *d, struct target *t, int old,
			long *lines)
{
	char buf[16384];
	uint64_t off = 0;
	ssize_t n;
	int fd, err;

	fd = openat(jd->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (old >= 0 && off < t->base) {
		n = pread(old, buf, t->base - off < sizeof(buf) ? t->base - off : sizeof(buf),
			  (off_t)off);
		if (n <= 0) {
			err = n ? -errno : -ESTALE;
			goto close_fd;
		}
		err = perfmap__write_all(fd, buf, (size_t)n);
		if (err)
			goto close_fd;
		off += (uint64_t)n;
	}
	*lines = perfmap__jitdump_write_since(d->rd, fd, t->rec_pid, 0);
	if (*lines < 0) {
		err = (int)*lines;
		goto close_fd;
	}
	/* The process's file, as its runtime's own would be. */
	if (fchmod(fd, 0600) || fchown(fd, d->uid, d->gid)) {
		err = -errno;
		goto close_fd;
	}
	return fd;
close_fd:
	close(fd);
	return err;
}

static void written(struct target *t, int fd, const struct perfmap_jitdump *rd, long lines)
{
	struct stat st;

	if (!fstat(fd, &st)) {
		t->dev = st.st_dev;
		t->ino = st.st_ino;
		t->size = (uint64_t)st.st_size;
	}
	t->seq = perfmap__jitdump_seq(rd);
	t->lines += (uint64_t)lines;
}

static void taken_over(struct jitdumps *jd, const struct dump *d, struct target *t)
{
	t->state = T_OWN;
	jd->st.jitdump_maps_taken++;
	pr_info("jitdump %d: %s/perf-%d.map was written by another since perfmapd wrote it: left to its writer",
		(int)d->owner, jd->map_dir, (int)t->pid);
}

/* A new map at @t's path, with every function its pid has in the dump. */
static int create_map(struct jitdumps *jd, const struct dump *d, struct target *t)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);
	char name[32];
	long lines = 0;
	int fd, err;

	fd = fill_tmpfile(jd, d, t, -1, &lines);
	if (fd < 0)
		return fd;
	map_path_name(t->pid, name, sizeof(name));
	err = mapfile_link_tmpfile(jd->dirfd, fd, name);
	if (!err) {
		t->base = 0;
		t->removed = s->removed;
		written(t, fd, d->rd, lines);
		t->state = T_OURS;
		jd->st.jitdump_maps_created++;
		jd->st.jitdump_functions_written += (uint64_t)lines;
	}
	close(fd);
	return err;
}

/* @t's map, perfmapd's copy of its parent's entries, takes the dump's functions after them. */
static void adopt_map(struct jitdumps *jd, const struct dump *d, struct target *t,
		      const struct stat *st)
{
	long lines;
	int fd;

	t->dev = st->st_dev;
	t->ino = st->st_ino;
	t->size = (uint64_t)st->st_size;
	fd = open_ours(jd, t, O_WRONLY | O_APPEND);
	if (fd < 0) {
		taken_over(jd, d, t);
		return;
	}
	lines = perfmap__jitdump_write_since(d->rd, fd, t->rec_pid, 0);
	if (lines >= 0) {
		t->base = (uint64_t)st->st_size;
		t->removed = perfmap__jitdump_stats(d->rd)->removed;
		written(t, fd, d->rd, lines);
		t->state = T_OURS;
		jd->st.jitdump_maps_adopted++;
		jd->st.jitdump_functions_written += (uint64_t)lines;
	}
	close(fd);
}

static void first_write(struct jitdumps *jd, struct dump *d, struct target *t)
{
	struct map_info mi = { 0 };
	struct stat st;
	char name[32];

	map_path_name(t->pid, name, sizeof(name));
	if (fstatat(jd->dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT && create_map(jd, d, t) == -EEXIST)
			d->waiting = true;   /* made meanwhile: weighed next tick */
		return;
	}
	mi.dev = st.st_dev;
	mi.ino = st.st_ino;
	mi.size = (uint64_t)st.st_size;
	mi.uid = st.st_uid;
	mi.refused = S_ISLNK(st.st_mode) ? -ELOOP : !S_ISREG(st.st_mode) ? -EINVAL :
		     st.st_nlink > 1 ? -EMLINK : 0;
	if (policy__jitdump_adopt(jd->p, t->pid, t->start_ticks, &mi)) {
		adopt_map(jd, d, t, &st);
		return;
	}
	t->state = T_OWN;
	jd->st.jitdump_own_maps++;
	pr_info("jitdump %d: %s/%s is the process's own map: left as it is (its dump names its code for perf inject)",
		(int)t->pid, jd->map_dir, name);
}

static void append_map(struct jitdumps *jd, const struct dump *d, struct target *t)
{
	long lines;
	int fd;

	fd = open_ours(jd, t, O_WRONLY | O_APPEND);
	if (fd == -ENOENT) {
		t->state = T_DONE;     /* moved to the archive, or removed: not made again */
		return;
	}
	if (fd < 0) {
		taken_over(jd, d, t);
		return;
	}
	lines = perfmap__jitdump_write_since(d->rd, fd, t->rec_pid, t->seq);
	if (lines >= 0) {
		written(t, fd, d->rd, lines);
		jd->st.jitdump_functions_written += (uint64_t)lines;
	}
	close(fd);
}

/*
 * Bytes a writer appended to @old (unlinked now) past @from, appended to @fd:
 * written in the instant between the check and the rename, they are kept.
 */
static void keep_late_lines(int old, uint64_t from, uint64_t to, int fd)
{
	char buf[16384];
	ssize_t n;

	while (from < to) {
		n = pread(old, buf, to - from < sizeof(buf) ? to - from : sizeof(buf), (off_t)from);
		if (n <= 0 || perfmap__write_all(fd, buf, (size_t)n))
			return;
		from += (uint64_t)n;
	}
}

/*
 * A range's name was taken away (a move, a reload over it): the map is made
 * again whole and renamed over the one at the path, which was checked to be
 * exactly as perfmapd left it just before. (An exchange would let the old
 * file go back whole, but inotify reports an exchange as the name's removal
 * last, and the index would lose the map.) Anything written to the old file
 * in the instant between is copied after the new lines, and the map is left
 * to that writer from then on.
 */
static void rewrite_map(struct jitdumps *jd, const struct dump *d, struct target *t)
{
	char name[32], staged[64];
	uint64_t before;
	uint32_t rnd = 0;
	struct stat st;
	long lines = 0;
	int old, fd, err;

	old = open_ours(jd, t, O_RDONLY);
	if (old < 0) {
		if (old == -ENOENT)
			t->state = T_DONE;
		else
			taken_over(jd, d, t);
		return;
	}
	fd = fill_tmpfile(jd, d, t, old, &lines);
	if (fd < 0)
		goto close_old;
	map_path_name(t->pid, name, sizeof(name));
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t)t->seq;
	snprintf(staged, sizeof(staged), ".perfmapd.jitdump.%d.%08x", (int)t->pid, rnd);
	err = mapfile_link_tmpfile(jd->dirfd, fd, staged);
	if (err)
		goto close_fd;
	/* The last look before the rename: still perfmapd's, unwritten since. */
	if (fstat(old, &st) || (uint64_t)st.st_size != t->size || st.st_nlink != 1 ||
	    renameat(jd->dirfd, staged, jd->dirfd, name)) {
		unlinkat(jd->dirfd, staged, 0);
		taken_over(jd, d, t);
		goto close_fd;
	}
	before = t->size;
	t->lines = 0;
	t->removed = perfmap__jitdump_stats(d->rd)->removed;
	written(t, fd, d->rd, lines);
	jd->st.jitdump_maps_rewritten++;
	jd->st.jitdump_functions_written += (uint64_t)lines;
	if (!fstat(old, &st) && (uint64_t)st.st_size != before) {
		keep_late_lines(old, before, (uint64_t)st.st_size, fd);
		taken_over(jd, d, t);
	}
close_fd:
	close(fd);
close_old:
	close(old);
}

/* ---- whose maps a dump writes ---- */

static void refuse_target(struct jitdumps *jd, const struct dump *d, struct target *t)
{
	t->state = T_REFUSED;
	jd->st.jitdump_pids_refused++;
	pr_info("jitdump %d: %s holds records of pid %u, neither it nor a descendant of its uid: not written",
		(int)d->owner, d->path, (unsigned int)t->rec_pid);
}

static struct target *target_of(struct jitdumps *jd, struct dump *d, uint32_t rec_pid)
{
	struct target *t;
	unsigned int i;

	for (i = 0; i < d->nt; i++)
		if (d->t[i].rec_pid == rec_pid)
			return &d->t[i];
	if (d->nt == JITDUMP_TARGETS_MAX) {
		if (!d->targets_full) {
			d->targets_full = true;
			jd->st.jitdump_over_limit++;
			pr_warn("jitdump %d: %s: records of more than %d pids; the others are not written",
				(int)d->owner, d->path, JITDUMP_TARGETS_MAX);
		}
		return NULL;
	}
	t = &d->t[d->nt++];
	*t = (struct target){ .rec_pid = rec_pid, .state = T_NEW };
	/* In its own pid namespace only the producer's own pid is known to be its. */
	if (!d->foreign)
		t->pid = (pid_t)rec_pid;
	else if (rec_pid == (uint32_t)d->name_pid)
		t->pid = d->owner;
	else
		refuse_target(jd, d, t);
	return t;
}

static void sync_target(struct jitdumps *jd, struct dump *d, struct target *t)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);
	uint64_t start = 0;

	if (t->state != T_NEW && t->state != T_OURS)
		return;
	switch (policy__jitdump_target(jd->p, d->owner, d->owner_start, t->pid, d->uid, &start)) {
	case JITDUMP_TARGET_OK:
		break;
	case JITDUMP_TARGET_WAIT:
		d->waiting = true;
		return;
	case JITDUMP_TARGET_GONE:
		/*
		 * A child that wrote into its parent's dump before its fork was
		 * read: alive (kill(pid, 0): EPERM is a process too), it is in
		 * the table within a tick or two.
		 */
		if (t->state == T_NEW && t->tries++ < TARGET_TRIES &&
		    (kill(t->pid, 0) == 0 || errno == EPERM)) {
			d->waiting = true;
			return;
		}
		t->state = T_DONE;
		return;
	case JITDUMP_TARGET_REFUSED:
		if (t->state == T_NEW)
			refuse_target(jd, d, t);
		else
			t->state = T_DONE;
		return;
	}
	if (t->state == T_OURS && start != t->start_ticks) {
		t->state = T_DONE;     /* another process holds the pid now */
		return;
	}
	t->start_ticks = start;
	if (t->state == T_NEW)
		first_write(jd, d, t);
	else if (s->removed != t->removed)
		rewrite_map(jd, d, t);
	else if (perfmap__jitdump_seq(d->rd) != t->seq)
		append_map(jd, d, t);
}

/* Every map @d names code in, brought up to what was read. */
static void sync_dump(struct jitdumps *jd, struct dump *d)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);
	uint64_t seq = perfmap__jitdump_seq(d->rd);
	uint32_t pid;
	unsigned int i;

	if (!d->waiting && seq == d->seen_seq && s->removed == d->seen_removed)
		return;
	d->waiting = false;
	/* A pid with a function the dump names for the first time gets its map. */
	for (pid = perfmap__jitdump_next_pid(d->rd, 0); pid;
	     pid = perfmap__jitdump_next_pid(d->rd, pid))
		if (!target_of(jd, d, pid) && d->targets_full)
			break;
	for (i = 0; i < d->nt; i++)
		sync_target(jd, d, &d->t[i]);
	d->seen_seq = seq;
	d->seen_removed = s->removed;
}

void jitdumps__tick(struct jitdumps *jd)
{
	long budget = JITDUMPS_RECORDS_PER_TICK, n;
	struct dump *d;

	for (d = jd->dumps; d; d = d->next) {
		n = read_dump(jd, d, budget < JITDUMP_RECORDS_PER_TICK ? budget
							    : JITDUMP_RECORDS_PER_TICK);
		budget -= n;
		sync_dump(jd, d);
		if (budget <= 0)
			break;
	}
}

void jitdumps__flush(struct jitdumps *jd, pid_t pid)
{
	struct dump *d = dump_of(jd, pid);

	if (!d)
		return;
	read_dump(jd, d, JITDUMP_RECORDS_PER_TICK);
	sync_dump(jd, d);
}

static bool writes_for(const struct dump *d, pid_t pid)
{
	unsigned int i;

	for (i = 0; i < d->nt; i++)
		if (d->t[i].pid == pid && d->t[i].state == T_OURS)
			return true;
	return false;
}

void jitdumps__ended(struct jitdumps *jd, pid_t pid)
{
	struct dump **pp = &jd->dumps, *d;

	while ((d = *pp)) {
		if (d->owner != pid && !writes_for(d, pid)) {
			pp = &d->next;
			continue;
		}
		/* What it wrote last is in its map before its exit or exec is weighed. */
		read_dump(jd, d, JITDUMP_DRAIN_RECORDS);
		sync_dump(jd, d);
		if (d->owner != pid) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		jd->n--;
		dump_free(jd, d);
	}
}

/* What became of the producer's own map. */
static const char *owner_map(const struct dump *d)
{
	unsigned int i;

	for (i = 0; i < d->nt; i++)
		if (d->t[i].pid == d->owner)
			return target_state_str[d->t[i].state];
	return "none";
}

size_t jitdumps__describe(const struct jitdumps *jd, char *buf, size_t len, unsigned int max)
{
	const struct perfmap_jitdump_stats *s;
	const struct dump *d;
	unsigned int listed = 0, i, ours;
	size_t off = 0;
	int n;

	/* The reasons dumps stopped being read, those that did: "jitdump_stops: record_too_small=2". */
	for (i = 1; i < __PERFMAP_JITDUMP_STOP_MAX && off < len; i++) {
		if (!jd->stops[i])
			continue;
		n = snprintf(buf + off, len - off, "%s%s=%llu", off ? " " : "jitdump_stops: ",
			     perfmap__jitdump_stop_key((enum perfmap_jitdump_stop)i),
			     (unsigned long long)jd->stops[i]);
		if (n < 0)
			return off;
		off += (size_t)n < len - off ? (size_t)n : len - off - 1;
	}
	if (off && off < len - 1)
		buf[off++] = '\n', buf[off] = '\0';

	for (d = jd->dumps; d && listed < max && off < len; d = d->next, listed++) {
		s = perfmap__jitdump_stats(d->rd);
		for (i = ours = 0; i < d->nt; i++)
			ours += d->t[i].state == T_OURS;
		n = snprintf(buf + off, len - off,
			     "jitdump_%d: path=%s records=%llu functions=%llu moves=%llu debug_info=%llu torn_bytes=%llu maps_written=%u map=%s stopped=%s\n",
			     (int)d->owner, d->path, (unsigned long long)s->records,
			     (unsigned long long)s->funcs, (unsigned long long)s->moves,
			     (unsigned long long)s->debug_info, (unsigned long long)s->torn_bytes,
			     ours, owner_map(d), d->stopped ? "yes" : "no");
		if (n < 0)
			break;
		off += (size_t)n < len - off ? (size_t)n : len - off - 1;
	}
	return off;
}

/*
 * perfmapctl restore: put archived maps back at <map dir>/perf-<pid>.map, where
 * perf looks, so that a report made after the agent archived them resolves.
 * Never over a file that is there, never through a link, and never at a pid
 * a live process holds unless it is the very process the map came from: its
 * runtime would append to a foreign map (CPython appends without truncating).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "perfdata.h"
#include "perfmap.h"
#include "restore.h"

#define MAX_WANTS 4096
#define MAX_ARCHIVED (1u << 20)
#define PERFDATA_MAX_BYTES (1ull << 30)
#define ARCHIVED_MAX_BYTES (1ull << 30)
#define NS 1000000000LL

enum how { BY_NEWEST, BY_TICKS, BY_AT };

struct want {
	pid_t pid;
	enum how how;
	uint64_t ticks;
	int64_t at_ns;
	const char *at_text;
};

struct restore {
	const char *given_archive;     /* --archive-dir; NULL: the agent's, else the default */
	const char *archive_dir, *map_dir, *run_dir, *perf_data;
	struct ctl_archive ar;         /* the archive read: archive_dir, and whose it is */
	int archive_fd, map_fd;
	bool dry_run;
	int64_t boot_ns;               /* the wall clock at boot: start ticks to times */
	long hz;
	struct want *wants;
	size_t nwants;
	struct archived *a;            /* by pid, then by when archived */
	size_t n, cap;
	struct perfdata pd;
	int64_t rec_ns;                /* --perf-data: when it was recorded */
	const char *rec_how;
	int status;                    /* the worst exit status so far */
};

static const char usage_text[] =
	"Usage: perfmapctl restore [--archive-dir DIR] [--map-dir DIR] [--run-dir DIR] [--dry-run]\n"
	"                          (PID [--start-ticks N | --at TIME] ... | --perf-data FILE)\n"
	"\n"
	"The archive read is --archive-dir, else the one of the perfmapd running for\n"
	"--map-dir (/tmp; its status socket under --run-dir, " PERFMAPD_RUN_DIR "),\n"
	"else " CTL_ARCHIVE_DIR_DEFAULT ".\n";

static void worse(struct restore *r, int status)
{
	if (status > r->status)
		r->status = status;
}

static void fmt_time(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / NS);
	struct tm tm;

	if (ns == INT64_MIN || !localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(buf, len, "?");
}

/* "2026-11-22T10:00:00" (local time; "Z" after it: UTC), "@<unix seconds>", "-10m" (ago). */
static int parse_time(const char *s, int64_t *ns)
{
	struct timespec now;
	struct tm tm = { 0 };
	uint64_t ago;
	const char *end;
	char *e;
	long long v;
	time_t t;

	if (*s == '@') {
		errno = 0;
		v = strtoll(s + 1, &e, 10);
		if (errno || e == s + 1 || *e || v < 0 || v > INT64_MAX / NS)
			return -EINVAL;
		*ns = v * NS;
		return 0;
	}
	if (*s == '-') {
		if (perfmap__parse_duration(s + 1, &ago) || ago > INT64_MAX / NS)
			return -EINVAL;
		clock_gettime(CLOCK_REALTIME, &now);
		*ns = (int64_t)now.tv_sec * NS + now.tv_nsec - (int64_t)ago * NS;
		return 0;
	}
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		end = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (!end || (*end && strcmp(end, "Z")))
		return -EINVAL;
	tm.tm_isdst = -1;
	t = *end ? timegm(&tm) : mktime(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ns = (int64_t)t * NS;
	return 0;
}

static int parse_pid(const char *s, pid_t *pid)
{
	char *e;
	long v;

	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || e == s || *e || v <= 0 || v > INT_MAX)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

/* --start-ticks and --at qualify the PID before them. */
static int qualify(struct restore *r, int opt, const char *arg)
{
	struct want *w = r->nwants ? &r->wants[r->nwants - 1] : NULL;
	char *e;

	if (!w || w->how != BY_NEWEST) {
		ctl_error("restore: %s %s: give it after a PID, once", opt == 't' ? "--start-ticks" :
			  "--at", arg);
		return -EINVAL;
	}
	if (opt == 't') {
		errno = 0;
		w->ticks = strtoull(arg, &e, 10);
		if (errno || e == arg || *e || *arg == '-') {
			ctl_error("restore: --start-ticks %s: not a number of clock ticks", arg);
			return -EINVAL;
		}
		w->how = BY_TICKS;
		return 0;
	}
	if (parse_time(arg, &w->at_ns)) {
		ctl_error("restore: --at %s: not a time (2026-11-22T10:00:00, @<unix seconds>, -10m)",
			  arg);
		return -EINVAL;
	}
	w->how = BY_AT;
	w->at_text = arg;
	return 0;
}

static int add_want(struct restore *r, const char *arg)
{
	struct want *w;

	if (r->nwants >= MAX_WANTS) {
		ctl_error("restore: more than %d PIDs", MAX_WANTS);
		return -E2BIG;
	}
	w = &r->wants[r->nwants];
	*w = (struct want){ .how = BY_NEWEST };
	if (parse_pid(arg, &w->pid)) {
		ctl_error("restore: %s: not a pid", arg);
		return -EINVAL;
	}
	r->nwants++;
	return 0;
}

static int parse_args(struct restore *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "archive-dir", required_argument, NULL, 'a' },
		{ "map-dir", required_argument, NULL, 'm' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "perf-data", required_argument, NULL, 'p' },
		{ "start-ticks", required_argument, NULL, 't' },
		{ "at", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt, err = 0;

	/* "-" first: PIDs come back in order (as 1), so that --at and --start-ticks follow theirs. */
	while (!err && (opt = getopt_long(argc, argv, "-h", longopts, NULL)) != -1) {
		switch (opt) {
		case 1: err = add_want(r, optarg); break;
		case 'a': r->given_archive = optarg; break;
		case 'm': r->map_dir = optarg; break;
		case 'r': r->run_dir = optarg; break;
		case 'n': r->dry_run = true; break;
		case 'p': r->perf_data = optarg; break;
		case 't':
		case 'T': err = qualify(r, opt, optarg); break;
		case 'h': fputs(usage_text, stdout); return 1;
		default: return -EINVAL;
		}
	}
	if (err)
		return err;
	if (!r->nwants == !r->perf_data) {
		ctl_error("restore: give PIDs or --perf-data FILE (one of them)");
		return -EINVAL;
	}
	return 0;
}

/* ---- the archive ---- */

static bool wanted(const struct restore *r, pid_t pid)
{
	size_t i;

	if (r->perf_data)
		return perfdata_find(&r->pd, pid) != NULL;
	for (i = 0; i < r->nwants; i++)
		if (r->wants[i].pid == pid)
			return true;
	return false;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NS + ts->tv_nsec;
}

static int add_archived(struct restore *r, const struct archived *a)
{
	struct archived *na;
	size_t cap;

	if (r->n >= MAX_ARCHIVED)
		return -E2BIG;
	if (r->n == r->cap) {
		cap = r->cap ? r->cap * 2 : 64;
		na = realloc(r->a, cap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		r->a = na;
		r->cap = cap;
	}
	r->a[r->n++] = *a;
	return 0;
}

/* @name, if it is an archived map of a wanted pid: a regular file, with what its name and inode say. */
static int consider(struct restore *r, const char *name)
{
	struct archived a = { 0 };
	struct stat st;

	if (archived_parse_name(name, &a) || !wanted(r, a.pid))
		return 0;
	if (fstatat(r->archive_fd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
		return 0;
	a.mtime_ns = ts_ns(&st.st_mtim);
	a.uid = st.st_uid;
	a.gid = st.st_gid;
	a.ino = st.st_ino;
	a.size = (uint64_t)st.st_size;
	a.start_ns = INT64_MIN;
	if (a.has_ticks)
		a.start_ns = r->boot_ns + (int64_t)(a.ticks / (uint64_t)r->hz) * NS +
			     (int64_t)(a.ticks % (uint64_t)r->hz) * NS / r->hz;
	/* Started after it was archived: the ticks count from an earlier boot. */
	if (a.start_ns > a.mtime_ns)
		a.start_ns = INT64_MIN;
	return add_archived(r, &a);
}

static int by_pid_then_age(const void *x, const void *y)
{
	const struct archived *a = x, *b = y;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->mtime_ns < b->mtime_ns ? -1 : a->mtime_ns > b->mtime_ns;
}

/* The archived maps of the pids asked for (names starting with '.' are the agent's own: staged, temporary). */
static int scan_archive(struct restore *r)
{
	struct dirent *de;
	int fd, err = 0;
	DIR *d;

	fd = openat(r->archive_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	while (!err && (errno = 0, de = readdir(d)))
		if (de->d_name[0] != '.')
			err = consider(r, de->d_name);
	if (!err && errno)
		err = -errno;
	closedir(d);
	if (!err && r->n)
		qsort(r->a, r->n, sizeof(*r->a), by_pid_then_age);
	return err;
}

/* The archived maps of @pid: *@first and how many. */
static int maps_of(const struct restore *r, pid_t pid, struct archived **first)
{
	size_t i, j;

	for (i = 0; i < r->n && r->a[i].pid != pid; i++)
		;
	for (j = i; j < r->n && r->a[j].pid == pid; j++)
		;
	*first = r->a + i;
	return (int)(j - i);
}

/* ---- the live process at a pid ---- */

/* The start ticks of the process holding @pid (field 22 of /proc/<pid>/stat); -ENOENT when none. */
static int live_ticks(pid_t pid, uint64_t *ticks)
{
	struct perfmap_proc_stat st;
	int err;

	err = perfmap__proc_stat_read(pid, &st);
	if (err)
		return err == -ESRCH ? -ENOENT : err;
	*ticks = st.start_ticks;
	return 0;
}

/* Would a live process at the pid take @a's map for its own? Its reason in @why. */
static bool live_conflict(const struct restore *r, const struct archived *a, char *why, size_t len)
{
	char when[32];
	uint64_t t;
	int err;

	err = live_ticks(a->pid, &t);
	if (err == -ENOENT)
		return false;
	if (err) {
		snprintf(why, len, "cannot tell which process holds pid %d (%s)", (int)a->pid,
			 strerror(-err));
		return true;
	}
	/* The very process, but for an exec'd image's map: the image now running did not write it. */
	if (a->has_ticks && t == a->ticks && a->execd) {
		snprintf(why, len, "pid %d's process (tick %llu) exec'd since an earlier image of it wrote %s: the image now running could append to the restored map",
			 (int)a->pid, (unsigned long long)t, a->name);
		return true;
	}
	if (a->has_ticks && t == a->ticks)
		return false;
	fmt_time(r->boot_ns + (int64_t)(t / (uint64_t)r->hz) * NS, when, sizeof(when));
	if (a->has_ticks)
		snprintf(why, len, "pid %d is held by a live process started at tick %llu (%s), not the archived one (tick %llu): its runtime could append to the restored map",
			 (int)a->pid, (unsigned long long)t, when, (unsigned long long)a->ticks);
	else
		snprintf(why, len, "pid %d is held by a live process started at tick %llu (%s), and %s does not say when its process started: its runtime could append to the restored map",
			 (int)a->pid, (unsigned long long)t, when, a->name);
	return true;
}

/* ---- writing ---- */

static int copy_all(int src, int dst)
{
	char buf[65536];
	ssize_t n;
	int err;

	while ((n = read(src, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		err = perfmap__write_all(dst, buf, (size_t)n);
		if (err)
			return err;
	}
	return 0;
}

/* Our new file at @name, no longer wanted: removed only if it is still ours. */
static void unlink_ours(struct restore *r, const char *name, int fd)
{
	struct stat a, b;

	if (!fstat(fd, &a) && !fstatat(r->map_fd, name, &b, AT_SYMLINK_NOFOLLOW) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlinkat(r->map_fd, name, 0);
}

/* The archive's contents into the new file, made its owner's, and marked as restored. */
static int fill(struct restore *r, const struct archived *a, int dst, const char **why,
		bool *marked)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .max_bytes = ARCHIVED_MAX_BYTES);
	struct stat st;
	int src, err;

	src = perfmap__open_map_at(r->archive_fd, a->name, O_RDONLY, &oopts, &st);
	if (src < 0) {
		*why = perfmap_open_strerror(src);
		return src;
	}
	err = st.st_ino != a->ino ? -ESTALE : copy_all(src, dst);
	close(src);
	*why = err == -ESTALE ? "the archived map was replaced while it was read" :
				"cannot copy the archived map";
	if (err)
		return err;
	/* As the runtimes make their maps: the owner's alone; root's perf reads it too. */
	if (fchmod(dst, 0600) || fchown(dst, a->uid, a->gid)) {
		*why = "cannot give it the archived map's owner";
		return -errno;
	}
	/* So that the agent deletes it, rather than archiving it again, after its retention. */
	*marked = !fsetxattr(dst, PERFMAP_RESTORED_XATTR, a->name, strlen(a->name), 0);
	return 0;
}

static void say_restored(const struct restore *r, const struct archived *a, const char *how,
			 bool marked)
{
	char start[32], end[32];

	fmt_time(a->start_ns, start, sizeof(start));
	fmt_time(a->mtime_ns, end, sizeof(end));
	printf("restore %d: %s %s/perf-%d.map from %s (started %s, archived %s): %s%s\n",
	       (int)a->pid, r->dry_run ? "would write" : "wrote", r->map_dir, (int)a->pid, a->name,
	       start, end, how,
	       r->dry_run || marked ? "" :
	       "; not marked as restored (the file system took no " PERFMAP_RESTORED_XATTR " attribute), so perfmapd will archive it again");
}

/* One line for a pid not restored: "restore PID: PATH: DETAIL[TAIL]". */
static void refuse(struct restore *r, pid_t pid, const char *detail, const char *tail, int status)
{
	ctl_error("restore %d: %s/perf-%d.map: %s%s", (int)pid, r->map_dir, (int)pid, detail, tail);
	worse(r, status);
}

static void restore_one(struct restore *r, const struct archived *a, const char *how)
{
	char name[32], why[512];
	const char *what = NULL;
	bool marked = false;
	struct stat st;
	int fd, err;

	snprintf(name, sizeof(name), "perf-%d.map", (int)a->pid);
	if (live_conflict(r, a, why, sizeof(why))) {
		refuse(r, a->pid, why, "; refused, nothing written", CTL_FINDING);
		return;
	}
	if (!fstatat(r->map_fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		refuse(r, a->pid, S_ISLNK(st.st_mode) ? "a symlink is there" : "a file is there",
		       "; refused, nothing written", CTL_FINDING);
		return;
	}
	if (r->dry_run) {
		say_restored(r, a, how, false);
		worse(r, restore_dump(r->archive_fd, r->archive_dir, r->map_fd, r->map_dir, a, true));
		return;
	}
	fd = openat(r->map_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		refuse(r, a->pid, "a file was made there meanwhile", "; refused, nothing written",
		       CTL_FINDING);
		return;
	}
	if (fd < 0) {
		refuse(r, a->pid, strerror(errno), "", CTL_ERROR);
		return;
	}
	err = fill(r, a, fd, &what, &marked);
	/* A process may have taken the pid while we wrote: it must not find a foreign map. */
	if (!err && live_conflict(r, a, why, sizeof(why))) {
		unlink_ours(r, name, fd);
		close(fd);
		refuse(r, a->pid, why, "; refused, the file removed", CTL_FINDING);
		return;
	}
	if (err) {
		unlink_ours(r, name, fd);
		close(fd);
		snprintf(why, sizeof(why), "%s/%s: %s (%s)", r->archive_dir, a->name, what,
			 strerror(-err));
		refuse(r, a->pid, why, "; nothing written", CTL_ERROR);
		return;
	}
	close(fd);
	say_restored(r, a, how, marked);
	/* Its jitdump beside it, when the agent archived one with it. */
	worse(r, restore_dump(r->archive_fd, r->archive_dir, r->map_fd, r->map_dir, a, false));
}

/* ---- which map: by pid ---- */

/* "the newest of 3 archived maps of pid 9 (also perf-9-1.map, perf-9-2.map)" */
static void describe_others(const struct archived *m, int n, int chosen, const char *rule,
			    char *buf, size_t len)
{
	size_t off;
	int i, said = 0;

	off = (size_t)snprintf(buf, len, "%s", rule);
	if (n < 2 || off >= len)
		return;
	off += (size_t)snprintf(buf + off, len - off, " (%d archived maps of pid %d; the others:",
				n, (int)m->pid);
	for (i = 0; i < n && off < len; i++) {
		if (i == chosen)
			continue;
		if (said++ == 3) {
			off += (size_t)snprintf(buf + off, len - off, " and %d more", n - 4);
			break;
		}
		off += (size_t)snprintf(buf + off, len - off, " %s", m[i].name);
	}
	if (off < len)
		snprintf(buf + off, len - off, ")");
}

/* Of @n maps, the newest that started at @ticks; its words in @rule. */
static int pick_by_ticks(const struct archived *m, int n, uint64_t ticks, char *rule, size_t len)
{
	int i, c = -1, k = 0;

	for (i = 0; i < n; i++) {
		if (!m[i].has_ticks || m[i].ticks != ticks)
			continue;
		k++;
		if (c < 0 || m[i].mtime_ns > m[c].mtime_ns)
			c = i;
	}
	if (k > 1)
		snprintf(rule, len, "the newest of %d that started at tick %llu", k,
			 (unsigned long long)ticks);
	else
		snprintf(rule, len, "started at tick %llu", (unsigned long long)ticks);
	return c;
}

/* Which of @n archived maps @w means: the index, or -1 with the reason in @why. */
static int pick(const struct restore *r, const struct want *w, const struct archived *m, int n,
		char *rule, char *why, size_t len)
{
	const char *at_rule = NULL;
	int c;

	if (!n) {
		snprintf(why, len, "no archived map in %s%s", r->archive_dir, r->ar.whose);
		return -1;
	}
	switch (w->how) {
	case BY_TICKS:
		c = pick_by_ticks(m, n, w->ticks, rule, len);
		snprintf(why, len, "none of its %d archived maps started at tick %llu", n,
			 (unsigned long long)w->ticks);
		return c;
	case BY_AT:
		c = archived_choose_at(m, n, w->at_ns, &at_rule);
		snprintf(rule, len, "at %s: %s", w->at_text, at_rule ? at_rule : "");
		snprintf(why, len, "none of its %d archived maps was its process's at %s", n,
			 w->at_text);
		return c;
	case BY_NEWEST:
		break;
	}
	snprintf(rule, len, "%s", n > 1 ? "the newest" : "the only archived map");
	return archived_newest(m, n);
}

static void restore_want(struct restore *r, const struct want *w)
{
	char how[1024], rule[PATH_MAX + 256], why[sizeof(rule)];  /* pick() fills both up to one length */
	struct archived *m;
	int n, c;

	n = maps_of(r, w->pid, &m);
	c = pick(r, w, m, n, rule, why, sizeof(rule));
	if (c < 0) {
		refuse(r, w->pid, why, "; nothing written", CTL_FINDING);
		return;
	}
	describe_others(m, n, c, rule, how, sizeof(how));
	restore_one(r, &m[c], how);
}

/* ---- which map: by a perf.data's evidence ---- */

/* How many of @a's entries lie in the regions perf recorded for its pid. */
static void weigh(struct restore *r, struct archived *a)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .max_bytes = ARCHIVED_MAX_BYTES);
	struct perfmap_reader *rd;
	struct perfmap_record rec;
	struct stat st;
	int fd;

	a->inside = a->entries = 0;
	fd = perfmap__open_map_at(r->archive_fd, a->name, O_RDONLY, &oopts, &st);
	if (fd < 0)
		return;
	rd = perfmap_reader__from_fd(fd, NULL);
	while (rd && perfmap_reader__next(rd, &rec) > 0) {
		a->entries++;
		a->inside += perfdata_covers(&r->pd, a->pid, rec.start, rec.size);
	}
	perfmap_reader__free(rd);
	close(fd);
}

/* The candidate most of whose entries perf saw mapped; -1 when none has any, or a tie. */
static int by_evidence(struct restore *r, struct archived *m, int n)
{
	int i, best = -1;
	bool tie = false;

	for (i = 0; i < n; i++) {
		weigh(r, &m[i]);
		if (!m[i].inside)
			continue;
		if (best >= 0 && m[i].inside == m[best].inside)
			tie = true;
		if (best < 0 || m[i].inside > m[best].inside) {
			best = i;
			tie = false;
		}
	}
	return tie ? -1 : best;
}

static void restore_recorded(struct restore *r, pid_t pid)
{
	const char *rule = NULL;
	char how[1024], rb[512], when[32], why[2 * PATH_MAX + 160];
	struct archived *m;
	int n, c;

	n = maps_of(r, pid, &m);
	if (!n) {
		snprintf(why, sizeof(why), "perf recorded anonymous executable code, but the archive %s%s has no map of this pid",
			 r->archive_dir, r->ar.whose);
		refuse(r, pid, why, "; nothing written", CTL_FINDING);
		return;
	}
	c = n > 1 && perfdata_has_regions(&r->pd, pid, true) ? by_evidence(r, m, n) : -1;
	if (c >= 0) {
		snprintf(rb, sizeof(rb), "chosen by evidence: %ld of its %ld entries lie in the anonymous executable regions perf recorded",
			 m[c].inside, m[c].entries);
	} else if (n == 1) {
		c = 0;
		snprintf(rb, sizeof(rb), "the only archived map");
	} else {
		c = archived_choose_at(m, n, r->rec_ns, &rule);
		fmt_time(r->rec_ns, when, sizeof(when));
		snprintf(rb, sizeof(rb), "chosen by time: recorded %s (%s): %s", when, r->rec_how,
			 rule ? rule : "");
	}
	if (c < 0) {
		refuse(r, pid, "none of its archived maps was its process's when perf recorded",
		       "; nothing written", CTL_FINDING);
		return;
	}
	describe_others(m, n, c, rb, how, sizeof(how));
	restore_one(r, &m[c], how);
}

static int cmp_pid(const void *x, const void *y)
{
	pid_t a = *(const pid_t *)x, b = *(const pid_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * Every pid perf recorded that mapped anonymous executable code itself, or
 * that has an archived map. A child that only inherited its parent's code
 * is resolved by perf through the parent's map, so it needs none of its own.
 */
static int restore_perf_data(struct restore *r)
{
	struct archived *m;
	size_t i, n = 0, skipped = 0;
	pid_t *pids;

	pids = calloc(r->pd.npids ? r->pd.npids : 1, sizeof(*pids));
	if (!pids)
		return -ENOMEM;
	for (i = 0; i < r->pd.cap; i++)
		if (r->pd.pids[i].pid)
			pids[n++] = r->pd.pids[i].pid;
	qsort(pids, n, sizeof(*pids), cmp_pid);
	for (i = 0; i < n; i++) {
		if (perfdata_has_regions(&r->pd, pids[i], false) || maps_of(r, pids[i], &m))
			restore_recorded(r, pids[i]);
		else
			skipped++;
	}
	printf("restore: %s: %zu processes recorded; %zu mapped no anonymous executable code and have no archived map\n",
	       r->perf_data, n, skipped);
	free(pids);
	return 0;
}

/* ---- set-up ---- */

static int load_perf_data(struct restore *r)
{
	const char *why = NULL;
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t k;
	int fd, err;

	fd = open(r->perf_data, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		why = strerror(errno);
		goto close_fd;
	}
	err = -EINVAL;
	why = !S_ISREG(st.st_mode) ? "not a regular file, refused" :
	      (uint64_t)st.st_size > PERFDATA_MAX_BYTES ? "larger than 1G, refused" : NULL;
	if (why)
		goto close_fd;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	err = -ENOMEM;
	why = "out of memory";
	if (!buf)
		goto close_fd;
	while (got < (size_t)st.st_size && (k = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)k;
	err = perfdata_parse(buf, got, &r->pd, &why);
	r->rec_ns = r->pd.has_clock ? (int64_t)r->pd.clock_wall_ns : ts_ns(&st.st_mtim);
	r->rec_how = r->pd.has_clock ? "its start, from HEADER_CLOCK_DATA" :
				       "its end, from the file's mtime";
close_fd:
	if (err)
		ctl_error("restore: %s: %s", r->perf_data, why);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

static int open_dirs(struct restore *r)
{
	struct timespec real, boot;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	r->boot_ns = ts_ns(&real) - ts_ns(&boot);
	r->hz = sysconf(_SC_CLK_TCK);
	if (r->hz <= 0)
		r->hz = 100;
	r->archive_fd = open(r->archive_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->archive_fd < 0) {
		ctl_error("restore: archive %s%s: %s%s", r->archive_dir, r->ar.whose, strerror(errno),
			  errno == EACCES ? " (the archive is root's: run as root)" : "");
		return -errno;
	}
	r->map_fd = open(r->map_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->map_fd < 0) {
		ctl_error("restore: map directory %s: %s", r->map_dir, strerror(errno));
		return -errno;
	}
	return 0;
}

int cmd_restore(int argc, char **argv)
{
	struct restore r = { .map_dir = "/tmp", .run_dir = PERFMAPD_RUN_DIR, .archive_fd = -1,
			     .map_fd = -1 };
	size_t i;
	int err;

	r.wants = calloc(MAX_WANTS, sizeof(*r.wants));
	err = r.wants ? parse_args(&r, argc, argv) : -ENOMEM;
	if (err)
		goto free_restore;
	ctl_archive_find(&r.ar, r.given_archive, r.map_dir, r.run_dir);
	r.archive_dir = r.ar.dir;
	err = open_dirs(&r);
	if (!err && r.perf_data)
		err = load_perf_data(&r);
	if (!err)
		err = scan_archive(&r);
	if (err == -ENOMEM || err == -E2BIG)
		ctl_error("restore: archive %s%s: %s", r.archive_dir, r.ar.whose, strerror(-err));
	if (err)
		goto free_restore;
	if (r.perf_data)
		err = restore_perf_data(&r);
	for (i = 0; !r.perf_data && i < r.nwants; i++)
		restore_want(&r, &r.wants[i]);
free_restore:
	if (r.archive_fd >= 0)
		close(r.archive_fd);
	if (r.map_fd >= 0)
		close(r.map_fd);
	perfdata_free(&r.pd);
	free(r.a);
	free(r.wants);
	fflush(stdout);
	if (err > 0)
		return CTL_OK;  /* --help */
	return err ? CTL_ERROR : r.status;
}

/*
 * Exited processes' maps. perf report and samply read /tmp/perf-<pid>.map
 * after the process is gone, so a map stays at its path for --retention;
 * then it is moved aside in the map directory (a rename: never copied under
 * a writer), compacted into --archive-dir, and the archive is held under
 * --archive-max-bytes by evicting the oldest. The staged name carries the
 * archive name, so a move a crash interrupted is finished at the next start.
 *
 * Compacting a large map takes long (100 ms for 100k entries), and a fork
 * must not wait behind it: the move is done in the event loop, so that the
 * path is free before the event that needs it returns, and the compaction
 * and quota run in one worker thread, from the moved file's fd.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "compact.h"
#include "log.h"
#include "mapfile.h"
#include "perfmap.h"
#include "replace.h"

/* Counters the archiving thread shares with the status report. */
static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static void archive_name(pid_t pid, uint64_t start_ticks, enum archive_reason why,
			 const struct stat *st, char *buf, size_t len)
{
	switch (why) {
	case ARCHIVE_EXEC:
		/* One process may exec many images: the exec time tells them apart. */
		snprintf(buf, len, "perf-%d-%llu-exec%llu.map", (int)pid,
			 (unsigned long long)start_ticks, (unsigned long long)(mono_ns() / 1000000));
		break;
	case ARCHIVE_STALE:
		snprintf(buf, len, "perf-%d-stale%lld.map", (int)pid, (long long)st->st_mtim.tv_sec);
		break;
	default:
		if (start_ticks)
			snprintf(buf, len, "perf-%d-%llu.map", (int)pid, (unsigned long long)start_ticks);
		else
			snprintf(buf, len, "perf-%d-exited%lld.map", (int)pid,
				 (long long)st->st_mtim.tv_sec);
	}
}

struct archived_file {
	char name[256];
	off_t size;
	struct timespec mtime;
};

static int by_age(const void *x, const void *y)
{
	const struct archived_file *a = x, *b = y;

	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
	if (a->mtime.tv_nsec != b->mtime.tv_nsec)
		return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Every archived map, oldest first. */
static ssize_t archive_list(struct agent *a, int dfd, struct archived_file **out)
{
	struct archived_file *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	d = fdopendir(dup(dfd));
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "perf-", 5) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].size = st.st_size;
		v[n].mtime = st.st_mtim;
		n++;
	}
	closedir(d);
	(void)a;
	if (n)
		qsort(v, n, sizeof(*v), by_age);
	*out = v;
	return n;
}

/* Count the archive; with @evict, delete the oldest maps until it is under the quota. */
static void archive_scan(struct agent *a, bool evict, uint64_t *files, uint64_t *bytes)
{
	struct archived_file *v = NULL;
	uint64_t total = 0;
	ssize_t n, i, kept;
	int dfd;

	*files = *bytes = 0;
	dfd = open(a->cfg.archive_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	n = archive_list(a, dfd, &v);
	kept = n > 0 ? n : 0;
	for (i = 0; i < n; i++)
		total += v[i].size;
	for (i = 0; evict && i < n && total > a->cfg.archive_max_bytes; i++) {
		if (unlinkat(dfd, v[i].name, 0))
			continue;
		total -= v[i].size;
		kept--;
		count(&a->stats.archive_evicted);
		pr_info("archive: evicted %s (%lld bytes, oldest) to stay under %llu bytes",
			v[i].name, (long long)v[i].size,
			(unsigned long long)a->cfg.archive_max_bytes);
	}
	*files = kept;
	*bytes = total;
	free(v);
	close(dfd);
}

void archive_usage(struct agent *a, uint64_t *files, uint64_t *bytes)
{
	archive_scan(a, false, files, bytes);
}

static void enforce_quota(struct agent *a)
{
	uint64_t files, bytes;

	archive_scan(a, true, &files, &bytes);
}

struct archive_job {
	struct archive_job *next;
	int fd;                       /* the moved-aside map */
	char staged[128];             /* its name in the map directory */
};

struct archiver {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct archive_job *head, **tail;
	bool stop, started, busy;
};

static struct archiver archiver = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.tail = &archiver.head,
};

/* Compact the moved-aside map open as @fd into the archive, then drop the staged name. */
static int store(struct agent *a, int fd, const char *staged, const char *name)
{
	struct compact_job job = { .max_bytes = a->cfg.max_map_bytes };
	struct replace_result res;
	char path[4096];
	struct stat st;
	int err;

	snprintf(path, sizeof(path), "%s/%s", a->cfg.archive_dir, name);
	err = file_write_atomic(path, fd, compact_fill, &job, &res);
	if (err) {
		pr_err("archive %s/%s -> %s: %s; left at %s/%s", a->cfg.map_dir, staged, path,
		       err == -EFBIG ? "larger than --max-map-bytes" : strerror(-err),
		       a->cfg.map_dir, staged);
		count(&a->stats.archive_failed);
		return err;
	}
	/* The archive's age is the map's: the quota evicts the maps written longest ago. */
	if (!fstat(fd, &st)) {
		const struct timespec times[2] = { st.st_atim, st.st_mtim };

		utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW);
	}
	unlinkat(a->map_dir_fd, staged, 0);
	count(&a->stats.archived);
	pr_info("archive: %s/%s -> %s (%lu entries -> %lu lines)", a->cfg.map_dir,
		staged, path, (unsigned long)job.table.entries,
		(unsigned long)job.table.lines_out);
	enforce_quota(a);
	return 0;
}

static void *archiver_main(void *arg)
{
	struct agent *a = arg;
	struct archive_job *job;

	pthread_mutex_lock(&archiver.lock);
	for (;;) {
		while (!archiver.head && !archiver.stop)
			pthread_cond_wait(&archiver.cond, &archiver.lock);
		if (archiver.stop)
			break;
		job = archiver.head;
		archiver.head = job->next;
		if (!archiver.head)
			archiver.tail = &archiver.head;
		archiver.busy = true;
		pthread_mutex_unlock(&archiver.lock);

		store(a, job->fd, job->staged, job->staged + strlen(ARCHIVE_STAGE_PREFIX));
		close(job->fd);
		free(job);

		pthread_mutex_lock(&archiver.lock);
		archiver.busy = false;
		pthread_cond_broadcast(&archiver.cond);
	}
	pthread_mutex_unlock(&archiver.lock);
	return NULL;
}

/* Hand a moved-aside map to the worker; it owns @fd from here. */
static void enqueue(struct agent *a, int fd, const char *staged)
{
	struct archive_job *job = calloc(1, sizeof(*job));

	if (!job) {
		/* Left staged: the next start archives it. */
		close(fd);
		a->stats.errors++;
		return;
	}
	job->fd = fd;
	snprintf(job->staged, sizeof(job->staged), "%s", staged);
	pthread_mutex_lock(&archiver.lock);
	*archiver.tail = job;
	archiver.tail = &job->next;
	pthread_cond_signal(&archiver.cond);
	pthread_mutex_unlock(&archiver.lock);
}

void archive_fini(void)
{
	struct archive_job *job, *next;

	if (!archiver.started)
		return;
	pthread_mutex_lock(&archiver.lock);
	archiver.stop = true;
	pthread_cond_broadcast(&archiver.cond);
	pthread_mutex_unlock(&archiver.lock);
	/* The job in hand finishes; queued ones stay staged for the next start. */
	pthread_join(archiver.thread, NULL);
	for (job = archiver.head; job; job = next) {
		next = job->next;
		close(job->fd);
		free(job);
	}
	archiver.head = NULL;
	archiver.tail = &archiver.head;
	archiver.started = false;
}

int archive_init(struct agent *a)
{
	const char *dir = a->cfg.archive_dir;
	char path[4096], *p;
	struct stat st;

	snprintf(path, sizeof(path), "%s", dir);
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		goto fail;
	if (lstat(path, &st))
		goto fail;
	/* Others able to write here could plant links among the archives we delete. */
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		pr_err("archive %s: must be a directory owned by uid %u and writable by no one else",
		       dir, (unsigned int)geteuid());
		return -EPERM;
	}
	if (pthread_create(&archiver.thread, NULL, archiver_main, a)) {
		pr_err("archive %s: cannot start the archiving thread", dir);
		return -EAGAIN;
	}
	archiver.started = true;
	return 0;
fail:
	pr_err("archive %s: %s", dir, strerror(errno));
	return -errno;
}

static const char *const reason_words[] = {
	[ARCHIVE_EXIT] = "process exited",
	[ARCHIVE_EXEC] = "process exec'd a new image",
	[ARCHIVE_STALE] = "written by an earlier process with this pid",
	[ARCHIVE_DROP] = "only perfmapd's copy of the parent's map, never written",
};

int archive_map(struct agent *a, pid_t pid, uint64_t start_ticks,
		enum archive_reason why, const struct stat *expect)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	char name[32], path[4096], aname[96], staged[128];
	struct replace_result res;
	struct stat st;
	int fd, err;

	mapfile_name(pid, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", a->cfg.map_dir, name);
	fd = perfmap_open_map(path, &oopts);
	if (fd < 0) {
		if (fd != -ENOENT)
			pr_warn("archive %s: %s; left in place", path, perfmap_open_strerror(fd));
		return fd;
	}
	fstat(fd, &st);
	if (expect && (st.st_dev != expect->st_dev || st.st_ino != expect->st_ino)) {
		err = -ESTALE;
		goto close_fd;
	}
	if (a->cfg.dry_run) {
		pr_info("dry-run: would move %s aside (%s)", path, reason_words[why]);
		err = 0;
		goto close_fd;
	}
	archive_name(pid, start_ticks, why, &st, aname, sizeof(aname));
	snprintf(staged, sizeof(staged), ARCHIVE_STAGE_PREFIX "%s", aname);
	err = map_move_aside(a->map_dir_fd, name, fd, staged, &res);
	if (err == -EBUSY) {
		/* The callers try again later, and say so. */
		a->stats.busy_deferred++;
		pr_debug("archive %s: %s", path, res.why);
		goto close_fd;
	}
	if (err) {
		pr_warn("archive %s: %s; left in place", path, res.why ? res.why : strerror(-err));
		goto close_fd;
	}
	if (why == ARCHIVE_DROP) {
		unlinkat(a->map_dir_fd, staged, 0);
		pr_info("exec %d: removed %s (%s)", (int)pid, path, reason_words[why]);
		goto close_fd;
	}
	pr_info("archive %s: %s; moved aside to %s", path, reason_words[why], staged);
	enqueue(a, fd, staged);
	return 0;
close_fd:
	close(fd);
	return err;
}

void archive_staged(struct agent *a, const char *staged)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", a->cfg.map_dir, staged);
	fd = perfmap_open_map(path, &oopts);
	if (fd < 0) {
		pr_warn("archive %s: %s; left in place", path, perfmap_open_strerror(fd));
		return;
	}
	if (a->cfg.dry_run) {
		close(fd);
		return;
	}
	pr_info("archive %s: moved aside before a restart; finishing", path);
	enqueue(a, fd, staged);
}

/* ---- retention ---- */

static ssize_t retain_index(struct agent *a, pid_t pid)
{
	size_t i;

	for (i = 0; i < a->retained_count; i++)
		if (a->retained[i].pid == pid)
			return i;
	return -1;
}

bool retain_has(struct agent *a, pid_t pid)
{
	return retain_index(a, pid) >= 0;
}

static void retain_del(struct agent *a, size_t i)
{
	a->retained[i] = a->retained[--a->retained_count];
}

/* Insert or update the entry of @pid; only exited processes' maps count as retained. */
static struct retained *retain_put(struct agent *a, pid_t pid, uint64_t start_ticks,
				   const struct stat *st, uint64_t deadline_ns, int reason)
{
	struct retained *r, *nr;
	ssize_t i = retain_index(a, pid);

	if (i >= 0) {
		r = &a->retained[i];
	} else {
		nr = realloc(a->retained, (a->retained_count + 1) * sizeof(*nr));
		if (!nr) {
			a->stats.errors++;
			return NULL;
		}
		a->retained = nr;
		r = &a->retained[a->retained_count++];
		if (reason == ARCHIVE_EXIT)
			a->stats.retained_total++;
	}
	r->pid = pid;
	r->start_ticks = start_ticks;
	r->reason = reason;
	r->tries = 0;
	r->dev = st->st_dev;
	r->ino = st->st_ino;
	r->deadline_ns = deadline_ns;
	return r;
}

void retain_add(struct agent *a, pid_t pid, uint64_t start_ticks, const struct stat *st,
		uint64_t deadline_ns)
{
	retain_put(a, pid, start_ticks, st, deadline_ns, ARCHIVE_EXIT);
}

#define EXEC_RETRY_NS (100 * 1000000ull)
#define EXEC_TRIES 20  /* 2 s */

void retain_retry_exec(struct agent *a, pid_t pid, uint64_t start_ticks,
		       const struct stat *st, int reason)
{
	struct retained *r;

	r = retain_put(a, pid, start_ticks, st, mono_ns() + EXEC_RETRY_NS, reason);
	if (r)
		r->tries = EXEC_TRIES;
}

static int archive_retained(struct agent *a, const struct retained *r)
{
	struct stat st = { .st_dev = r->dev, .st_ino = r->ino };

	return archive_map(a, r->pid, r->start_ticks, r->reason, &st);
}

void retain_evict_pid(struct agent *a, pid_t pid)
{
	ssize_t i = retain_index(a, pid);
	struct retained r;

	if (i < 0)
		return;
	r = a->retained[i];
	retain_del(a, i);
	pr_info("pid %d reused: archiving the map of its earlier process now", (int)pid);
	archive_retained(a, &r);
}

void retain_expire(struct agent *a)
{
	uint64_t now = mono_ns();
	size_t i = 0;
	int err;

	while (i < a->retained_count) {
		struct retained *r = &a->retained[i];

		if (r->deadline_ns > now) {
			i++;
			continue;
		}
		err = archive_retained(a, r);
		if (err == -EBUSY && r->reason == ARCHIVE_EXIT) {
			/* Someone still writes to it (a LuaJIT child, say): later. */
			pr_info("archive %s/perf-%d.map: still open for writing; trying again in 10 s",
				a->cfg.map_dir, (int)r->pid);
			r->deadline_ns = now + 10ull * 1000000000;
			i++;
			continue;
		}
		if (err == -EBUSY && --r->tries) {
			r->deadline_ns = now + EXEC_RETRY_NS;
			i++;
			continue;
		}
		if (err == -EBUSY)
			pr_warn("exec %d: %s/perf-%d.map stays open for writing (the new image took it?); left in place",
				(int)r->pid, a->cfg.map_dir, (int)r->pid);
		else if (!err && r->reason == ARCHIVE_EXEC)
			a->stats.exec_archived++;
		else if (!err && r->reason == ARCHIVE_DROP)
			a->stats.exec_dropped++;
		retain_del(a, i);
	}
}

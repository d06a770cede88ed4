/*
 * The archive. perf report and samply read /tmp/perf-<pid>.map after the
 * process is gone, so a map stays at its path for --retention (retention.c);
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

#include "archive.h"
#include "clock.h"
#include "log.h"
#include "mapname.h"
#include "perfmap_tools.h"

struct archive_job {
	struct archive_job *next;
	int fd;                       /* the moved-aside map */
	char staged[128];             /* its name in the map directory */
};

struct archive {
	struct archive_config cfg;
	struct archive_stats stats;   /* atomic: the worker counts, status reads */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct archive_job *head, **tail;
	bool stop, started, busy;
};

static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static void archive_name(pid_t pid, uint64_t start_ticks, enum archive_reason why,
			 char *buf, size_t len)
{
	/* Milliseconds since boot tell apart the maps one pid leaves. */
	unsigned long long ms = clock_boot_ns() / 1000000;

	switch (why) {
	case ARCHIVE_EXEC:
		snprintf(buf, len, "perf-%d-%llu-exec%llu.map", (int)pid,
			 (unsigned long long)start_ticks, ms);
		break;
	case ARCHIVE_STALE:
		snprintf(buf, len, "perf-%d-stale%llu.map", (int)pid, ms);
		break;
	default:
		if (start_ticks)
			snprintf(buf, len, "perf-%d-%llu.map", (int)pid, (unsigned long long)start_ticks);
		else
			snprintf(buf, len, "perf-%d-exited%llu.map", (int)pid, ms);
	}
}

/* ---- the quota ---- */

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
static ssize_t archive_list(int dfd, struct archived_file **out)
{
	struct archived_file *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	fd = dup(dfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
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
	if (n)
		qsort(v, n, sizeof(*v), by_age);
	*out = v;
	return n;
}

/* Count the archive; with @evict, delete the oldest maps until it is under the quota. */
static void archive_scan(struct archive *ar, bool evict, uint64_t *files, uint64_t *bytes)
{
	struct archived_file *v = NULL;
	uint64_t total = 0;
	ssize_t n, i, kept;
	int dfd;

	*files = *bytes = 0;
	dfd = open(ar->cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	n = archive_list(dfd, &v);
	kept = n > 0 ? n : 0;
	for (i = 0; i < n; i++)
		total += v[i].size;
	for (i = 0; evict && i < n && total > ar->cfg.max_bytes; i++) {
		if (unlinkat(dfd, v[i].name, 0))
			continue;
		total -= v[i].size;
		kept--;
		count(&ar->stats.evicted);
		pr_info("archive: evicted %s (%lld bytes, oldest) to stay under %llu bytes",
			v[i].name, (long long)v[i].size, (unsigned long long)ar->cfg.max_bytes);
	}
	*files = kept;
	*bytes = total;
	free(v);
	close(dfd);
}

void archive__usage(struct archive *ar, uint64_t *files, uint64_t *bytes)
{
	archive_scan(ar, false, files, bytes);
}

void archive__stats(struct archive *ar, struct archive_stats *out)
{
	out->archived = __atomic_load_n(&ar->stats.archived, __ATOMIC_RELAXED);
	out->evicted = __atomic_load_n(&ar->stats.evicted, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&ar->stats.failed, __ATOMIC_RELAXED);
}

/* ---- the worker ---- */

/* Compact the moved-aside map open as @fd into the archive, then drop the staged name. */
static int store(struct archive *ar, int fd, const char *staged, const char *name)
{
	struct perfmap_compact_job job = { .max_bytes = ar->cfg.max_map_bytes };
	struct perfmap_replace_result res;
	uint64_t files, bytes;
	char path[4096];
	struct stat st;
	int err;

	snprintf(path, sizeof(path), "%s/%s", ar->cfg.dir, name);
	err = perfmap__write_atomic(path, fd, perfmap__compact_fill, &job, &res);
	if (err) {
		pr_err("archive %s/%s -> %s: %s; left at %s/%s", ar->cfg.map_dir, staged, path,
		       err == -EFBIG ? "larger than --max-map-bytes" : strerror(-err),
		       ar->cfg.map_dir, staged);
		count(&ar->stats.failed);
		return err;
	}
	/* The archive's age is the map's: the quota evicts the maps written longest ago. */
	if (!fstat(fd, &st)) {
		const struct timespec times[2] = { st.st_atim, st.st_mtim };

		utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW);
	}
	unlinkat(ar->cfg.map_dir_fd, staged, 0);
	count(&ar->stats.archived);
	pr_info("archive: %s/%s -> %s (%lu entries -> %lu lines)", ar->cfg.map_dir,
		staged, path, (unsigned long)job.table.entries,
		(unsigned long)job.table.lines_out);
	archive_scan(ar, true, &files, &bytes);
	return 0;
}

static void *archiver_main(void *arg)
{
	struct archive *ar = arg;
	struct archive_job *job;

	pthread_mutex_lock(&ar->lock);
	for (;;) {
		while (!ar->head && !ar->stop)
			pthread_cond_wait(&ar->cond, &ar->lock);
		if (ar->stop)
			break;
		job = ar->head;
		ar->head = job->next;
		if (!ar->head)
			ar->tail = &ar->head;
		ar->busy = true;
		pthread_mutex_unlock(&ar->lock);

		store(ar, job->fd, job->staged, job->staged + strlen(ARCHIVE_STAGE_PREFIX));
		close(job->fd);
		free(job);

		pthread_mutex_lock(&ar->lock);
		ar->busy = false;
		pthread_cond_broadcast(&ar->cond);
	}
	pthread_mutex_unlock(&ar->lock);
	return NULL;
}

/* Hand a moved-aside map to the worker; it owns @fd from here. */
static void enqueue(struct archive *ar, int fd, const char *staged)
{
	struct archive_job *job = calloc(1, sizeof(*job));

	if (!job) {
		/* Left staged: the next start archives it. */
		close(fd);
		count(&ar->stats.failed);
		return;
	}
	job->fd = fd;
	snprintf(job->staged, sizeof(job->staged), "%s", staged);
	pthread_mutex_lock(&ar->lock);
	*ar->tail = job;
	ar->tail = &job->next;
	pthread_cond_signal(&ar->cond);
	pthread_mutex_unlock(&ar->lock);
}

void archive__flush(struct archive *ar)
{
	pthread_mutex_lock(&ar->lock);
	while (ar->head || ar->busy)
		pthread_cond_wait(&ar->cond, &ar->lock);
	pthread_mutex_unlock(&ar->lock);
}

static int make_dir(const char *dir)
{
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
	return 0;
fail:
	pr_err("archive %s: %s", dir, strerror(errno));
	return -errno;
}

struct archive *archive__open(const struct archive_config *cfg)
{
	struct archive *ar;
	int err;

	err = make_dir(cfg->dir);
	if (err)
		goto fail;
	ar = calloc(1, sizeof(*ar));
	if (!ar) {
		err = -ENOMEM;
		goto fail;
	}
	ar->cfg = *cfg;
	ar->tail = &ar->head;
	pthread_mutex_init(&ar->lock, NULL);
	pthread_cond_init(&ar->cond, NULL);
	if (pthread_create(&ar->thread, NULL, archiver_main, ar)) {
		pr_err("archive %s: cannot start the archiving thread", cfg->dir);
		archive__free(ar);
		err = -EAGAIN;
		goto fail;
	}
	ar->started = true;
	return ar;
fail:
	errno = -err;
	return NULL;
}

void archive__free(struct archive *ar)
{
	struct archive_job *job, *next;

	if (!ar)
		return;
	if (ar->started) {
		pthread_mutex_lock(&ar->lock);
		ar->stop = true;
		pthread_cond_broadcast(&ar->cond);
		pthread_mutex_unlock(&ar->lock);
		/* The job in hand finishes; queued ones stay staged for the next start. */
		pthread_join(ar->thread, NULL);
	}
	for (job = ar->head; job; job = next) {
		next = job->next;
		close(job->fd);
		free(job);
	}
	pthread_cond_destroy(&ar->cond);
	pthread_mutex_destroy(&ar->lock);
	free(ar);
}

/* ---- moving aside ---- */


int archive__move(struct archive *ar, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		  dev_t dev, ino_t ino, uint64_t size)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	struct perfmap_replace_result res = { 0 };
	char name[32], aname[96], staged[128];
	struct stat st;
	int fd, err;

	map_name(pid, name, sizeof(name));
	fd = perfmap__open_map_at(ar->cfg.map_dir_fd, name, O_RDONLY, &oopts, &st);
	if (fd < 0) {
		if (fd != -ENOENT)
			pr_warn("archive %s/%s: %s; left in place", ar->cfg.map_dir, name,
				perfmap_open_strerror(fd));
		return fd;
	}
	if (st.st_dev != dev || st.st_ino != ino) {
		err = -ESTALE;
		goto close_fd;
	}
	archive_name(pid, start_ticks, why, aname, sizeof(aname));
	snprintf(staged, sizeof(staged), ARCHIVE_STAGE_PREFIX "%s", aname);
	err = perfmap__move_aside(ar->cfg.map_dir_fd, name, fd, size, staged, &res);
	if (err == -EBUSY && res.kept[0]) {
		/* A writer came while it was moved, and the name could not be given back. */
		pr_warn("archive %s/%s: %s; the file is at %s/%s, where its writer goes on writing",
			ar->cfg.map_dir, name, res.why, ar->cfg.map_dir, res.kept);
		goto close_fd;
	}
	if (err == -EBUSY) {
		/* The caller tries again later, and says so. */
		pr_debug("archive %s/%s: %s", ar->cfg.map_dir, name, res.why);
		goto close_fd;
	}
	if (err) {
		pr_warn("archive %s/%s: %s; left in place", ar->cfg.map_dir, name,
			res.why ? res.why : strerror(-err));
		goto close_fd;
	}
	if (why == ARCHIVE_DROP) {
		unlinkat(ar->cfg.map_dir_fd, staged, 0);
		pr_info("exec %d: removed %s/%s (%s)", (int)pid, ar->cfg.map_dir, name,
			archive_reason_str(why));
		goto close_fd;
	}
	pr_info("archive %s/%s: %s; moved aside to %s", ar->cfg.map_dir, name, archive_reason_str(why),
		staged);
	enqueue(ar, fd, staged);
	return 0;
close_fd:
	close(fd);
	return err;
}

void archive__finish_staged(struct archive *ar, const char *staged)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	struct stat st;
	int fd;

	fd = perfmap__open_map_at(ar->cfg.map_dir_fd, staged, O_RDONLY, &oopts, &st);
	if (fd < 0) {
		pr_warn("archive %s/%s: %s; left in place", ar->cfg.map_dir, staged,
			perfmap_open_strerror(fd));
		return;
	}
	pr_info("archive %s/%s: moved aside before a restart; finishing", ar->cfg.map_dir, staged);
	enqueue(ar, fd, staged);
}

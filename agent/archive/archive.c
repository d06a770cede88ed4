/*
 * The archive. perf report and samply read /tmp/perf-<pid>.map after the
 * process is gone, so a map stays at its path for --retention (retention.c);
 * then it is moved aside in the map directory (a rename: never copied under
 * a writer) to a random name, recorded in the journal (archive_journal.c),
 * compacted into --archive-dir (archive_file.c), and the archive is held
 * under --archive-max-bytes, fairly between users (archive_quota.c).
 *
 * Compacting a large map takes long (100 ms for 100k entries), and a fork
 * must not wait behind it: the move is done in the event loop, so that the
 * path is free before the event that needs it returns, and the compaction
 * and quota run in one worker thread. The worker's queue is bounded and its
 * jobs hold no fd: the worker reopens each staged map by name and checks it
 * is the file recorded, so a user's many maps cost the agent no fds. A uid
 * has a quarter of the queue at most: one user's maps, however many, leave
 * room for everyone else's. The quota's index is in memory (archive_quota.c):
 * no store and no status request lists the archive.
 *
 * An exited process's jitdump, when its runtime wrote it in the map
 * directory (CPython's /tmp/jit-<pid>.dump), would stay there forever: it
 * goes with its map, moved aside under the same checks (the owner's, one
 * link, no writer), journaled as a map is, in the same job, and stored beside
 * the map's archived name as it is (binary: nothing to compact). The quota
 * counts it with its map and deletes both together.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/archive_file.h"
#include "archive/archive_journal.h"
#include "archive/archive_quota.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/mapname.h"
#include "perfmap_tools.h"

#define STAGE_TRIES 4

/* A jitdump staged with its map: apart, so that a job without one stays small. */
struct job_dump {
	struct staged_rec rec;
	char map_name[128];           /* the name the map got in the archive: the dump's beside it */
};

struct archive_job {
	struct archive_job *next;
	struct staged_rec rec;        /* the staged map: reopened by name, checked by identity */
	bool recovered;               /* left staged by an earlier run: maybe stored already */
	bool map_done;                /* the map is dealt with: a retry does only the dump */
	struct job_dump *dump;        /* its jitdump, staged with it, or NULL */
};

static void job_free(struct archive_job *job)
{
	if (job)
		free(job->dump);
	free(job);
}

/* A uid with maps in the queue: as many as the queue holds at most, in a short array. */
struct queued_uid {
	uid_t uid;
	unsigned int n;
	bool full_said;               /* its share's being full is logged once while it has any */
};

struct archive {
	struct archive_config cfg;
	struct archive_stats stats;   /* atomic: the worker counts, status reads */
	int dir_fd;                   /* --archive-dir */
	int journal_fd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct archive_job *head, **tail;
	unsigned int queued;
	struct queued_uid *uids;      /* under the lock */
	size_t nuids, uids_cap;
	struct archive_quota *quota;          /* the worker's, but for its totals */
	uint64_t run;                 /* this run's, in the journal's records of its moves */
	bool stop, started, busy, paused;
	uint64_t put_off;             /* the worker's: stores put off since the one said */
	bool full_said;               /* the queue's being full is logged once per time */
};

static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static void archive_name(pid_t pid, uint64_t start_ticks, enum archive_reason why,
			 const char *tag, char *buf, size_t len)
{
	/* Milliseconds since boot tell apart the maps one pid leaves. */
	unsigned long long ms = clock_boot_ns() / 1000000;
	size_t n;

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
	/* The container beside the pid: "perf-<pid>-<start>-c<12 hex>.map". */
	n = strlen(buf);
	if (tag && *tag && n > 4 && n + strlen(tag) + 1 < len) {
		buf[n - 4] = '-';
		strcpy(buf + n - 3, tag);
		strcat(buf, ".map");
	}
}

void archive__usage(struct archive *ar, uint64_t *files, uint64_t *bytes)
{
	archive_quota__usage(ar->quota, files, bytes);
}

void archive__stats(struct archive *ar, struct archive_stats *out)
{
	const struct archive_stats *s = &ar->stats;

#define PERFMAPD_ARCHIVE(key, field, ...) \
	out->field = __atomic_load_n(&s->field, __ATOMIC_RELAXED);
#include "perfmapd_counters.def"
}

/* ---- the worker ---- */

/* The staged map @rec names, if it is still the file the agent moved aside. */
static int open_staged(struct archive *ar, const struct staged_rec *rec, struct stat *st)
{
	int fd;

	/* Its owner may have linked it elsewhere; the identity is what counts, not the links. */
	fd = openat(ar->cfg.map_dir_fd, rec->staged,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_dev != rec->dev ||
	    st->st_ino != rec->ino || st->st_uid != rec->uid) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The staged map is gone or another file: nothing of the agent's is left to finish. */
/* How long the worker waits before it tries a store again for want of fds or memory. */
#define STORE_RETRY_NS (1000ull * 1000000)

/* Out of fds or memory: the agent's passing state; the map stays staged and is tried again. */
static bool short_of_resources(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM;
}

/* Said once until a store works again; the worker tries again in a second. */
static int put_off(struct archive *ar, const struct staged_rec *rec, int err)
{
	count(&ar->stats.store_deferred);
	if (!ar->put_off++)
		pr_warn("archive %s/%s -> %s/%s: %s; kept staged and tried again every second (said once until a store works)",
			ar->cfg.map_dir, rec->staged, ar->cfg.dir, rec->name, strerror(-err));
	return err;
}

static void lost_staged(struct archive *ar, const struct staged_rec *rec, int err)
{
	archive_journal__remove(ar->journal_fd, rec->staged);
	if (err == -ESTALE) {
		count(&ar->stats.staged_refused);
		pr_warn("archive %s/%s: not the file the agent moved aside (replaced by its owner?); left alone",
			ar->cfg.map_dir, rec->staged);
		return;
	}
	count(&ar->stats.failed);
	pr_warn("archive %s/%s: %s; its %s is not archived", ar->cfg.map_dir, rec->staged,
		err == -ENOENT ? "removed by its owner after the move" : strerror(-err),
		archive_file__is_dump(rec->name) ? "jitdump" : "map");
}

/* Bring the archive within its bounds, by the index: no listing. */
static void enforce(struct archive *ar)
{
	uint64_t dumps, n = archive_quota__enforce(ar->quota, ar->dir_fd, ar->cfg.dir,
				    __atomic_load_n(&ar->cfg.max_bytes, __ATOMIC_RELAXED),
				    ar->cfg.max_files_per_uid, &dumps);

	__atomic_fetch_add(&ar->stats.evicted, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ar->stats.jitdumps_evicted, dumps, __ATOMIC_RELAXED);
}

/*
 * The archive holds the staged map @rec names: drop it and its record. Its
 * record stays while the staged map does (a removal refused): the next
 * start finds it archived by its mark, and tries the removal again.
 */
static void drop_stored(struct archive *ar, const struct staged_rec *rec)
{
	if (unlinkat(ar->cfg.map_dir_fd, rec->staged, 0) && errno != ENOENT) {
		pr_warn("archive %s/%s: archived as %s/%s, but cannot be removed: %s; removed at the next start",
			ar->cfg.map_dir, rec->staged, ar->cfg.dir, rec->name, strerror(errno));
		return;
	}
	archive_journal__remove(ar->journal_fd, rec->staged);
}

/*
 * A staged map an earlier run left: archived already if that run was killed
 * between the archived map's link and the staged map's removal. The mark
 * (archive_file.c) says so: it was set before the link, and names this
 * staged map alone. Never the file times.
 */
static bool stored_before(struct archive *ar, const struct staged_rec *rec)
{
	bool dump = archive_file__is_dump(rec->name);
	char found[128];

	if (archive_file__find(ar->dir_fd, rec->name, rec->staged, found, sizeof(found)))
		return false;
	drop_stored(ar, rec);
	count(dump ? &ar->stats.jitdumps_stored : &ar->stats.archived);
	pr_info("archive: %s/%s was archived as %s/%s before a restart; the staged %s removed, not archived twice",
		ar->cfg.map_dir, rec->staged, ar->cfg.dir, found, dump ? "jitdump" : "map");
	return true;
}

/*
 * Write the staged file @rec names (a map, or a jitdump: its record's name
 * says) into the archive as @name, then drop it and its record. -EALREADY:
 * an earlier run had stored it.
 */
static int store_file(struct archive *ar, const struct staged_rec *rec, const char *name,
		      bool recovered, struct archive_file_res *res, struct stat *st)
{
	bool dump = archive_file__is_dump(rec->name);
	struct archive_file_req rq = {
		.dir = ar->cfg.dir, .dir_fd = ar->dir_fd, .name = name,
		.staged = rec->staged, .uid = rec->uid, .gid = rec->gid,
		.max_map_bytes = dump ? ar->cfg.max_dump_bytes : ar->cfg.max_map_bytes,
		.max_table_bytes = ar->cfg.max_table_bytes, .verbatim = dump,
	};
	int err;

	rq.src_fd = open_staged(ar, rec, st);
	if (short_of_resources(rq.src_fd))
		return put_off(ar, rec, rq.src_fd);
	if (rq.src_fd < 0) {
		lost_staged(ar, rec, rq.src_fd);
		return rq.src_fd;
	}
	/* Still the file the agent moved aside (open_staged()): only then is it removed for its mark. */
	if (recovered && stored_before(ar, rec)) {
		close(rq.src_fd);
		return -EALREADY;
	}
	rq.src_size = (uint64_t)st->st_size;
	err = archive_file__write(&rq, res);
	close(rq.src_fd);
	if (short_of_resources(err))
		return put_off(ar, rec, err);
	if (err) {
		pr_err("archive %s/%s -> %s/%s: %s: %s; left at %s/%s for the next start",
		       ar->cfg.map_dir, rec->staged, ar->cfg.dir, name, res->why,
		       strerror(-err), ar->cfg.map_dir, rec->staged);
		count(&ar->stats.failed);
		/* In the archive all the same (its directory not synced): on the quota's books. */
		if (res->linked && archive_quota__add(ar->quota, res->name, res->cost, res->at, rec->uid))
			pr_warn("archive: %s/%s is not counted in the quota: out of memory; counted from the next start",
				ar->cfg.dir, res->name);
		return err;
	}
	drop_stored(ar, rec);
	if (ar->put_off) {
		pr_info("archive: stores work again; %llu had been put off",
			(unsigned long long)ar->put_off);
		ar->put_off = 0;
	}
	return 0;
}

/* The map @rec named is in the archive as @res says: counted, said, on the quota's books. */
static void stored_map(struct archive *ar, const struct staged_rec *rec,
		       const struct archive_file_res *res, const struct stat *st)
{
	count(&ar->stats.archived);
	if (res->uncompacted) {
		count(&ar->stats.uncompacted);
		pr_warn("archive: %s/%s -> %s/%s (%llu bytes, %lu entries) stored uncompacted: %s",
			ar->cfg.map_dir, rec->staged, ar->cfg.dir, res->name,
			(unsigned long long)st->st_size, res->entries, res->uncompacted);
	} else {
		pr_info("archive: %s/%s -> %s/%s (%lu entries -> %lu lines)", ar->cfg.map_dir,
			rec->staged, ar->cfg.dir, res->name, res->entries, res->lines);
	}
	if (archive_quota__add(ar->quota, res->name, res->cost, res->at, rec->uid))
		pr_warn("archive: %s/%s is not counted in the quota: out of memory; counted from the next start",
			ar->cfg.dir, res->name);
}

/* The jitdump @rec named is in the archive, beside the archived map @map (NULL: none known). */
static void stored_dump(struct archive *ar, const struct staged_rec *rec, const char *map,
			const struct archive_file_res *res, const struct stat *st)
{
	count(&ar->stats.jitdumps_stored);
	if (res->truncated)
		pr_warn("archive: %s/%s -> %s/%s: a jitdump its owner grew past %llu bytes after it was moved aside; its first %llu bytes kept",
			ar->cfg.map_dir, rec->staged, ar->cfg.dir, res->name,
			(unsigned long long)ar->cfg.max_dump_bytes,
			(unsigned long long)ar->cfg.max_dump_bytes);
	else
		pr_info("archive: %s/%s -> %s/%s (a jitdump, %llu bytes, as it was%s%s)",
			ar->cfg.map_dir, rec->staged, ar->cfg.dir, res->name,
			(unsigned long long)st->st_size, map ? ", beside " : "", map ? map : "");
	if (archive_quota__add_dump(ar->quota, map, res->name, res->cost, res->at, rec->uid))
		pr_warn("archive: %s/%s is not counted in the quota: out of memory; counted from the next start",
			ar->cfg.dir, res->name);
}

/* The jitdump staged with a job's map, named beside the name the map got. */
static int store_dump(struct archive *ar, const struct job_dump *d)
{
	struct archive_file_res res;
	char name[sizeof(d->rec.name) + 16];
	struct stat st;
	int err;

	/* The map not stored: the name recorded, beside the map's name as asked for. */
	if (!d->map_name[0] || perfmap__archived_dump_name(d->map_name, name, sizeof(name)))
		snprintf(name, sizeof(name), "%s", d->rec.name);
	err = store_file(ar, &d->rec, name, false, &res, &st);
	if (!err)
		stored_dump(ar, &d->rec, d->map_name[0] ? d->map_name : NULL, &res, &st);
	return err;
}

/*
 * Store the staged map @job names, and its jitdump if it has one; then hold
 * the archive to its bounds. Out of fds or memory, what is left of the job
 * is tried again (short_of_resources()): a map stored is not stored twice.
 */
static int store(struct archive *ar, struct archive_job *job)
{
	struct archive_file_res res;
	struct stat st;
	int err;

	if (!job->map_done) {
		err = store_file(ar, &job->rec, job->rec.name, job->recovered, &res, &st);
		if (short_of_resources(err))
			return err;
		job->map_done = true;
		/* A dump alone: staged with its map by an earlier run, finished on its own. */
		if (!err && archive_file__is_dump(job->rec.name))
			stored_dump(ar, &job->rec, NULL, &res, &st);
		else if (!err)
			stored_map(ar, &job->rec, &res, &st);
		if (!err && job->dump && !archive_file__is_dump(job->rec.name))
			snprintf(job->dump->map_name, sizeof(job->dump->map_name), "%s", res.name);
	}
	if (job->dump) {
		err = store_dump(ar, job->dump);
		if (short_of_resources(err))
			return err;
	}
	enforce(ar);
	return 0;
}

/* ---- the queue, shared between uids (under the lock) ---- */

static struct queued_uid *queued_of(struct archive *ar, uid_t uid)
{
	size_t i;

	for (i = 0; i < ar->nuids; i++)
		if (ar->uids[i].uid == uid)
			return &ar->uids[i];
	return NULL;
}

/* One more of @uid's in the queue; -ENOMEM with nothing changed. */
static int queued_add(struct archive *ar, uid_t uid)
{
	struct queued_uid *q = queued_of(ar, uid), *nq;
	size_t cap;

	if (!q && ar->nuids == ar->uids_cap) {
		cap = ar->uids_cap ? ar->uids_cap * 2 : 8;
		nq = realloc(ar->uids, cap * sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		ar->uids = nq;
		ar->uids_cap = cap;
	}
	if (!q) {
		q = &ar->uids[ar->nuids++];
		*q = (struct queued_uid){ .uid = uid };
	}
	q->n++;
	ar->queued++;
	return 0;
}

static void queued_del(struct archive *ar, uid_t uid)
{
	struct queued_uid *q = queued_of(ar, uid);

	ar->queued--;
	if (q && !--q->n)
		*q = ar->uids[--ar->nuids];
}

/* Back at the head of the queue, after a pause: the other jobs need fds just as much. */
static void retry_later(struct archive *ar, struct archive_job *job)
{
	struct timespec until;
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &until);
	ns = until.tv_nsec + STORE_RETRY_NS;
	until.tv_sec += ns / 1000000000;
	until.tv_nsec = ns % 1000000000;
	job->next = ar->head;
	ar->head = job;
	if (ar->tail == &ar->head)
		ar->tail = &job->next;
	/* Its uid's entry went when the job was taken, if it was the last: no memory, no bound. */
	if (queued_add(ar, job->rec.uid))
		ar->queued++;
	while (!ar->stop && pthread_cond_timedwait(&ar->cond, &ar->lock, &until) != ETIMEDOUT)
		;
}

static void *archiver_main(void *arg)
{
	struct archive *ar = arg;
	struct archive_job *job;
	int err;

	/* Over the bounds since the last start (lowered, or files the index did not count). */
	enforce(ar);
	pthread_mutex_lock(&ar->lock);
	for (;;) {
		while ((!ar->head || ar->paused) && !ar->stop)
			pthread_cond_wait(&ar->cond, &ar->lock);
		if (ar->stop)
			break;
		job = ar->head;
		ar->head = job->next;
		if (!ar->head)
			ar->tail = &ar->head;
		queued_del(ar, job->rec.uid);
		ar->busy = true;
		pthread_mutex_unlock(&ar->lock);

		err = store(ar, job);
		pthread_mutex_lock(&ar->lock);
		if (short_of_resources(err)) {
			ar->busy = false;
			pthread_cond_broadcast(&ar->cond);
			retry_later(ar, job);
			continue;
		}
		job_free(job);
		ar->busy = false;
		pthread_cond_broadcast(&ar->cond);
	}
	pthread_mutex_unlock(&ar->lock);
	return NULL;
}

/*
 * Hand a staged map, and the jitdump staged with it (@dump, or NULL), to the
 * worker; left staged (the next start finishes them) if that fails.
 */
static void enqueue(struct archive *ar, const struct staged_rec *rec, const struct staged_rec *dump,
		    bool recovered)
{
	struct archive_job *job = calloc(1, sizeof(*job));

	if (!job) {
		count(&ar->stats.failed);
		return;
	}
	job->rec = *rec;
	job->recovered = recovered;
	/* Without the memory, the dump stays staged and recorded: the next start archives it. */
	if (dump)
		job->dump = calloc(1, sizeof(*job->dump));
	if (dump && !job->dump)
		count(&ar->stats.failed);
	if (job->dump)
		job->dump->rec = *dump;
	pthread_mutex_lock(&ar->lock);
	if (queued_add(ar, rec->uid)) {
		pthread_mutex_unlock(&ar->lock);
		job_free(job);
		count(&ar->stats.failed);
		return;
	}
	*ar->tail = job;
	ar->tail = &job->next;
	pthread_cond_signal(&ar->cond);
	pthread_mutex_unlock(&ar->lock);
}

/*
 * Is the worker's queue, or @uid's share of it, full? Counted and said
 * once per time. Only the event loop adds: either can but shrink after.
 */
static bool queue_full(struct archive *ar, uid_t uid)
{
	unsigned int max = ar->cfg.max_queue ? ar->cfg.max_queue : ARCHIVE_QUEUE_MAX;
	struct queued_uid *q;
	bool full, share_full, say_share = false;

	pthread_mutex_lock(&ar->lock);
	full = ar->queued >= max;
	if (!full)
		ar->full_said = false;
	q = queued_of(ar, uid);
	share_full = q && q->n >= ARCHIVE_QUEUE_SHARE(max);
	if (share_full && !q->full_said)
		say_share = q->full_said = true;
	pthread_mutex_unlock(&ar->lock);
	if (share_full) {
		count(&ar->stats.deferred_share);
		if (say_share)
			pr_warn("archive: %u maps of uid %u wait for the archiving thread, its share; its further maps stay at their paths and are tried again later (said once until none wait)",
				ARCHIVE_QUEUE_SHARE(max), (unsigned int)uid);
		return true;
	}
	if (full && !ar->full_said) {
		ar->full_said = true;
		pr_warn("archive: %u maps wait for the archiving thread; further maps stay at their paths and are tried again later",
			max);
	}
	return full;
}

void archive__flush(struct archive *ar)
{
	pthread_mutex_lock(&ar->lock);
	while (ar->head || ar->busy)
		pthread_cond_wait(&ar->cond, &ar->lock);
	pthread_mutex_unlock(&ar->lock);
}

void archive__pause(struct archive *ar, bool paused)
{
	pthread_mutex_lock(&ar->lock);
	ar->paused = paused;
	pthread_cond_broadcast(&ar->cond);
	pthread_mutex_unlock(&ar->lock);
}

/* ---- opening ---- */

/* A record whose staged map is gone: the agent died after storing it, before forgetting it. */
static void forget_finished(const struct staged_rec *rec, void *ctx)
{
	struct archive *ar = ctx;
	struct stat st;

	if (fstatat(ar->cfg.map_dir_fd, rec->staged, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		archive_journal__remove(ar->journal_fd, rec->staged);
}

static int open_dirs(struct archive *ar)
{
	int err;

	err = archive_dir__make(ar->cfg.dir);
	if (err)
		return err;
	ar->dir_fd = open(ar->cfg.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ar->dir_fd < 0) {
		pr_err("archive %s: %s", ar->cfg.dir, strerror(errno));
		return -errno;
	}
	ar->journal_fd = archive_journal__open(ar->cfg.dir, ar->cfg.map_dir);
	if (ar->journal_fd < 0) {
		pr_err("archive %s: cannot open the journal of staged maps: %s", ar->cfg.dir,
		       strerror(-ar->journal_fd));
		return ar->journal_fd;
	}
	archive_dir__remove_temporaries(ar->dir_fd);
	archive_journal__for_each(ar->journal_fd, forget_finished, ar);
	/* The one listing of the archive: from now on its index follows every change. */
	ar->quota = archive_quota__new();
	err = ar->quota ? archive_quota__load(ar->quota, ar->dir_fd) : -ENOMEM;
	if (err) {
		pr_err("archive %s: cannot index the archived maps: %s", ar->cfg.dir, strerror(-err));
		return err;
	}
	return 0;
}

struct archive *archive__open(const struct archive_config *cfg)
{
	pthread_condattr_t ca;
	struct archive *ar;
	int err;

	ar = calloc(1, sizeof(*ar));
	if (!ar) {
		errno = ENOMEM;
		return NULL;
	}
	ar->cfg = *cfg;
	if (!ar->cfg.max_table_bytes)
		ar->cfg.max_table_bytes = ARCHIVE_TABLE_MAX_BYTES;
	if (!ar->cfg.max_files_per_uid)
		ar->cfg.max_files_per_uid = ARCHIVE_FILES_PER_UID;
	if (!ar->cfg.max_dump_bytes)
		ar->cfg.max_dump_bytes = ar->cfg.max_map_bytes;
	ar->dir_fd = ar->journal_fd = -1;
	ar->tail = &ar->head;
	pthread_mutex_init(&ar->lock, NULL);
	/* The worker's pauses are timed on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ar->cond, &ca);
	pthread_condattr_destroy(&ca);
	/*
	 * This run's mark in its journal records: at start, the staged maps of
	 * earlier runs are finished, never one this run moved aside meanwhile
	 * (a process found at a dead process's pid has its map moved before
	 * the directory is listed), which is in the worker's hands already.
	 */
	do {
		if (getrandom(&ar->run, sizeof(ar->run), 0) != (ssize_t)sizeof(ar->run)) {
			err = -errno;
			pr_err("archive %s: cannot draw this run's id for the journal: %s", cfg->dir,
			       strerror(errno));
			goto free_ar;
		}
	} while (!ar->run);  /* 0 is an older agent's record */
	err = open_dirs(ar);
	if (err)
		goto free_ar;
	if (pthread_create(&ar->thread, NULL, archiver_main, ar)) {
		pr_err("archive %s: cannot start the archiving thread", cfg->dir);
		err = -EAGAIN;
		goto free_ar;
	}
	ar->started = true;
	return ar;
free_ar:
	archive__free(ar);
	errno = -err;
	return NULL;
}

void archive__set_max_bytes(struct archive *ar, uint64_t max_bytes)
{
	/* The worker reads it in enforce(): atomic, no lock needed for one word. */
	__atomic_store_n(&ar->cfg.max_bytes, max_bytes, __ATOMIC_RELAXED);
}

uint64_t archive__max_bytes(struct archive *ar)
{
	return __atomic_load_n(&ar->cfg.max_bytes, __ATOMIC_RELAXED);
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
		/* The job in hand finishes; queued ones stay staged, recorded, for the next start. */
		pthread_join(ar->thread, NULL);
	}
	for (job = ar->head; job; job = next) {
		next = job->next;
		job_free(job);
	}
	archive_quota__free(ar->quota);
	free(ar->uids);
	if (ar->journal_fd >= 0)
		close(ar->journal_fd);
	if (ar->dir_fd >= 0)
		close(ar->dir_fd);
	pthread_cond_destroy(&ar->cond);
	pthread_mutex_destroy(&ar->lock);
	free(ar);
}

/* ---- moving aside ---- */

/*
 * Rename @name, open as @fd, to a fresh random name, recorded first (unless
 * @drop) so that a crash after the rename leaves a staged map the next start
 * trusts. A file squatting the name (only by chance) costs another name.
 */

/* A trap at @name is said once, wherever the agent meets it (log_first_time()). */
static bool first_refusal(struct archive *ar, const char *name)
{
	struct stat st;

	if (fstatat(ar->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return true;
	return log_first_time(st.st_dev, st.st_ino, name);
}
/*
 * Another uid's map at a new holder's path (archive__move_squatted()): renamed
 * without the lease, whoever holds it open (its writer is not the pid's
 * process, and a rename tears no fd). Its owner may have put another file at
 * the name since @fd was opened: that one is given its name back.
 */
static int move_unguarded(int dirfd, const char *name, int fd, const char *dest,
			  struct perfmap_replace_result *res)
{
	struct stat st, now;

	memset(res, 0, sizeof(*res));
	if (fstat(fd, &st))
		return -errno;
	if (renameat2(dirfd, name, dirfd, dest, RENAME_NOREPLACE)) {
		res->why = "cannot rename it";
		return -errno;
	}
	if (!fstatat(dirfd, dest, &now, AT_SYMLINK_NOFOLLOW) && now.st_dev == st.st_dev &&
	    now.st_ino == st.st_ino)
		return 0;
	res->why = "replaced by another file meanwhile";
	if (renameat2(dirfd, dest, dirfd, name, RENAME_NOREPLACE))
		snprintf(res->kept, sizeof(res->kept), "%s", dest);
	return -ESTALE;
}

static int stage(struct archive *ar, const char *name, int fd, uint64_t size, bool drop,
		 bool guarded, struct staged_rec *rec, struct perfmap_replace_result *res)
{
	int err = -EEXIST, tries;

	for (tries = 0; err == -EEXIST && tries < STAGE_TRIES; tries++) {
		err = archive_journal__new_name(rec->staged, sizeof(rec->staged));
		if (!err && !drop)
			err = archive_journal__add(ar->journal_fd, rec);
		if (err) {
			res->why = "cannot record the move in the archive's journal";
			return err;
		}
		err = guarded ? perfmap__move_aside(ar->cfg.map_dir_fd, name, fd, size, rec->staged, res) :
				move_unguarded(ar->cfg.map_dir_fd, name, fd, rec->staged, res);
		/* Put back but for the name: the file is staged, and its record stays with it. */
		if (err == -EBUSY && res->kept[0])
			return err;
		if (err && !drop)
			archive_journal__remove(ar->journal_fd, rec->staged);
	}
	return err;
}

/*
 * A map `perfmapctl restore` put back from the archive member @from, never
 * written since: that member is still there, the same size (a runtime only
 * appends) and its owner's. Archiving it again would keep the same entries
 * twice and cost its owner's quota twice. The attribute is a user.* one
 * (perfmap_tools.h): its value is read as any name a user chose.
 */
static bool restored_copy(struct archive *ar, int fd, const struct stat *st, char *from,
			  size_t len)
{
	struct stat ast;
	ssize_t n;

	n = fgetxattr(fd, PERFMAP_RESTORED_XATTR, from, len - 1);
	if (n <= 0)
		return false;
	from[n] = '\0';
	/* A name in the archive directory, not a path out of it. */
	if (strlen(from) != (size_t)n || strchr(from, '/') || from[0] == '.')
		return false;
	return !fstatat(ar->dir_fd, from, &ast, AT_SYMLINK_NOFOLLOW) && S_ISREG(ast.st_mode) &&
	       ast.st_size == st->st_size && ast.st_uid == st->st_uid;
}

/* The dump at @name was not taken, for @err (perfmap__open_map_at()'s): counted, said once. */
static void dump_refused(struct archive *ar, const char *name, int err)
{
	if (err == -EFBIG)
		count(&ar->stats.jitdumps_too_large);
	else if (err == -ELOOP || err == -EINVAL || err == -EMLINK || err == -EPERM)
		count(&ar->stats.jitdumps_refused);
	if (err == -EFBIG && first_refusal(ar, name))
		pr_warn("archive %s/%s: larger than %llu bytes; this jitdump is left in place, not archived with its map",
			ar->cfg.map_dir, name, (unsigned long long)ar->cfg.max_dump_bytes);
	else if (err != -EMFILE && err != -ENFILE && err != -ENOMEM && first_refusal(ar, name))
		pr_warn("archive %s/%s: %s%s; this jitdump is left in place, not archived with its map",
			ar->cfg.map_dir, name, perfmap_open_strerror(err),
			err == -EPERM ? " (not the map's owner's)" : "");
}

/*
 * The jitdump @pid's runtime wrote in the map directory, jit-<pid>.dump,
 * with the map @map (as opened) going to the archive as @map_name: moved
 * aside and journaled in @rec as the map was, true. Opened with the map's
 * refusals, and the map's owner's only: anyone can make a file of that name
 * in /tmp. Never under a writer (the lease): a process at the pid again, or
 * a child still writing into its parent's dump, keeps it where it is.
 * @map_name NULL: the map is deleted, not archived (a copy `perfmapctl
 * restore` put back): only a dump restore put back too, unchanged while its
 * archived one is still there, goes (deleted); any other stays.
 */
static bool take_dump(struct archive *ar, pid_t pid, const struct stat *map,
		      const char *map_name, struct staged_rec *rec)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .check_owner = true, .owner = map->st_uid,
		     .max_bytes = ar->cfg.max_dump_bytes);
	struct perfmap_replace_result res = { 0 };
	char name[32], from[128];
	bool restored;
	struct stat st;
	int fd, err;

	jitdump_name(pid, name, sizeof(name));
	fd = perfmap__open_map_at(ar->cfg.map_dir_fd, name, O_RDONLY, &oopts, &st);
	if (fd < 0) {
		if (fd != -ENOENT)
			dump_refused(ar, name, fd);
		return false;
	}
	restored = restored_copy(ar, fd, &st, from, sizeof(from)) && archive_file__is_dump(from);
	if (!restored && (!map_name || perfmap__archived_dump_name(map_name, rec->name, sizeof(rec->name)))) {
		close(fd);
		return false;
	}
	rec->dev = st.st_dev;
	rec->ino = st.st_ino;
	rec->uid = st.st_uid;
	rec->gid = st.st_gid;
	rec->run = ar->run;
	err = stage(ar, name, fd, UINT64_MAX, restored, true, rec, &res);
	close(fd);
	if (err == -EBUSY && res.kept[0]) {
		/* Recorded, as any staged file: the next start archives it. */
		pr_warn("archive %s/%s: %s; the file is at %s/%s, where its writer goes on writing",
			ar->cfg.map_dir, name, res.why, ar->cfg.map_dir, res.kept);
		return false;
	}
	if (err == -EBUSY) {
		count(&ar->stats.jitdumps_busy);
		pr_info("archive %s/%s: open for writing (a process at pid %d again, or a child writing on); this jitdump is left in place",
			ar->cfg.map_dir, name, (int)pid);
		return false;
	}
	if (err) {
		pr_warn("archive %s/%s: %s; this jitdump is left in place", ar->cfg.map_dir, name,
			res.why ? res.why : strerror(-err));
		return false;
	}
	if (restored) {
		unlinkat(ar->cfg.map_dir_fd, rec->staged, 0);
		count(&ar->stats.jitdumps_restored_dropped);
		pr_info("archive %s/%s: removed: perfmapctl restore put it back from %s/%s, which still holds it",
			ar->cfg.map_dir, name, ar->cfg.dir, from);
		return false;
	}
	pr_info("archive %s/%s: moved aside to %s, to go with its map", ar->cfg.map_dir, name,
		rec->staged);
	return true;
}

static int move(struct archive *ar, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		dev_t dev, ino_t ino, uint64_t size, bool squatted, const char *tag)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	struct perfmap_replace_result res = { 0 };
	struct staged_rec rec = { 0 }, drec = { 0 };
	bool over = false, restored, dump;
	char name[32], from[128];
	struct stat st;
	int fd, err;

	map_name(pid, name, sizeof(name));
	fd = perfmap__open_map_at(ar->cfg.map_dir_fd, name, O_RDONLY, &oopts, &st);
	if (fd < 0) {
		/* Out of fds or memory: the caller tries again later, and says so once. */
		if (fd != -ENOENT && fd != -EMFILE && fd != -ENFILE && fd != -ENOMEM &&
		    first_refusal(ar, name))
			pr_warn("archive %s/%s: %s; left in place", ar->cfg.map_dir, name,
				perfmap_open_strerror(fd));
		return fd;
	}
	if (st.st_dev != dev || st.st_ino != ino) {
		err = -ESTALE;
		goto close_fd;
	}
	restored = why != ARCHIVE_DROP && restored_copy(ar, fd, &st, from, sizeof(from));
	if (why != ARCHIVE_DROP && !restored && queue_full(ar, st.st_uid)) {
		if (!squatted) {
			count(&ar->stats.deferred);
			err = -EAGAIN;
			goto close_fd;
		}
		over = true;
	}
	archive_name(pid, start_ticks, why, tag, rec.name, sizeof(rec.name));
	rec.dev = st.st_dev;
	rec.ino = st.st_ino;
	rec.uid = st.st_uid;
	rec.gid = st.st_gid;
	rec.run = ar->run;
	err = stage(ar, name, fd, size, why == ARCHIVE_DROP || restored, !squatted, &rec, &res);
	if (err == -EBUSY && res.kept[0]) {
		/* A writer came while it was moved, and the name could not be given back. */
		pr_warn("archive %s/%s: %s; the file is at %s/%s, where its writer goes on writing",
			ar->cfg.map_dir, name, res.why, ar->cfg.map_dir, res.kept);
		goto close_fd;
	}
	if (err == -ESTALE && res.kept[0]) {
		/* Its owner swapped files under the move, and took the name again. */
		pr_warn("archive %s/%s: %s; that file is at %s/%s", ar->cfg.map_dir, name, res.why,
			ar->cfg.map_dir, res.kept);
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
	if (restored) {
		unlinkat(ar->cfg.map_dir_fd, rec.staged, 0);
		count(&ar->stats.restored_dropped);
		pr_info("archive %s/%s: %s; removed: perfmapctl restore put it back from %s/%s, which still holds it",
			ar->cfg.map_dir, name, archive_reason_str(why), ar->cfg.dir, from);
		/* Its jitdump too, if restore put that back and no one wrote it since. */
		if (why == ARCHIVE_EXIT && !(tag && *tag))
			take_dump(ar, pid, &st, NULL, &drec);
		goto close_fd;
	}
	if (why == ARCHIVE_DROP) {
		unlinkat(ar->cfg.map_dir_fd, rec.staged, 0);
		pr_info("exec %d: removed %s/%s (%s)", (int)pid, ar->cfg.map_dir, name,
			archive_reason_str(why));
		goto close_fd;
	}
	pr_info("archive %s/%s: %s; moved aside to %s", ar->cfg.map_dir, name, archive_reason_str(why),
		rec.staged);
	if (over)
		count(&ar->stats.queued_over_max);
	/*
	 * A process in another pid namespace names its dump by the pid it has
	 * there: jit-<host pid>.dump in the map directory is never its own.
	 */
	dump = why == ARCHIVE_EXIT && !(tag && *tag) && take_dump(ar, pid, &st, rec.name, &drec);
	enqueue(ar, &rec, dump ? &drec : NULL, false);
close_fd:
	close(fd);
	return err;
}

int archive__move(struct archive *ar, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		  dev_t dev, ino_t ino, uint64_t size)
{
	return move(ar, pid, start_ticks, why, dev, ino, size, false, NULL);
}

int archive__move_tagged(struct archive *ar, pid_t pid, uint64_t start_ticks,
			 enum archive_reason why, dev_t dev, ino_t ino, uint64_t size,
			 const char *tag)
{
	return move(ar, pid, start_ticks, why, dev, ino, size, false, tag);
}

int archive__move_squatted(struct archive *ar, pid_t pid, dev_t dev, ino_t ino)
{
	return move(ar, pid, 0, ARCHIVE_STALE, dev, ino, UINT64_MAX, true, NULL);
}

/* Not a staged map of the agent's: logged (once per start: later listings skip such names), counted. */
static void refuse_staged(struct archive *ar, const char *name, const char *why)
{
	/* log_msg() escapes the name: whoever made the file chose it. */
	count(&ar->stats.staged_refused);
	pr_warn("archive %s/%s: named like a staged map, but %s; left alone", ar->cfg.map_dir,
		name, why);
}

void archive__finish_staged(struct archive *ar, const char *name)
{
	struct staged_rec rec;
	struct stat st;

	if (!archive_journal__name_ok(name) || archive_journal__get(ar->journal_fd, name, &rec)) {
		/*
		 * Or this run's, stored and removed since the listing read its
		 * name: the staged map goes before its record, so one without a
		 * record that is still there is not the agent's.
		 */
		if (!fstatat(ar->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW))
			refuse_staged(ar, name, "the agent has no record of making it");
		return;
	}
	/* Moved aside by this run (before the listing): queued already, finished by the worker. */
	if (rec.run == ar->run)
		return;
	if (fstatat(ar->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
	    st.st_dev != rec.dev || st.st_ino != rec.ino || st.st_uid != rec.uid) {
		archive_journal__remove(ar->journal_fd, name);
		refuse_staged(ar, name, "it is not the file the agent moved aside");
		return;
	}
	pr_info("archive %s/%s: moved aside before a restart; finishing", ar->cfg.map_dir, name);
	/* Beyond the queue's bound: these are few, recorded, and hold no fd. */
	enqueue(ar, &rec, NULL, true);
}

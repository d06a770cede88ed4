/*
 * The policy: what each process event means for the maps in the map
 * directory.
 *   fork  a map an earlier holder of the child's pid left there is archived,
 *         then the child gets its parent's entries;
 *   exec  the old image's map is archived (deleted if it was only our copy
 *         of the parent's); a map the new image wrote stays;
 *   exit  the map stays for --retention, then is archived;
 *   scan  a process or a map found without its event is handled alike.
 *
 * Who wrote a map is decided by judge(), on evidence the kernel orders: when
 * the file's inode appeared (the inotify index, against the event's time),
 * whether it is a file seen before and unchanged since, and whether its
 * newest entries name memory the process has mapped. Never on file times,
 * which move in clock ticks. Where the evidence cannot tell, the map stays
 * where it is (nothing is lost), and that is counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "log.h"
#include "perfmap.h"
#include "policy.h"
#include "proctab.h"
#include "retention.h"

#define COPY_RETRY_NS (5ull * 1000000000)   /* for a runtime to finish its line, or fds to be free */
/* A parent's map grows while it is copied: this much more data than estimated is allowed. */
#define COPY_SLACK (1ull << 20)

/*
 * A copy that fails for the system's sake (a full filesystem, no file
 * descriptors left) fails alike for every fork until the cause goes away:
 * it is said once, counted every time, and its end is said.
 */
struct copy_fault {
	int err;          /* 0: the last copy worked */
	const char *why;
	uint64_t quiet;   /* failures alike since the one said */
};

struct policy {
	struct policy_config cfg;
	struct mapstore store;
	struct proctab procs;
	struct retention *retained;
	struct budget *copy_budget;   /* bytes of copies per uid */
	struct budget *loop_budget;   /* bytes of copies per uid made in the event loop */
	uint64_t tickets;             /* of copies sent to the worker */
	struct policy_stats stats;
	struct copy_fault copy_fault;
	uint64_t moves_put_off;  /* exited maps not moved for want of fds since the first said */
	bool put_off_now, moved_now;  /* in this tick */
};

/*
 * Out of file descriptors or memory: a passing state of the agent, not of the
 * map. What failed for it is tried again, never given up for it at once.
 */
static bool short_of_resources(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM;
}

/* An event's time for look(): its latest moment, or 0 (now) when unknown. */
static uint64_t latest(struct span t)
{
	return t.hi == UINT64_MAX ? 0 : t.hi;
}

/* ---- the evidence ---- */

enum verdict {
	EARLIER,     /* the path's earlier holder wrote it: not the new holder's */
	LATER,       /* the new holder's own */
	AMBIGUOUS,   /* cannot tell: it stays, nothing is lost, and it is counted */
};

enum evidence { BY_NOTHING, BY_INDEX, BY_IDENTITY, BY_MAPPINGS };

struct judgement {
	enum verdict verdict;
	enum evidence by;
	const char *why;
};

/* A file the policy saw at @seen_ns, when only the path's earlier holder had written it. */
struct known_file {
	dev_t dev;
	ino_t ino;
	uint64_t size;
	uint64_t seen_ns;
};

/* Whose memory the process's mappings are. */
enum mappings_of {
	MAPPINGS_OWN,        /* a new image's: an address space of its own */
	MAPPINGS_INHERITED,  /* a forked child's: its parent's, as any sibling's were */
};

static bool same_file(const struct map_info *mi, dev_t dev, ino_t ino)
{
	return mi->dev == dev && mi->ino == ino;
}

/*
 * Who wrote @mi, the map at @pid's path, whose holder changed at @change: an
 * exec, or a new process at the pid. (@pid, @start_ticks) is the holder now.
 */
static void judge(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *mi,
		  struct span change, const struct known_file *known, enum mappings_of mappings,
		  struct judgement *j)
{
	enum map_entries e;
	bool before;

	/* Seen before the change, the earlier holder's alone: what changed since is the new one's. */
	if (known && same_file(mi, known->dev, known->ino) && known->seen_ns < change.lo) {
		j->by = BY_IDENTITY;
		if (mi->size == known->size) {
			j->verdict = EARLIER;
			j->why = "the same file, unchanged since its earlier holder ended";
		} else if (mi->size < known->size) {
			j->verdict = LATER;
			j->why = "the same file, rewritten since its earlier holder ended";
		} else {
			j->verdict = AMBIGUOUS;
			j->why = "the earlier holder's file, appended to since: by the new holder?";
		}
		return;
	}
	if (span_before(change, mi->born)) {
		*j = (struct judgement){ LATER, BY_INDEX, "made after it" };
		return;
	}
	/*
	 * Made before (or the index cannot say): the entries tell. The new
	 * holder names code it has mapped; an earlier holder's addresses lie
	 * in an address space that is gone.
	 */
	before = span_before(mi->born, change);
	e = p->store.ops->entries(p->store.ctx, pid, start_ticks, change.hi, mi);
	switch (e) {
	case ENTRIES_MAPPED:
		if (before)
			*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
				"made before it, but its newest entries name the process's memory: appended to since?" };
		else if (mappings == MAPPINGS_INHERITED)
			*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
				"its newest entries name the memory the process shares with its parent, as a sibling's would" };
		else
			*j = (struct judgement){ LATER, BY_MAPPINGS,
				"its newest entries name the process's memory" };
		return;
	case ENTRIES_MIXED:
		*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
			"some of its newest entries name the process's memory, some do not: written by both?" };
		return;
	case ENTRIES_UNMAPPED:
		if (before)
			*j = (struct judgement){ EARLIER, BY_INDEX, "made before it" };
		else
			*j = (struct judgement){ EARLIER, BY_MAPPINGS,
				"none of its newest entries names the process's memory" };
		return;
	case ENTRIES_NONE:
		if (before)
			*j = (struct judgement){ EARLIER, BY_INDEX, "made before it (empty)" };
		else
			*j = (struct judgement){ AMBIGUOUS, BY_NOTHING,
				"empty, and the index cannot say when it was made" };
		return;
	case ENTRIES_UNKNOWN:
		break;
	}
	*j = (struct judgement){ AMBIGUOUS, BY_NOTHING, before ?
		"made before it, but the file or the process cannot be read to tell whether it was appended to since" :
		"the index cannot say when it was made, and the file or the process cannot be read" };
}

static void count_judgement(struct policy *p, const struct judgement *j)
{
	switch (j->by) {
	case BY_INDEX: p->stats.by_index++; break;
	case BY_IDENTITY: p->stats.by_identity++; break;
	case BY_MAPPINGS: p->stats.by_mappings++; break;
	case BY_NOTHING: break;
	}
	if (j->verdict == AMBIGUOUS)
		p->stats.ambiguous_kept++;
}

/* ---- the store, with the dry run and the size bound in front ---- */

static int look(struct policy *p, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	return p->store.ops->look(p->store.ctx, pid, at_ns, mi);
}

static bool too_large(struct policy *p, const char *what, pid_t pid, const struct map_info *mi)
{
	if (!p->cfg.max_map_bytes || mi->size <= p->cfg.max_map_bytes)
		return false;
	p->stats.too_large++;
	pr_warn("%s %d: %s/perf-%d.map is %llu bytes, over --max-map-bytes %llu; left as it is",
		what, (int)pid, p->cfg.map_dir, (int)pid, (unsigned long long)mi->size,
		(unsigned long long)p->cfg.max_map_bytes);
	return true;
}

static void count_archived(struct policy *p, enum archive_reason why)
{
	switch (why) {
	case ARCHIVE_EXEC: p->stats.exec_archived++; break;
	case ARCHIVE_DROP: p->stats.exec_dropped++; break;
	case ARCHIVE_STALE: p->stats.stale_archived++; break;
	case ARCHIVE_EXIT: break;  /* the archive counts what it stores */
	}
}

/*
 * Move @mi out of @pid's path; 0, -EBUSY (open for writing), -EAGAIN (the
 * archive's queue is full: left in place, counted there), -ESTALE (another
 * file now) or -errno. -EBUSY and -EAGAIN both mean: not now, try again.
 */
static int move_away(struct policy *p, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		     const struct map_info *mi, unsigned int flags)
{
	int err;

	if (too_large(p, "archive", pid, mi))
		return -EFBIG;
	if (p->cfg.dry_run) {
		pr_info("dry-run: would move %s/perf-%d.map out of the way (%s)", p->cfg.map_dir,
			(int)pid, archive_reason_str(why));
		return 0;
	}
	err = p->store.ops->archive(p->store.ctx, pid, start_ticks, why, mi, flags);
	if (!err)
		count_archived(p, why);
	else if (err == -EBUSY)
		p->stats.busy_deferred++;
	return err;
}

/* ---- the process table ---- */

static void settle_copy(struct policy *p, struct proc *pr, const char *what, uint64_t now_ns);

static struct proc *track(struct policy *p, const struct policy_event *ev)
{
	struct proc *pr;
	bool fresh;

	pr = proctab_get(&p->procs, ev->pid, ev->start_ticks, &fresh);
	if (!pr) {
		p->stats.errors++;
		return NULL;
	}
	/* A start time to the nanosecond (BPF) beats a whole tick (/proc). */
	if (fresh || ev->start.lo == ev->start.hi)
		pr->start = ev->start;
	if (fresh)
		pr->image = pr->start;
	if (ev->ppid)
		pr->ppid = ev->ppid;
	pr->uid = ev->uid;
	pr->gid = ev->gid;
	memcpy(pr->comm, ev->comm, sizeof(pr->comm));
	pr->comm[sizeof(pr->comm) - 1] = '\0';
	if (ev->flags & POLICY_EVF_FOREIGN)
		pr->flags |= PROC_FOREIGN_NS;
	return pr;
}

static bool copied_here(const struct proc *pr, const struct map_info *mi)
{
	return (pr->flags & PROC_COPIED) && same_file(mi, pr->copy_dev, pr->copy_ino);
}

static void own_map(struct proc *pr, const struct map_info *mi)
{
	pr->own_dev = mi->dev;
	pr->own_ino = mi->ino;
}

static bool is_own(const struct proc *pr, const struct map_info *mi)
{
	return pr->own_ino && same_file(mi, pr->own_dev, pr->own_ino);
}

/* ---- exit ---- */

/* Keep @mi, the map of the ended process (@pid, @start_ticks), for the retention. */
static int retain(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *mi,
		  bool orphan, uint64_t now_ns)
{
	const struct retained r = {
		.pid = pid, .start_ticks = start_ticks, .kind = RETAIN_EXITED,
		.orphan = orphan, .uid = mi->uid,
		.reason = ARCHIVE_EXIT, .dev = mi->dev, .ino = mi->ino, .size = mi->size,
		.seen_ns = mi->seen_ns, .deadline_ns = now_ns + p->cfg.retention_ns,
	};

	if (retention__add(p->retained, &r)) {
		p->stats.errors++;
		return -ENOMEM;
	}
	p->stats.retained_total++;
	return 0;
}

/*
 * The process (@pid, @start_ticks) ended at @at. Its map stays for the
 * retention, unless it was made after the end by someone else, or a later
 * process holds the pid by now (its map is that one's).
 */
static void end_process(struct policy *p, pid_t pid, uint64_t start_ticks, struct span at,
			bool foreign, const char *comm, uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, pid);
	struct map_info mi;

	if (pr && pr->start_ticks > start_ticks) {
		pr_debug("exit %d: a later process holds the pid; its map is not this one's",
			 (int)pid);
		return;
	}
	/* Its copy in the worker is made or stopped: the map at its path is what it is. */
	if (pr)
		settle_copy(p, pr, "exited", now_ns);
	/* The table held an earlier process here, whose exit was lost. */
	if (pr && pr->start_ticks != start_ticks) {
		proctab_remove(&p->procs, pid);
		pr = NULL;
	}
	if (foreign || (pr && (pr->flags & PROC_FOREIGN_NS)))
		goto forget;
	if (look(p, pid, latest(at), &mi))
		goto forget;
	if (span_before(at, mi.born) && !(pr && copied_here(pr, &mi))) {
		pr_debug("exit %d: %s/perf-%d.map was made after the exit: not its map",
			 (int)pid, p->cfg.map_dir, (int)pid);
		goto forget;
	}
	if (retain(p, pid, start_ticks, &mi, false, now_ns))
		goto forget;
	pr_info("exit %d (%s): %s/perf-%d.map stays for %llus, then goes to %s", (int)pid,
		pr ? pr->comm : comm, p->cfg.map_dir, (int)pid,
		(unsigned long long)(p->cfg.retention_ns / 1000000000), p->cfg.archive_dir);
forget:
	if (pr)
		proctab_remove(&p->procs, pid);
}

/* ---- a new holder of a pid ---- */

/*
 * @pr is a process new at its pid. A map an earlier holder left at the path
 * goes to the archive before @pr's runtime appends to it; a map @pr made
 * itself stays.
 */
static void claim_path(struct policy *p, struct proc *pr, const char *what,
		       enum mappings_of mappings)
{
	struct retained *r = retention__find(p->retained, pr->tgid);
	struct known_file known, *kp = NULL;
	struct judgement j;
	struct map_info mi;
	uint64_t start_ticks = 0;
	int err;

	if (r) {
		/* The earlier holder's file as it was when it ended. */
		if (r->kind == RETAIN_EXITED) {
			known = (struct known_file){ r->dev, r->ino, r->size, r->seen_ns };
			kp = &known;
		}
		start_ticks = r->start_ticks;
		/* The entry must not outlive its pid, whatever became of its file. */
		retention__forget(p->retained, pr->tgid);
	}
	if (look(p, pr->tgid, pr->start.lo, &mi) || is_own(pr, &mi))
		return;
	/*
	 * Read after the process exec'd: its exec events, queued behind this
	 * one, judge the map against the image that was there to write it.
	 */
	if (!kp && p->store.ops->execd_since(p->store.ctx, pr->tgid, pr->start.lo)) {
		pr_debug("%s %d (%s): exec'd since; its exec decides about %s/perf-%d.map",
			 what, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid);
		return;
	}
	judge(p, pr->tgid, pr->start_ticks, &mi, pr->start, kp, mappings, &j);
	count_judgement(p, &j);
	if (j.verdict != EARLIER) {
		own_map(pr, &mi);
		pr_info("%s %d (%s): %s/perf-%d.map %s: %s%s", what, (int)pr->tgid, pr->comm,
			p->cfg.map_dir, (int)pr->tgid,
			j.verdict == AMBIGUOUS ? "kept" : "is this process's own", j.why,
			j.verdict == AMBIGUOUS ? "; which process wrote it is not clear" : "; kept");
		return;
	}
	pr_info("%s %d (%s): %s/perf-%d.map is not this process's: %s", what, (int)pr->tgid,
		pr->comm, p->cfg.map_dir, (int)pr->tgid, j.why);
	err = move_away(p, pr->tgid, start_ticks, ARCHIVE_STALE, &mi, ARCHIVE_F_AS_JUDGED);
	if (err == -EBUSY || err == -EAGAIN) {
		/*
		 * Its earlier holder is gone: a writer is the new one, taking it.
		 * With the archive's queue full, the new holder's runtime may
		 * append before a retry: kept for it, nothing lost.
		 */
		p->stats.ambiguous_kept++;
		own_map(pr, &mi);
		pr_info("%s %d (%s): %s/perf-%d.map %s: kept for it", what, (int)pr->tgid, pr->comm,
			p->cfg.map_dir, (int)pr->tgid, err == -EBUSY ? "is open for writing" :
			"cannot be archived now (the archive's queue is full)");
	}
}

/*
 * The table holds an earlier process at @ev's pid, whose exit was lost. The
 * map at the path is now the new holder's to claim, or its exec's to judge:
 * what was there at the unseen exit is not known, so nothing is retained.
 */
static void forget_earlier(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, ev->pid);

	if (!pr || pr->start_ticks == ev->start_ticks)
		return;
	settle_copy(p, pr, "exited", now_ns);
	pr_debug("%d (%s): its exit was not seen; %d (%s) holds the pid now", (int)pr->tgid,
		 pr->comm, (int)ev->pid, ev->comm);
	proctab_remove(&p->procs, ev->pid);
}

/* A process the table did not have at @ev's pid; NULL for another namespace's. */
static struct proc *new_holder(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	struct proc *pr;

	forget_earlier(p, ev, now_ns);
	pr = track(p, ev);
	if (pr && (pr->flags & PROC_FOREIGN_NS)) {
		p->stats.foreign_ns++;
		pr_debug("%d (%s): another mount or pid namespace; left alone", (int)ev->pid, pr->comm);
		return NULL;
	}
	return pr;
}

/* ---- fork: the parent's entries for the child ---- */

/*
 * From the fork to the link, by BPF's clock and the index's: the agent's
 * part of a child's wait for its map. -1 when a time is not exact.
 */
static double ms_after_fork(const struct proc *pr, const struct copy_result *res)
{
	if (pr->start.lo != pr->start.hi || res->map.born.hi == UINT64_MAX ||
	    res->map.born.hi < pr->start.lo)
		return -1;
	return (res->map.born.hi - pr->start.lo) / 1e6;
}

static void log_copy(struct policy *p, const struct proc *pr, const struct copy_result *res)
{
	double ms = res->took_ns / 1e6, after = ms_after_fork(pr, res);

	switch (res->kind) {
	case COPY_CREATED:
		p->stats.copies_created++;
		/* Settled before the worker counted its lines: the bytes say as much. */
		if (res->entries < 0)
			pr_info("copy %d -> %d (%s): %s/perf-%d.map created with %llu bytes of entries (%.2f ms; %.2f ms after the fork)",
				(int)pr->ppid, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
				(unsigned long long)res->bytes, ms, after);
		else
			pr_info("copy %d -> %d (%s): %s/perf-%d.map created with %ld entries (%.2f ms; %.2f ms after the fork)",
				(int)pr->ppid, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
				res->entries, ms, after);
		break;
	case COPY_APPENDED:
		p->stats.copies_appended++;
		pr_info("copy %d -> %d (%s): %ld entries appended to the child's own %s/perf-%d.map (%.2f ms)",
			(int)pr->ppid, (int)pr->tgid, pr->comm, res->entries, p->cfg.map_dir,
			(int)pr->tgid, ms);
		break;
	case COPY_BY_RUNTIME:
		p->stats.copies_by_runtime++;
		pr_info("copy %d -> %d (%s): the runtime copied the parent's entries itself; nothing added",
			(int)pr->ppid, (int)pr->tgid, pr->comm);
		break;
	}
}

static bool execd(struct policy *p, const struct proc *pr)
{
	if (!p->store.ops->execd_since(p->store.ctx, pr->tgid, pr->start.lo))
		return false;
	p->stats.copies_skipped_exec++;
	pr_debug("copy %d -> %d (%s): the child exec'd already; its new image has none of the parent's code",
		 (int)pr->ppid, (int)pr->tgid, pr->comm);
	return true;
}

/* Is @pm, the map at the parent's path, the parent's own? Judged once per file. */
static bool parents_own(struct policy *p, struct proc *parent, const struct map_info *pm)
{
	struct retained *r = parent ? retention__find(p->retained, parent->tgid) : NULL;
	struct judgement j;

	/* Judged the old image's at an exec, and waiting to move: not the running image's. */
	if (r && r->kind == RETAIN_MOVE && same_file(pm, r->dev, r->ino))
		return false;
	if (!parent || is_own(parent, pm))
		return true;
	/* Against the image running now: a map from before its exec is an old image's. */
	judge(p, parent->tgid, parent->start_ticks, pm, parent->image, NULL, MAPPINGS_OWN, &j);
	if (j.verdict == EARLIER) {
		pr_info("copy %d: %s/perf-%d.map is not the parent's (%s); not copied", (int)parent->tgid,
			p->cfg.map_dir, (int)parent->tgid, j.why);
		return false;
	}
	own_map(parent, pm);
	return true;
}

/*
 * What a copy of @pm costs: the bytes the parent really wrote. A sparse
 * file's holes are neither read nor written (mapfile.c), so its blocks on
 * disk count, not its apparent size.
 */
static uint64_t copy_cost(const struct map_info *pm)
{
	return pm->disk_bytes && pm->disk_bytes < pm->size ? pm->disk_bytes : pm->size;
}

static int copy_from_parent(struct policy *p, struct proc *pr, struct span pstart, struct span at,
			    enum copy_op op, uint64_t now_ns);

/* Is there a worker to make large copies? */
static bool can_defer(const struct policy *p)
{
	return p->cfg.defer_copy_bytes && p->store.ops->copy_defer;
}

static bool same_fault(const struct copy_fault *f, int err, const char *why)
{
	return f->err == err && (f->why == why || (f->why && why && !strcmp(f->why, why)));
}

/* A refusal names a trap at one path: said each time. Any other cause, once. */
static void say_copy_fault(struct policy *p, const struct proc *pr, const struct copy_result *res,
			   int err)
{
	struct copy_fault *f = &p->copy_fault;

	if (!res->refused && same_fault(f, err, res->why)) {
		f->quiet++;
		p->stats.copies_failed_quiet++;
		return;
	}
	pr_err("copy %d -> %d: %s/perf-%d.map %s%s%s%s", (int)pr->ppid, (int)pr->tgid,
	       p->cfg.map_dir, (int)pr->tgid, res->why ? res->why : "",
	       res->refused ? "" : ": ", res->refused ? "" : strerror(-err),
	       res->refused ? "" : "; more copies failing alike are counted, not said, until one works");
	if (!res->refused)
		*f = (struct copy_fault){ .err = err, .why = res->why };
}

static void copy_failed(struct policy *p, const struct proc *pr, const struct copy_result *res,
			int err)
{
	p->stats.copies_failed++;
	say_copy_fault(p, pr, res, err);
}

static void copy_worked(struct policy *p, const struct proc *pr)
{
	struct copy_fault *f = &p->copy_fault;

	if (!f->err)
		return;
	pr_info("copy %d -> %d: copies work again; %llu more had failed (%s%s%s) since the one said",
		(int)pr->ppid, (int)pr->tgid, (unsigned long long)f->quiet, f->why ? f->why : "",
		f->why ? ": " : "", strerror(-f->err));
	*f = (struct copy_fault){ 0 };
}

/*
 * A copy's outcome, made here or in the worker: 0 done, -EAGAIN to try
 * again later, -EINPROGRESS when the worker took what follows (an append).
 * @settling: the child is exec'ing or ending, and nothing follows.
 */
static int copy_finished(struct policy *p, struct proc *pr, enum copy_op op, int err,
			 const struct copy_result *res, uint64_t charged, bool settling,
			 uint64_t now_ns)
{
	budget__settle(p->copy_budget, pr->uid, charged, res->bytes);
	p->stats.copy_bytes += res->bytes;
	/* The child has a map: its runtime's, unless an exec made it a new image's. */
	if (err == -EEXIST && op == COPY_OP_CREATE && !settling)
		return copy_from_parent(p, pr, pr->retry_pstart, SPAN_UNKNOWN, COPY_OP_APPEND, now_ns);
	/* The worker saw the child exec before its copy showed: nothing to name. */
	if (err == -ECANCELED) {
		p->stats.copies_skipped_exec++;
		pr_debug("copy %d -> %d (%s): the child exec'd while its copy was made; not shown",
			 (int)pr->ppid, (int)pr->tgid, pr->comm);
		return 0;
	}
	/* A map that grew past its estimate is weighed again, as one being written. */
	if (err == -EAGAIN || err == -EFBIG)
		return settling ? 0 : -EAGAIN;
	if (err == -ESRCH) {
		pr_debug("copy %d -> %d: another process holds pid %d by now; not copied",
			 (int)pr->ppid, (int)pr->tgid, (int)pr->tgid);
		return 0;
	}
	if (err == -EEXIST && settling)
		return 0;
	if (short_of_resources(err) && !settling) {
		/* Tried again at the next ticks: said once, counted when given up. */
		p->stats.resource_deferred++;
		say_copy_fault(p, pr, res, err);
		return err;
	}
	if (err) {
		copy_failed(p, pr, res, err);
		return 0;
	}
	copy_worked(p, pr);
	/* Only a map that is nothing but the copy may later be deleted as such. */
	if (res->kind == COPY_CREATED) {
		pr->flags |= PROC_COPIED;
		pr->copy_dev = res->map.dev;
		pr->copy_ino = res->map.ino;
		pr->copy_size = res->map.size;
	}
	if (res->kind != COPY_BY_RUNTIME)
		own_map(pr, &res->map);
	log_copy(p, pr, res);
	return 0;
}

/* A uid's refusals are said at most this often; all are counted. */
#define OVER_BUDGET_QUIET_NS 1000000000ull

/* The uid's copy budget is spent: the copy is refused, said (once a second per uid), and counted. */
static void over_budget(struct policy *p, const struct proc *pr, uint64_t cost, const char *what,
			uint64_t now_ns)
{
	p->stats.copies_over_budget++;
	if (budget__quiet(p->copy_budget, pr->uid, now_ns, OVER_BUDGET_QUIET_NS)) {
		pr_debug("copy %d -> %d: uid %u over its copy budget (%s); not copied",
			 (int)pr->ppid, (int)pr->tgid, (unsigned)pr->uid, what);
		return;
	}
	pr_warn("copy %d -> %d: uid %u over its copy budget (%s: %llu bytes of data to copy, %llu left of %llu a second, %llu at most); not copied, and its other refusals this second only counted",
		(int)pr->ppid, (int)pr->tgid, (unsigned)pr->uid, what, (unsigned long long)cost,
		(unsigned long long)budget__left(p->copy_budget, pr->uid, now_ns),
		(unsigned long long)p->cfg.copy_rate, (unsigned long long)p->cfg.copy_burst);
}

/* Large copies, and a uid's copies past its share of the loop's time, go to the worker. */
static bool goes_to_worker(struct policy *p, const struct proc *pr, uint64_t cost, uint64_t now_ns)
{
	if (!can_defer(p))
		return false;
	return cost > p->cfg.defer_copy_bytes || !budget__take(p->loop_budget, pr->uid, cost, now_ns);
}

/* Send the copy, charged @cost, to the worker: -EINPROGRESS, or 0 when its queue is full. */
static int defer_copy(struct policy *p, struct proc *pr, struct copy_req *rq, enum copy_op op,
		      uint64_t cost, uint64_t now_ns)
{
	/* Bounded by the apparent size: blocks on disk undercount a compressed file's data. */
	rq->max_data = rq->parent_map->size + COPY_SLACK;
	if (p->store.ops->copy_defer(p->store.ctx, rq, op, ++p->tickets)) {
		budget__settle(p->copy_budget, pr->uid, cost, 0);
		over_budget(p, pr, cost, "as many of its copies queued as it may have", now_ns);
		return 0;
	}
	p->stats.copies_deferred++;
	pr->copy_ticket = p->tickets;
	pr->copy_charged = cost;
	pr->copy_op = op;
	pr_debug("copy %d -> %d (%s): %llu bytes of data; made off the event loop",
		 (int)pr->ppid, (int)pr->tgid, pr->comm, (unsigned long long)cost);
	return -EINPROGRESS;
}

/*
 * Spend @pr's uid's budget on the copy, and make it: here, or in the worker
 * (-EINPROGRESS). Here, it may hold only what the loop's share allows: a
 * file whose blocks said less than its data (compressed) goes to the worker.
 */
static int start_copy(struct policy *p, struct proc *pr, struct copy_req *rq, enum copy_op op,
		      uint64_t now_ns)
{
	uint64_t cost = copy_cost(rq->parent_map);
	struct copy_result res = { 0 };
	int err;

	if (!budget__take(p->copy_budget, pr->uid, cost, now_ns)) {
		over_budget(p, pr, cost, "budget spent", now_ns);
		return 0;
	}
	if (goes_to_worker(p, pr, cost, now_ns))
		return defer_copy(p, pr, rq, op, cost, now_ns);
	rq->max_data = (can_defer(p) ? cost : rq->parent_map->size) + COPY_SLACK;
	err = op == COPY_OP_CREATE ? p->store.ops->copy_create(p->store.ctx, rq, &res) :
				     p->store.ops->copy_append(p->store.ctx, rq, &res);
	if (err != -EFBIG || !can_defer(p))
		return copy_finished(p, pr, op, err, &res, cost, false, now_ns);
	/* More data than its blocks: charged again at its apparent size, for the worker. */
	budget__settle(p->copy_budget, pr->uid, cost, res.bytes);
	p->stats.copy_bytes += res.bytes;
	cost = rq->parent_map->size;
	if (!budget__take(p->copy_budget, pr->uid, cost, now_ns)) {
		over_budget(p, pr, cost, "budget spent", now_ns);
		return 0;
	}
	return defer_copy(p, pr, rq, op, cost, now_ns);
}

/*
 * Give @pr its parent's entries; 0 done, -EAGAIN to try again later,
 * -EINPROGRESS when the worker makes the copy.
 */
static int copy_from_parent(struct policy *p, struct proc *pr, struct span pstart, struct span at,
			    enum copy_op op, uint64_t now_ns)
{
	struct proc *parent = proctab_find(&p->procs, pr->ppid);
	struct copy_req rq = { .parent = pr->ppid, .child = pr->tgid,
			       .child_start_ticks = pr->start_ticks, .child_start_ns = pr->start.lo,
			       .uid = pr->uid, .gid = pr->gid };
	struct map_info pm;

	if (parent && parent->start.hi < pstart.lo)
		parent = NULL;  /* the table holds a later process at the parent's pid */
	if (look(p, pr->ppid, latest(at), &pm))
		return 0;
	if (execd(p, pr) || too_large(p, "copy", pr->ppid, &pm) || !parents_own(p, parent, &pm))
		return 0;
	if (p->cfg.dry_run) {
		pr_info("dry-run: would copy %s/perf-%d.map to %s/perf-%d.map", p->cfg.map_dir,
			(int)pr->ppid, p->cfg.map_dir, (int)pr->tgid);
		return 0;
	}
	rq.parent_map = &pm;
	return start_copy(p, pr, &rq, op, now_ns);
}

/* Worth another try: a runtime's unfinished line, or the agent short of fds or memory. */
static bool copy_again(int err)
{
	return err == -EAGAIN || short_of_resources(err);
}

/* After a try at @pr's copy that returned @ret: wait for a runtime's line or for fds, or give up. */
static void after_copy(struct policy *p, struct proc *pr, int ret, uint64_t now_ns)
{
	if (ret == -EINPROGRESS)
		return;  /* the worker's result decides */
	if (!copy_again(ret)) {
		pr->retry_until_ns = 0;
	} else if (!pr->retry_until_ns) {
		pr->retry_until_ns = now_ns + COPY_RETRY_NS;
	} else if (now_ns >= pr->retry_until_ns) {
		pr->retry_until_ns = 0;
		p->stats.copies_failed++;
		if (ret == -EAGAIN)
			pr_err("copy %d -> %d: %s/perf-%d.map still ends in an unfinished line; parent's entries not added",
			       (int)pr->ppid, (int)pr->tgid, p->cfg.map_dir, (int)pr->tgid);
		else
			pr_err("copy %d -> %d: %s/perf-%d.map not made: %s for %llu s; given up",
			       (int)pr->ppid, (int)pr->tgid, p->cfg.map_dir, (int)pr->tgid,
			       strerror(-ret), (unsigned long long)(COPY_RETRY_NS / 1000000000));
	}
}

/*
 * @pr execs or ends (@what): a copy of its in the worker is stopped, or, if
 * it shows at the path already, taken as made, before the event is weighed.
 * The event then sees the path as it would had the copy been made here.
 */
static void settle_copy(struct policy *p, struct proc *pr, const char *what, uint64_t now_ns)
{
	struct copy_result res = { 0 };
	int err;

	if (!pr->copy_ticket)
		return;
	err = p->store.ops->copy_settle(p->store.ctx, pr->tgid, pr->copy_ticket, &res);
	pr->copy_ticket = 0;
	pr->retry_until_ns = 0;
	if (err == -ECANCELED) {
		budget__settle(p->copy_budget, pr->uid, pr->copy_charged, 0);
		if (!strcmp(what, "exec'd"))
			p->stats.copies_skipped_exec++;
		pr_debug("copy %d -> %d (%s): the child %s before its copy was made; stopped",
			 (int)pr->ppid, (int)pr->tgid, pr->comm, what);
		return;
	}
	if (err == -EINPROGRESS) {
		pr_debug("copy %d -> %d (%s): the child %s while the parent's entries were being appended to its map",
			 (int)pr->ppid, (int)pr->tgid, pr->comm, what);
		return;
	}
	copy_finished(p, pr, (enum copy_op)pr->copy_op, err, &res, pr->copy_charged, true, now_ns);
}

static void on_fork(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	struct proc *pr = new_holder(p, ev, now_ns);

	if (!pr)
		return;
	claim_path(p, pr, "fork", MAPPINGS_INHERITED);
	/* A vfork child shares the parent's memory only until it execs. */
	if (ev->flags & POLICY_EVF_VFORK)
		return;
	pr->retry_pstart = ev->pstart;
	after_copy(p, pr, copy_from_parent(p, pr, ev->pstart, ev->at, COPY_OP_CREATE, now_ns),
		   now_ns);
}

/* A process a /proc scan found: as a fork, but it gets a copy only if it still runs its parent's image. */
static void on_found(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	struct proc *pr = new_holder(p, ev, now_ns), *parent;
	bool same_image;
	struct map_info mi;

	if (!pr)
		return;
	parent = proctab_find(&p->procs, pr->ppid);
	if (parent && (parent->flags & PROC_FOREIGN_NS))
		parent = NULL;
	same_image = parent && p->store.ops->same_image(p->store.ctx, pr->tgid, pr->ppid);
	claim_path(p, pr, "scan", same_image ? MAPPINGS_INHERITED : MAPPINGS_OWN);
	if (!same_image || !look(p, pr->tgid, 0, &mi) || look(p, pr->ppid, 0, &mi))
		return;
	pr_info("scan: %d (%s) forked from %d unseen; copying", (int)pr->tgid, pr->comm,
		(int)pr->ppid);
	pr->retry_pstart = parent->start;
	after_copy(p, pr, copy_from_parent(p, pr, parent->start, SPAN_UNKNOWN, COPY_OP_CREATE, now_ns),
		   now_ns);
}

void policy__copy_done(struct policy *p, pid_t child, uint64_t ticket, int err,
		       const struct copy_result *res, uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, child);

	/* Settled already: the child exec'd or ended while its map was appended to. */
	if (!pr || pr->copy_ticket != ticket) {
		p->stats.copy_bytes += res->bytes;
		pr_debug("copy -> %d: done after the child exec'd or ended (%s)", (int)child,
			 err ? strerror(-err) : "appended");
		return;
	}
	pr->copy_ticket = 0;
	after_copy(p, pr, copy_finished(p, pr, (enum copy_op)pr->copy_op, err, res,
					pr->copy_charged, false, now_ns), now_ns);
}

/* ---- exec ---- */

static void on_exec(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	enum archive_reason why = ARCHIVE_EXEC;
	struct proc *pr = proctab_find(&p->procs, ev->pid);
	struct judgement j;
	struct map_info mi;
	int err;

	/*
	 * A process new to the table (its fork was lost): the pid's earlier
	 * holder is gone, and with it any wait of its map; this exec judges it.
	 */
	if (!pr || pr->start_ticks != ev->start_ticks) {
		forget_earlier(p, ev, now_ns);
		retention__forget(p->retained, ev->pid);
	} else {
		settle_copy(p, pr, "exec'd", now_ns);
	}
	pr = track(p, ev);
	if (!pr)
		return;
	pr->retry_until_ns = 0;
	/* A new image owns no map yet. */
	pr->own_ino = 0;
	pr->image = ev->at;
	if (pr->flags & PROC_FOREIGN_NS)
		goto forget_copy;
	if (look(p, pr->tgid, latest(ev->at), &mi))
		goto forget_copy;
	if (copied_here(pr, &mi) && mi.size == pr->copy_size) {
		/* Only the parent's entries, as perfmapd wrote them: none is the new image's. */
		j = (struct judgement){ EARLIER, BY_IDENTITY, "only perfmapd's copy, unchanged" };
		why = ARCHIVE_DROP;
	} else if (copied_here(pr, &mi) && span_before(ev->at, mi.born)) {
		/* A copy made late, after the exec: only the new image can have written to it. */
		j = (struct judgement){ AMBIGUOUS, BY_INDEX,
			"perfmapd's copy, made after the exec and written since by the new image" };
	} else {
		judge(p, pr->tgid, pr->start_ticks, &mi, ev->at, NULL, MAPPINGS_OWN, &j);
	}
	count_judgement(p, &j);
	switch (j.verdict) {
	case LATER:
		p->stats.exec_kept++;
		own_map(pr, &mi);
		pr_info("exec %d (%s): %s/perf-%d.map is the new image's: %s; kept", (int)pr->tgid,
			pr->comm, p->cfg.map_dir, (int)pr->tgid, j.why);
		goto forget_copy;
	case AMBIGUOUS:
		own_map(pr, &mi);
		pr_info("exec %d (%s): %s/perf-%d.map kept: %s; which image wrote it is not clear",
			(int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid, j.why);
		goto forget_copy;
	case EARLIER:
		break;
	}
	pr_info("exec %d (%s): %s/perf-%d.map is the old image's: %s", (int)pr->tgid, pr->comm,
		p->cfg.map_dir, (int)pr->tgid, j.why);
	err = move_away(p, pr->tgid, pr->start_ticks, why, &mi, ARCHIVE_F_FRESH | ARCHIVE_F_AS_JUDGED);
	/*
	 * Still open for writing: the exec's own close of the old image's fd
	 * may not be done; or the archive's queue is full. Try again shortly,
	 * on the same evidence (on_due).
	 */
	if (err == -EBUSY || err == -EAGAIN) {
		struct retained r = { .pid = pr->tgid, .start_ticks = pr->start_ticks,
				      .reason = why, .dev = mi.dev, .ino = mi.ino, .size = mi.size,
				      .seen_ns = mi.seen_ns };

		if (retention__add_move(p->retained, &r, now_ns))
			p->stats.errors++;
	}
forget_copy:
	pr->flags &= ~PROC_COPIED;
}

/* ---- maps found in the directory ---- */

/*
 * A map at a path no process holds is left in place, not retained, when it
 * is a trap (it could never be moved: the hardened open refuses it), and
 * when its owner has ORPHANS_PER_UID waiting already. No live process needs
 * such a map (its writer is gone), and nothing is lost: it stays at its
 * path, and a process that later takes the pid has it judged and archived
 * as any earlier holder's map (claim_path()). What is lost is only the
 * archiving of the excess, which the owner caused.
 */
static bool orphan_left(struct policy *p, pid_t pid, const struct map_info *mi)
{
	char name[32];

	if (mi->refused) {
		p->stats.orphan_traps++;
		snprintf(name, sizeof(name), "perf-%d.map", (int)pid);
		if (log_first_time(mi->dev, mi->ino, name))
			pr_warn("scan: %s/%s has no process and %s; left in place", p->cfg.map_dir,
				name, perfmap_open_strerror(mi->refused));
		return true;
	}
	if (retention__orphans(p->retained, mi->uid) < p->cfg.orphans_per_uid)
		return false;
	p->stats.orphans_over_limit++;
	pr_info("scan: %s/perf-%d.map has no process, and uid %u has %zu such maps waiting already; left in place, not archived",
		p->cfg.map_dir, (int)pid, (unsigned int)mi->uid, p->cfg.orphans_per_uid);
	return true;
}

static void on_map(struct policy *p, pid_t pid, uint64_t now_ns)
{
	struct map_info mi;

	/*
	 * A tracked process's path was claimed when it forked or was found; a
	 * listing after lost changes knows less than that did.
	 */
	if (proctab_find(&p->procs, pid) || retention__find(p->retained, pid))
		return;
	/* Alive but not in the table yet: its fork event is still queued. */
	if (p->store.ops->pid_held(p->store.ctx, pid, 0) || look(p, pid, 0, &mi))
		return;
	/* Nobody holds the pid: its writer ended while the agent did not watch. */
	if (orphan_left(p, pid, &mi))
		return;
	if (retain(p, pid, 0, &mi, true, now_ns))
		return;
	pr_info("scan: %s/perf-%d.map has no process; kept %llus, then archived", p->cfg.map_dir,
		(int)pid, (unsigned long long)(p->cfg.retention_ns / 1000000000));
}

/* ---- timers ---- */

/* An exited process's map the agent had no fd for: it stays, and is tried again. */
static enum retain_result put_off(struct policy *p, const struct retained *e, int err)
{
	p->stats.resource_deferred++;
	p->put_off_now = true;
	if (!p->moves_put_off++)
		pr_warn("archive %s/perf-%d.map: %s; it stays at its path and is tried again every %llu s (said once until a move works)",
			p->cfg.map_dir, (int)e->pid, strerror(-err),
			(unsigned long long)(RETRY_EXITED_NS / 1000000000));
	return RETAIN_BUSY;
}

static enum retain_result on_due(void *ctx, const struct retained *e)
{
	struct policy *p = ctx;
	struct map_info mi;
	int err;

	/* Gone, or another file by now: nothing of this entry's is left to move. */
	if (look(p, e->pid, 0, &mi) || !same_file(&mi, e->dev, e->ino))
		return RETAIN_DONE;
	/*
	 * A move decided at an exec holds only for the file as it was judged:
	 * written since, it has the new image's lines too.
	 */
	if (e->kind == RETAIN_MOVE && mi.size != e->size) {
		p->stats.ambiguous_kept++;
		pr_info("exec %d: %s/perf-%d.map was written while its move waited: the new image's lines are in it; kept",
			(int)e->pid, p->cfg.map_dir, (int)e->pid);
		return RETAIN_DONE;
	}
	err = move_away(p, e->pid, e->start_ticks, e->reason, &mi,
			e->kind == RETAIN_MOVE ? ARCHIVE_F_AS_JUDGED : 0);
	if (e->kind == RETAIN_EXITED && short_of_resources(err))
		return put_off(p, e, err);
	if (e->kind == RETAIN_EXITED && !err)
		p->moved_now = true;
	if (err != -EBUSY && err != -EAGAIN)
		return RETAIN_DONE;
	if (e->kind == RETAIN_EXITED)
		pr_info("archive %s/perf-%d.map: %s; trying again in %llu s", p->cfg.map_dir,
			(int)e->pid, err == -EBUSY ? "still open for writing" :
			"the archive's queue is full", (unsigned long long)(RETRY_EXITED_NS / 1000000000));
	return RETAIN_BUSY;
}

static void on_gave_up(void *ctx, const struct retained *e)
{
	struct policy *p = ctx;

	p->stats.ambiguous_kept++;
	pr_warn("exec %d: %s/perf-%d.map could not be moved in time (open for writing: the new image took it? or the archive's queue full); left in place",
		(int)e->pid, p->cfg.map_dir, (int)e->pid);
}

static void retry_copies(struct policy *p, uint64_t now_ns)
{
	struct pidmap_node *n, *next;
	struct proc *pr;
	size_t i;

	pidmap_for_each(&p->procs.map, i, n, next) {
		pr = proc_of(n);
		/* One copy at a time: one in the worker tells when it is done. */
		if (!pr->retry_until_ns || pr->copy_ticket)
			continue;
		after_copy(p, pr, copy_from_parent(p, pr, pr->retry_pstart, SPAN_UNKNOWN,
						   COPY_OP_CREATE, now_ns), now_ns);
	}
}

void policy__tick(struct policy *p, uint64_t now_ns)
{
	const struct retention_cb cb = { .due = on_due, .gave_up = on_gave_up, .ctx = p };

	retry_copies(p, now_ns);
	p->put_off_now = p->moved_now = false;
	retention__expire(p->retained, now_ns, &cb);
	/* The shortage is over when moves work and none had to be put off. */
	if (p->moves_put_off && p->moved_now && !p->put_off_now) {
		pr_info("archive: moves work again; %llu had been put off",
			(unsigned long long)p->moves_put_off);
		p->moves_put_off = 0;
	}
}

uint64_t policy__next_deadline(const struct policy *p)
{
	return retention__next_move(p->retained);
}

/* ---- the interface ---- */

struct policy *policy__new(const struct policy_config *cfg, struct mapstore store)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cfg = *cfg;
	if (!p->cfg.orphans_per_uid)
		p->cfg.orphans_per_uid = ORPHANS_PER_UID;
	p->store = store;
	p->retained = retention__new();
	/* The burst is saved up from the start: a new agent lets a prefork burst through. */
	p->copy_budget = budget__new(cfg->copy_rate, cfg->copy_burst);
	p->loop_budget = budget__new(cfg->loop_copy_rate, cfg->loop_copy_rate);
	if (!p->retained || !p->copy_budget || !p->loop_budget || proctab_init(&p->procs)) {
		policy__free(p);
		return NULL;
	}
	return p;
}

void policy__free(struct policy *p)
{
	if (!p)
		return;
	proctab_fini(&p->procs);
	retention__free(p->retained);
	budget__free(p->copy_budget);
	budget__free(p->loop_budget);
	free(p);
}

void policy__event(struct policy *p, const struct policy_event *ev, uint64_t now_ns)
{
	switch (ev->type) {
	case POLICY_EV_FORK:
		on_fork(p, ev, now_ns);
		break;
	case POLICY_EV_FOUND:
		on_found(p, ev, now_ns);
		break;
	case POLICY_EV_EXEC:
		on_exec(p, ev, now_ns);
		break;
	case POLICY_EV_EXIT:
		end_process(p, ev->pid, ev->start_ticks, ev->at,
			    ev->flags & POLICY_EVF_FOREIGN, ev->comm, now_ns);
		break;
	case POLICY_EV_MAP:
		on_map(p, ev->pid, now_ns);
		break;
	}
}

void policy__map_appeared(struct policy *p, pid_t pid, uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, pid);
	struct map_info mi;

	if (!pr) {
		on_map(p, pid, now_ns);
		return;
	}
	/* Made after the process started: its own, whatever a later listing can tell. */
	if (!(pr->flags & PROC_FOREIGN_NS) && !look(p, pid, 0, &mi) &&
	    span_before(pr->start, mi.born) && !copied_here(pr, &mi))
		own_map(pr, &mi);
}

bool policy__mark(struct policy *p, pid_t pid, uint64_t start_ticks)
{
	struct proc *pr = proctab_find(&p->procs, pid);

	if (!pr || pr->start_ticks != start_ticks)
		return false;
	pr->flags |= PROC_SEEN;
	return true;
}

void policy__sweep(struct policy *p, bool end_unmarked, uint64_t now_ns)
{
	struct pidmap_node *n, *next;
	struct proc *pr;
	size_t i;

	pidmap_for_each(&p->procs.map, i, n, next) {
		pr = proc_of(n);
		if (pr->flags & PROC_SEEN) {
			pr->flags &= ~PROC_SEEN;
			continue;
		}
		if (end_unmarked)
			end_process(p, pr->tgid, pr->start_ticks, SPAN_UNKNOWN, false, pr->comm,
				    now_ns);
	}
}

const struct policy_stats *policy__stats(const struct policy *p)
{
	return &p->stats;
}

size_t policy__processes(const struct policy *p)
{
	return proctab_count(&p->procs);
}

size_t policy__retained(const struct policy *p)
{
	return retention__count(p->retained, RETAIN_EXITED);
}

void policy__for_each_pid(const struct policy *p, void (*fn)(pid_t pid, void *ctx), void *ctx)
{
	struct pidmap_node *n, *next;
	size_t i;

	pidmap_for_each(&p->procs.map, i, n, next)
		if (!(proc_of(n)->flags & PROC_FOREIGN_NS))
			fn(proc_of(n)->tgid, ctx);
}

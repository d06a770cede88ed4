/*
 * The policy's copies: a forked child gets its parent's entries, judged the
 * parent's own, charged to the child's uid, made in the event loop or sent to
 * the worker, tried again while a runtime finishes a line or the agent is
 * short of fds, and settled when the child execs or ends.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/budget.h"
#include "lib/log.h"
#include "policy/policy_internal.h"

#define COPY_RETRY_NS (5ull * 1000000000)   /* for a runtime to finish its line, or fds to be free */
/* A parent's map grows while it is copied: this much more data than estimated is allowed. */
#define COPY_SLACK (1ull << 20)

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

/* A copy's fork-to-link time into the latency histogram, when it is exact. */
static void count_latency(struct policy *p, double after_ms)
{
	static const uint64_t bounds[POLICY_COPY_BUCKETS] = POLICY_COPY_BOUNDS_NS;
	uint64_t ns;
	size_t i;

	if (after_ms < 0)
		return;
	ns = (uint64_t)(after_ms * 1e6);
	for (i = 0; i < POLICY_COPY_BUCKETS && ns > bounds[i]; i++)
		;
	p->stats.copy_latency[i]++;
	p->stats.copy_latency_sum_ns += ns;
}

static void log_copy(struct policy *p, const struct proc *pr, const struct copy_result *res)
{
	double ms = res->took_ns / 1e6, after = ms_after_fork(pr, res);

	p->stats.copy_entries_left_out += res->left_out;
	if (res->unfiltered)
		p->stats.copies_unfiltered++;
	if (res->left_out)
		pr_info("copy %d -> %d (%s): %ld entries name memory the child did not inherit (freed, MADV_DONTFORK or a shared memfd): left out",
			(int)pr->ppid, (int)pr->tgid, pr->comm, res->left_out);

	switch (res->kind) {
	case COPY_CREATED:
		p->stats.copies_created++;
		count_latency(p, after);
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
	/* Another user's file the parent's claim could not move: never copied into its children. */
	if (policy__squatted(parent, pm, parent->image, NULL))
		return false;
	/*
	 * Judged so before, and unchanged: every fork of a parent asks, and the
	 * judgement reads the file and /proc. Said once per file.
	 */
	if (same_file(pm, parent->judged.not_own_dev, parent->judged.not_own_ino) &&
	    pm->size == parent->judged.not_own_size)
		return false;
	/* Against the image running now: a map from before its exec is an old image's. */
	policy__judge(p, parent->tgid, parent->start_ticks, pm, parent->image, NULL, MAPPINGS_OWN, &j);
	if (j.verdict == EARLIER) {
		if (!same_file(pm, parent->judged.not_own_dev, parent->judged.not_own_ino))
			pr_info("copy %d: %s/perf-%d.map is not the parent's (%s); not copied, for this and later forks while it stays",
				(int)parent->tgid, p->cfg.map_dir, (int)parent->tgid, j.why);
		parent->judged.not_own_dev = pm->dev;
		parent->judged.not_own_ino = pm->ino;
		parent->judged.not_own_size = pm->size;
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

/* Is there a worker to make large copies? */
static bool can_defer(const struct policy *p)
{
	return p->cfg.defer_copy_bytes && p->store.ops->copy_defer;
}

static bool same_fault(const struct copy_fault *f, int err, const char *why)
{
	return f->err == err && (f->why == why || (f->why && why && !strcmp(f->why, why)));
}

/*
 * A refusal names a trap at one path: said once for that file, wherever the
 * agent meets it (a scan, a copy, an exit). Any other cause, once until a
 * copy works.
 */
static void say_copy_fault(struct policy *p, const struct proc *pr, const struct copy_result *res,
			   int err)
{
	struct copy_fault *f = &p->copy_fault;

	if (res->refused && res->trap_name[0] &&
	    !log_first_time(res->trap_dev, res->trap_ino, res->trap_name)) {
		pr_debug("copy %d -> %d: %s/%s %s (said before)", (int)pr->ppid, (int)pr->tgid,
			 p->cfg.map_dir, res->trap_name, res->why ? res->why : "");
		return;
	}
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
		return policy__copy_from_parent(p, pr, pr->copy.retry_pstart, SPAN_UNKNOWN, COPY_OP_APPEND, now_ns);
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
		pr->copy.dev = res->map.dev;
		pr->copy.ino = res->map.ino;
		pr->copy.size = res->map.size;
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

/*
 * Send the copy, charged @cost, to the worker: -EINPROGRESS; -EBUSY when the
 * whole queue is full or the uid has its share of it, or -ENOMEM: tried again
 * within the retry window (after_copy). A uid's share full is not a refusal:
 * a JIT that forked dozens of children from a large map while no agent ran
 * gets them all, a share at a time; the uid's byte budget is what refuses.
 */
static int defer_copy(struct policy *p, struct proc *pr, struct copy_req *rq, enum copy_op op,
		      uint64_t cost)
{
	int err;

	/* Bounded by the apparent size: blocks on disk undercount a compressed file's data. */
	rq->max_data = rq->parent_map->size + COPY_SLACK;
	err = p->store.ops->copy_defer(p->store.ctx, rq, op, ++p->tickets);
	if (err) {
		budget__settle(p->copy_budget, pr->uid, cost, 0);
		p->stats.copies_queue_full++;
		if (err == -EAGAIN) {
			pr_debug("copy %d -> %d: uid %u has its share of the copy queue; tried again while the child lives",
				 (int)pr->ppid, (int)pr->tgid, (unsigned int)pr->uid);
			return -EBUSY;
		}
		pr_info("copy %d -> %d: the copy queue is %s; tried again %s",
			(int)pr->ppid, (int)pr->tgid, err == -EBUSY ? "full" : "out of memory",
			err == -EBUSY ? "while the child lives" : "for 5 s");
		return err == -EBUSY ? -EBUSY : -ENOMEM;
	}
	p->stats.copies_deferred++;
	pr->copy.ticket = p->tickets;
	pr->copy.charged = cost;
	pr->copy.op = op;
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
		return defer_copy(p, pr, rq, op, cost);
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
	return defer_copy(p, pr, rq, op, cost);
}

/*
 * Give @pr its parent's entries; 0 done, -EAGAIN to try again later,
 * -EINPROGRESS when the worker makes the copy.
 */
int policy__copy_from_parent(struct policy *p, struct proc *pr, struct span pstart, struct span at,
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
	if (execd(p, pr) || policy__too_large(p, "copy", pr->ppid, &pm) || !parents_own(p, parent, &pm))
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
	return err == -EAGAIN || err == -EBUSY || short_of_resources(err);
}

/* A copy waiting for room in the worker's queue: it has no deadline (see policy__after_copy). */
#define RETRY_NO_DEADLINE UINT64_MAX

/*
 * After a try at @pr's copy that returned @ret: wait for a runtime's line or
 * for fds (5 s), for room in the worker's queue (while the child lives), or
 * give up. The queue always drains, only slowly on a loaded host where the
 * workers' low priority starves them: giving up there would lose the child's
 * names for nothing but time, and a waiting child costs the tick one look.
 */
void policy__after_copy(struct policy *p, struct proc *pr, int ret, uint64_t now_ns)
{
	if (ret == -EINPROGRESS)
		return;  /* the worker's result decides */
	if (ret == -EBUSY) {
		pr->copy.retry_until_ns = RETRY_NO_DEADLINE;
	} else if (!copy_again(ret)) {
		pr->copy.retry_until_ns = 0;
	} else if (!pr->copy.retry_until_ns || pr->copy.retry_until_ns == RETRY_NO_DEADLINE) {
		pr->copy.retry_until_ns = now_ns + COPY_RETRY_NS;
	} else if (now_ns >= pr->copy.retry_until_ns) {
		pr->copy.retry_until_ns = 0;
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
void policy__settle_copy(struct policy *p, struct proc *pr, const char *what, uint64_t now_ns)
{
	struct copy_result res = { 0 };
	int err;

	if (!pr->copy.ticket)
		return;
	err = p->store.ops->copy_settle(p->store.ctx, pr->tgid, pr->copy.ticket, &res);
	pr->copy.ticket = 0;
	pr->copy.retry_until_ns = 0;
	if (err == -ECANCELED) {
		budget__settle(p->copy_budget, pr->uid, pr->copy.charged, 0);
		if (!strcmp(what, "exec'd"))
			p->stats.copies_skipped_exec++;
		pr_debug("copy %d -> %d (%s): the child %s before its copy was made; stopped",
			 (int)pr->ppid, (int)pr->tgid, pr->comm, what);
		return;
	}
	/*
	 * Being made (stopped, nothing shows) or appended: what it read and
	 * wrote so far was work done for the uid, and its charge stays whole.
	 * Refunded, a child exiting mid-copy would make copies free.
	 */
	if (err == -EINPROGRESS) {
		pr_debug("copy %d -> %d (%s): the child %s while its copy was being made; charged in full",
			 (int)pr->ppid, (int)pr->tgid, pr->comm, what);
		return;
	}
	copy_finished(p, pr, (enum copy_op)pr->copy.op, err, &res, pr->copy.charged, true, now_ns);
}

void policy__copy_done(struct policy *p, pid_t child, uint64_t ticket, int err,
		       const struct copy_result *res, uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, child);

	/* Settled already: the child exec'd or ended while its copy was made (charged then). */
	if (!pr || pr->copy.ticket != ticket) {
		p->stats.copy_bytes += res->bytes;
		pr_debug("copy -> %d: done after the child exec'd or ended (%s)", (int)child,
			 err ? strerror(-err) : "made");
		return;
	}
	pr->copy.ticket = 0;
	policy__after_copy(p, pr, copy_finished(p, pr, (enum copy_op)pr->copy.op, err, res,
					pr->copy.charged, false, now_ns), now_ns);
}

/* Uids whose share of the worker's queue was full at this tick: their other waiting copies wait for the next. */
#define FULL_UIDS_MAX 16

static bool uid_in(const uid_t *uids, size_t n, uid_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (uids[i] == uid)
			return true;
	return false;
}

void policy__retry_copies(struct policy *p, uint64_t now_ns)
{
	uid_t full[FULL_UIDS_MAX];
	struct pidmap_node *n, *next;
	size_t i, nfull = 0;
	struct proc *pr;
	int ret;

	pidmap_for_each(&p->procs.map, i, n, next) {
		pr = proc_of(n);
		/* One copy at a time: one in the worker tells when it is done. */
		if (!pr->copy.retry_until_ns || pr->copy.ticket)
			continue;
		/* One refusal a tick per uid: a thousand waiting children cost no thousand opens. */
		if (pr->copy.retry_until_ns == RETRY_NO_DEADLINE && uid_in(full, nfull, pr->uid))
			continue;
		ret = policy__copy_from_parent(p, pr, pr->copy.retry_pstart, SPAN_UNKNOWN, COPY_OP_CREATE, now_ns);
		if (ret == -EBUSY && nfull < FULL_UIDS_MAX && !uid_in(full, nfull, pr->uid))
			full[nfull++] = pr->uid;
		policy__after_copy(p, pr, ret, now_ns);
	}
}

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
 * Who wrote a map is decided in policy_judge.c; the parent's entries for a
 * child are copied in policy_copy.c. Where the evidence cannot tell, the map
 * stays where it is (nothing is lost), and that is counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/budget.h"
#include "lib/log.h"
#include "perfmap.h"
#include "policy/policy_internal.h"

/* ---- the process table ---- */

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
	policy__ns_track(pr, ev, fresh);
	return pr;
}

/* ---- exit ---- */

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
		policy__settle_copy(p, pr, "exited", now_ns);
	/* The table held an earlier process here, whose exit was lost. */
	if (pr && pr->start_ticks != start_ticks) {
		if (pr->flags & PROC_MIRRORED)
			policy__ns_end(p, pr, now_ns);
		proctab_remove(&p->procs, pid);
		pr = NULL;
	}
	if (pr && (pr->flags & PROC_MIRRORED)) {
		policy__ns_end(p, pr, now_ns);
		goto forget;
	}
	if (pr ? (pr->flags & PROC_FOREIGN_NS) : foreign)
		goto forget;
	if (look(p, pid, latest(at), &mi))
		goto forget;
	/* A trap never was its map, and could never be moved: not retained. */
	if (mi.refused) {
		policy__say_trap(p, "exit", pid, &mi);
		goto forget;
	}
	if (span_before(at, mi.born) && !(pr && copied_here(pr, &mi))) {
		pr_debug("exit %d: %s/perf-%d.map was made after the exit: not its map",
			 (int)pid, p->cfg.map_dir, (int)pid);
		goto forget;
	}
	if (policy__retain(p, pid, start_ticks, &mi, false, now_ns))
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
	if (mi.refused) {
		policy__say_trap(p, what, pr->tgid, &mi);
		return;
	}
	if (policy__squatted(pr, &mi, pr->start, kp)) {
		policy__move_squatted(p, pr, what, &mi);
		return;
	}
	/*
	 * Read after the process exec'd: its exec events, queued behind this
	 * one, judge the map against the image that was there to write it.
	 */
	if (!kp && p->store.ops->execd_since(p->store.ctx, pr->tgid, pr->start.lo)) {
		pr_debug("%s %d (%s): exec'd since; its exec decides about %s/perf-%d.map",
			 what, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid);
		return;
	}
	policy__judge(p, pr->tgid, pr->start_ticks, &mi, pr->start, kp, mappings, &j);
	policy__count_judgement(p, &j);
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
	err = policy__move_away(p, pr->tgid, start_ticks, ARCHIVE_STALE, &mi, ARCHIVE_F_AS_JUDGED);
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
	policy__settle_copy(p, pr, "exited", now_ns);
	if (pr->flags & PROC_MIRRORED)
		policy__ns_end(p, pr, now_ns);
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
	/* Its map elsewhere (mirrored, policy_ns.c) or not to be had: nothing more here. */
	if (pr && (pr->flags & PROC_FOREIGN_NS) && !policy__ns_place(p, pr, ev, now_ns))
		return NULL;
	return pr;
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
	pr->copy.retry_pstart = ev->pstart;
	policy__after_copy(p, pr, policy__copy_from_parent(p, pr, ev->pstart, ev->at, COPY_OP_CREATE, now_ns),
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
	if (parent && (parent->flags & (PROC_FOREIGN_NS | PROC_MIRRORED)))
		parent = NULL;
	same_image = parent && p->store.ops->same_image(p->store.ctx, pr->tgid, pr->ppid);
	claim_path(p, pr, "scan", same_image ? MAPPINGS_INHERITED : MAPPINGS_OWN);
	if (!same_image || !look(p, pr->tgid, 0, &mi) || look(p, pr->ppid, 0, &mi))
		return;
	pr_info("scan: %d (%s) forked from %d unseen; copying", (int)pr->tgid, pr->comm,
		(int)pr->ppid);
	pr->copy.retry_pstart = parent->start;
	policy__after_copy(p, pr, policy__copy_from_parent(p, pr, parent->start, SPAN_UNKNOWN, COPY_OP_CREATE, now_ns),
		   now_ns);
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
		policy__settle_copy(p, pr, "exec'd", now_ns);
	}
	pr = track(p, ev);
	if (!pr)
		return;
	pr->copy.retry_until_ns = 0;
	policy__jit_exec(p, pr);
	/* A new image owns no map yet, and has judged none. */
	pr->judged.own_ino = 0;
	pr->judged.not_own_ino = 0;
	pr->image = ev->at;
	/* Mirrored, or newly in another namespace (a container's init execs after its unshare). */
	if ((pr->flags & (PROC_FOREIGN_NS | PROC_MIRRORED)) && !policy__ns_exec(p, pr, ev, now_ns))
		goto forget_copy;
	if (look(p, pr->tgid, latest(ev->at), &mi))
		goto forget_copy;
	if (copied_here(pr, &mi) && mi.size == pr->copy.size) {
		/* Only the parent's entries, as perfmapd wrote them: none is the new image's. */
		j = (struct judgement){ EARLIER, BY_IDENTITY, "only perfmapd's copy, unchanged" };
		why = ARCHIVE_DROP;
	} else if (copied_here(pr, &mi) && span_before(ev->at, mi.born)) {
		/* A copy made late, after the exec: only the new image can have written to it. */
		j = (struct judgement){ AMBIGUOUS, BY_INDEX,
			"perfmapd's copy, made after the exec and written since by the new image" };
	} else if (policy__squatted(pr, &mi, ev->at, NULL)) {
		policy__move_squatted(p, pr, "exec", &mi);
		goto forget_copy;
	} else {
		policy__judge(p, pr->tgid, pr->start_ticks, &mi, ev->at, NULL, MAPPINGS_OWN, &j);
	}
	policy__count_judgement(p, &j);
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
	err = policy__move_away(p, pr->tgid, pr->start_ticks, why, &mi, ARCHIVE_F_FRESH | ARCHIVE_F_AS_JUDGED);
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
	/*
	 * Gone (most of a storm's names are, by the tick: the cheap look first),
	 * or alive but not in the table yet: its fork event is still queued.
	 */
	if (look(p, pid, 0, &mi) || p->store.ops->pid_held(p->store.ctx, pid, 0))
		return;
	/* Nobody holds the pid: its writer ended while the agent did not watch. */
	if (orphan_left(p, pid, &mi))
		return;
	if (policy__retain(p, pid, 0, &mi, true, now_ns))
		return;
	pr_info("scan: %s/perf-%d.map has no process; kept %llus, then archived", p->cfg.map_dir,
		(int)pid, (unsigned long long)(p->cfg.retention_ns / 1000000000));
}

static void queue_orphan(struct policy *p, pid_t pid)
{
	if (p->orphan_len == ORPHAN_QUEUE) {
		p->stats.orphan_checks_dropped++;
		return;
	}
	p->orphan_q[(p->orphan_head + p->orphan_len++) % ORPHAN_QUEUE] = pid;
}

/* The oldest waiting orphans, ORPHAN_PER_TICK at most: the event loop's other work comes first. */
static void weigh_orphans(struct policy *p, uint64_t now_ns)
{
	size_t n;
	pid_t pid;

	for (n = 0; n < ORPHAN_PER_TICK && p->orphan_len; n++) {
		pid = p->orphan_q[p->orphan_head];
		p->orphan_head = (p->orphan_head + 1) % ORPHAN_QUEUE;
		p->orphan_len--;
		on_map(p, pid, now_ns);
	}
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

	bool held = e->kind == RETAIN_EXITED && e->start_ticks &&
		    policy__is_held(p, e->pid, e->start_ticks);

	/* Held still: looked at again without a look on disk (65,536 held cost no open a second each). */
	if (held && e->held)
		return RETAIN_HELD;
	/* Gone, or another file by now: nothing of this entry's is left to move. */
	if (look(p, e->pid, 0, &mi) || !same_file(&mi, e->dev, e->ino))
		return RETAIN_DONE;
	/* A profiler's report names it still: at its path until released. */
	if (held) {
		p->stats.held_past_retention++;
		pr_info("exit %d: %s/perf-%d.map stays past its retention: a profiler holds it until its report",
			(int)e->pid, p->cfg.map_dir, (int)e->pid);
		return RETAIN_HELD;
	}
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
	err = policy__move_away(p, e->pid, e->start_ticks, e->reason, &mi,
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


void policy__tick(struct policy *p, uint64_t now_ns)
{
	const struct retention_cb cb = { .due = on_due, .gave_up = on_gave_up, .ctx = p };

	policy__retry_copies(p, now_ns);
	weigh_orphans(p, now_ns);
	policy__jit_tick(p, now_ns);
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
	if (!p->cfg.retained_per_uid)
		p->cfg.retained_per_uid = RETAINED_PER_UID;
	p->store = store;
	p->retained = retention__new();
	/* The burst is saved up from the start: a new agent lets a prefork burst through. */
	p->copy_budget = budget__new(cfg->copy_rate, cfg->copy_burst);
	p->loop_budget = budget__new(cfg->loop_copy_rate, cfg->loop_copy_rate);
	p->lost_lines = budget__new(LOST_LINES_RATE, LOST_LINES_BURST);
	p->canon_uid = budget__new(CANON_RATE_PER_UID, CANON_RATE_PER_UID * 4);
	p->canon_all = budget__new(CANON_RATE, CANON_RATE * 2);
	if (!p->retained || !p->copy_budget || !p->loop_budget || !p->lost_lines ||
	    !p->canon_uid || !p->canon_all ||
	    proctab_init(&p->procs) || pidmap_init(&p->held, 64)) {
		policy__free(p);
		return NULL;
	}
	return p;
}

void policy__set_limits(struct policy *p, uint64_t retention_ns, uint64_t copy_rate,
			uint64_t copy_burst)
{
	p->cfg.retention_ns = retention_ns;
	p->cfg.copy_rate = copy_rate;
	p->cfg.copy_burst = copy_burst;
	budget__set(p->copy_budget, copy_rate, copy_burst);
}

uint64_t policy__retention_ns(const struct policy *p)
{
	return p->cfg.retention_ns;
}

void policy__free(struct policy *p)
{
	if (!p)
		return;
	proctab_fini(&p->procs);
	pidmap_fini(&p->held);
	retention__free(p->retained);
	budget__free(p->copy_budget);
	budget__free(p->loop_budget);
	budget__free(p->lost_lines);
	budget__free(p->canon_uid);
	budget__free(p->canon_all);
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
		(void)now_ns;  /* weighed at the tick, on its clock */
		queue_orphan(p, pid);
		return;
	}
	if (look(p, pid, 0, &mi))
		return;
	if (pr->jit.state == JIT_LOST && !mi.refused)
		policy__jit_named(p, pr);
	if ((pr->flags & (PROC_FOREIGN_NS | PROC_MIRRORED)) || copied_here(pr, &mi))
		return;
	/* Put there by another user after the claim, before the runtime opens the path. */
	if (policy__squatted(pr, &mi, pr->image, NULL)) {
		policy__move_squatted(p, pr, "map", &mi);
		return;
	}
	/* Made after the process started: its own, whatever a later listing can tell. */
	if (span_before(pr->start, mi.born))
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

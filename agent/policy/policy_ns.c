/*
 * The policy for processes in other mount or pid namespaces: where a
 * process's map is decides whether it is a host process (its map at our
 * path after all), mirrored (mirror.c keeps <map dir>/perf-<host pid>.map
 * from the map in its own root), or left alone. A mirror is then the
 * process's map on the host: its exec archives the old image's part, its
 * exit retains it as any host map. Fork copies land in the child's own map
 * directory, under its own pid, and reach the host through its mirror.
 */
#include <errno.h>
#include <string.h>

#include "policy/policy_internal.h"
#include "policy/retention.h"

static struct ns_req ns_req_of(const struct policy *p, const struct proc *pr)
{
	struct ns_req rq = { .pid = pr->tgid, .ns_pid = pr->ns.pid,
			     .start_ticks = pr->start_ticks, .uid = pr->uid, .gid = pr->gid,
			     .mnt_ns = pr->ns.mnt_ns, .comm = pr->comm };
	const struct proc *a = pr;
	size_t n = 0;

	/* Up the known parents, while in the same mount namespace: a short, bounded walk. */
	while (n < sizeof(rq.kin) / sizeof(rq.kin[0]) && a->ppid > 0 && a->ppid != a->tgid) {
		a = proctab_find(&p->procs, a->ppid);
		if (!a || a->ns.mnt_ns != pr->ns.mnt_ns)
			break;
		rq.kin[n++] = a->tgid;
	}
	return rq;
}

void policy__ns_track(struct proc *pr, const struct policy_event *ev, bool fresh)
{
	if (ev->ns_pid)
		pr->ns.pid = ev->ns_pid;
	if (!(ev->flags & POLICY_EVF_FOREIGN)) {
		/* In our namespaces (again): a host process; a mirror is ended at its exec. */
		pr->flags &= ~(PROC_FOREIGN_NS | PROC_NS_OURS);
		return;
	}
	/* Not placed yet, or in another mount namespace than where it was: to be placed. */
	if (fresh || !(pr->flags & (PROC_NS_OURS | PROC_MIRRORED)) ||
	    (ev->mnt_ns && ev->mnt_ns != pr->ns.mnt_ns))
		pr->flags |= PROC_FOREIGN_NS;
}

/*
 * Whatever is at a newly mirrored process's host path is never its own: it
 * writes in its own root. An earlier holder's map (@why ARCHIVE_STALE) or,
 * for a host process moved into a container, its old image's (ARCHIVE_EXEC)
 * goes to the archive; another user's is moved aside; a trap stays (and the
 * mirror cannot be made).
 */
static void clear_host_path(struct policy *p, struct proc *pr, enum archive_reason why)
{
	struct retained *r = retention__find(p->retained, pr->tgid);
	uint64_t start_ticks = r ? r->start_ticks : pr->start_ticks;
	struct map_info mi;
	int err;

	if (r)
		retention__forget(p->retained, pr->tgid);
	if (look(p, pr->tgid, why == ARCHIVE_STALE ? pr->start.lo : 0, &mi))
		return;
	if (mi.refused) {
		policy__say_trap(p, "mirror", pr->tgid, &mi);
		return;
	}
	if (policy__squatted(pr, &mi, pr->start, NULL)) {
		policy__move_squatted(p, pr, "mirror", &mi);
		return;
	}
	err = policy__move_away(p, pr->tgid, start_ticks, why, &mi, 0);
	pr_info("mirror %d (%s): %s/perf-%d.map was %s: %s", (int)pr->tgid, pr->comm,
		p->cfg.map_dir, (int)pr->tgid,
		why == ARCHIVE_STALE ? "an earlier process's" : "its image's before it moved in",
		err ? strerror(-err) : "archived");
}

/* The child of a mirrored parent gets the parent's entries where it keeps its own. */
static void copy_in_namespace(struct policy *p, struct proc *pr, const struct policy_event *ev)
{
	const struct mapstore_ops *ops = p->store.ops;
	struct proc *parent = proctab_find(&p->procs, ev->ppid);
	struct ns_req rq = ns_req_of(p, pr);
	int err;

	if (ev->type != POLICY_EV_FORK || (ev->flags & POLICY_EVF_VFORK) || !ops->ns_copy ||
	    !parent || !(parent->flags & PROC_MIRRORED))
		return;
	err = ops->ns_copy(p->store.ctx, parent->tgid, &rq);
	if (!err) {
		p->stats.ns_copies++;
		return;
	}
	/* It has its own already, or the parent none, or lives in another root than it. */
	if (err == -EEXIST || err == -ENOENT || err == -EXDEV)
		return;
	p->stats.copies_failed++;
	pr_warn("copy %d -> %d (%s) in its namespace: %s", (int)parent->tgid, (int)pr->tgid,
		pr->comm, strerror(-err));
}

bool policy__ns_place(struct policy *p, struct proc *pr, const struct policy_event *ev,
		      uint64_t now_ns)
{
	bool was_mirrored = pr->flags & PROC_MIRRORED;
	const struct mapstore_ops *ops = p->store.ops;
	enum ns_place place = NS_REFUSED;
	int err = -ENOTSUP;
	struct ns_req rq;

	pr->ns.mnt_ns = ev->mnt_ns;
	rq = ns_req_of(p, pr);
	if (ops->ns_attach && pr->ns.pid)
		err = ops->ns_attach(p->store.ctx, &rq, &place);
	if (err || place == NS_REFUSED) {
		/* A mirror it had ends here, and stays for the retention, as at an exit. */
		if (was_mirrored)
			policy__ns_end(p, pr, now_ns);
		/* Gone already, or refused (said by the store): left alone, as before mirrors. */
		pr->flags = (pr->flags & ~PROC_MIRRORED) | PROC_FOREIGN_NS;
		p->stats.foreign_ns++;
		pr_debug("%d (%s): another mount or pid namespace, not mirrored (%s); left alone",
			 (int)pr->tgid, pr->comm, err ? strerror(-err) : "refused");
		return false;
	}
	if (place == NS_OURS) {
		pr->flags = (pr->flags & ~(PROC_FOREIGN_NS | PROC_MIRRORED)) | PROC_NS_OURS;
		return true;
	}
	pr->flags = (pr->flags & ~PROC_FOREIGN_NS) | PROC_MIRRORED;
	if (was_mirrored) {
		/* Placed again at an exec: its mirror goes on, the old one out of the way. */
		if (ops->ns_sync)
			ops->ns_sync(p->store.ctx, pr->tgid);
		return false;
	}
	p->stats.ns_mirrored++;
	clear_host_path(p, pr, ev->type == POLICY_EV_EXEC ? ARCHIVE_EXEC : ARCHIVE_STALE);
	copy_in_namespace(p, pr, ev);
	if (ops->ns_sync)
		ops->ns_sync(p->store.ctx, pr->tgid);
	return false;
}

bool policy__ns_exec(struct policy *p, struct proc *pr, const struct policy_event *ev,
		     uint64_t now_ns)
{
	const struct mapstore_ops *ops = p->store.ops;
	struct map_info mi;
	int err, got;

	got = pr->flags & PROC_MIRRORED ? ops->ns_exec(p->store.ctx, pr->tgid, ev->at.lo, &mi) :
					  -ENOENT;
	if (got >= 0) {
		/*
		 * Lines that may be the new image's are in its new mirror too:
		 * none is lost. Only the fork's copy, unwritten: dropped, as on
		 * the host.
		 */
		err = policy__move_away(p, pr->tgid, pr->start_ticks,
					got ? ARCHIVE_DROP : ARCHIVE_EXEC, &mi, 0);
		pr_info("exec %d (%s): its mirror %s/perf-%d.map is the old image's: %s",
			(int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
			err ? strerror(-err) : "archived");
	}
	if (!(ev->flags & POLICY_EVF_FOREIGN)) {
		/* Back in our namespaces: the host's rules from now on. */
		if ((pr->flags & PROC_MIRRORED) && !ops->ns_end(p->store.ctx, pr->tgid, &mi))
			policy__move_away(p, pr->tgid, pr->start_ticks, ARCHIVE_EXEC, &mi, 0);
		pr->flags &= ~PROC_MIRRORED;
		return true;
	}
	/*
	 * Placed again: a container's init forks in the host's root and is
	 * only then moved into its own, before it execs.
	 */
	return policy__ns_place(p, pr, ev, now_ns);
}

void policy__ns_end(struct policy *p, struct proc *pr, uint64_t now_ns)
{
	const struct mapstore_ops *ops = p->store.ops;
	struct map_info mi;

	pr->flags &= ~PROC_MIRRORED;
	if (!ops->ns_end || ops->ns_end(p->store.ctx, pr->tgid, &mi))
		return;
	if (policy__retain(p, pr->tgid, pr->start_ticks, &mi, false, now_ns))
		return;
	pr_info("exit %d (%s): its mirror %s/perf-%d.map stays for %llus, then goes to %s",
		(int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
		(unsigned long long)(p->cfg.retention_ns / 1000000000), p->cfg.archive_dir);
}

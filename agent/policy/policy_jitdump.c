/*
 * Jitdumps: whose map a dump's records may name code in, and which map at a
 * pid's path perfmapd may write a dump's functions into. A dump is the
 * producer's file: anyone can write any pid into its records, so a record
 * names code only in its producer's map and in those of the producer's own
 * descendants of its uid, which inherited its code (V8's and LLVM's children
 * write into their parent's dump under their own pids).
 */
#include "policy/policy_internal.h"

/* Links of parenthood followed at most: no chain of forks in the table is longer in practice. */
#define KIN_DEPTH 64

/*
 * Is @pr (@owner itself, or) a descendant of (@owner, @owner_start), by the
 * table's parents, with the owner of @uid? A dump of another uid than its
 * producer's is not the producer's, whatever pids its records name.
 */
static bool descends(const struct policy *p, const struct proc *pr, pid_t owner,
		     uint64_t owner_start, uid_t uid)
{
	const struct proc *parent;
	unsigned int depth;

	for (depth = 0; pr && depth < KIN_DEPTH; depth++) {
		if (pr->tgid == owner)
			return pr->start_ticks == owner_start && pr->uid == uid;
		/* A parent started after its child is a later holder of the parent's pid. */
		if (!pr->ppid || pr->ppid == pr->tgid)
			return false;
		parent = proctab_find(&p->procs, pr->ppid);
		if (parent && parent->start_ticks > pr->start_ticks)
			return false;
		pr = parent;
	}
	return false;
}

enum jitdump_target policy__jitdump_target(const struct policy *p, pid_t owner,
					   uint64_t owner_start, pid_t pid, uid_t uid,
					   uint64_t *start_ticks)
{
	const struct proc *pr = proctab_find(&p->procs, pid);

	if (!pr)
		return JITDUMP_TARGET_GONE;
	if (pr->uid != uid || !descends(p, pr, owner, owner_start, uid))
		return JITDUMP_TARGET_REFUSED;
	/* A copy of its parent's entries is being made into its path: its map is not settled yet. */
	if (pr->copy.ticket || pr->copy.retry_until_ns)
		return JITDUMP_TARGET_WAIT;
	*start_ticks = pr->start_ticks;
	return JITDUMP_TARGET_OK;
}

bool policy__jitdump_adopt(const struct policy *p, pid_t pid, uint64_t start_ticks,
			   const struct map_info *mi)
{
	const struct proc *pr = proctab_find(&p->procs, pid);

	/*
	 * Only perfmapd's own copy of the parent's entries, as the copy left it
	 * (same inode, same size): nobody else writes it, and the dump's
	 * functions follow the parent's, as a runtime's own would.
	 */
	return pr && pr->start_ticks == start_ticks && (pr->flags & PROC_COPIED) && !mi->refused &&
	       mi->uid == pr->uid && mi->dev == pr->copy.dev && mi->ino == pr->copy.ino &&
	       mi->size == pr->copy.size;
}

void policy__jitdump_found(struct policy *p, pid_t pid, uint64_t start_ticks)
{
	struct proc *pr = proctab_find(&p->procs, pid);

	if (!pr || pr->start_ticks != start_ticks)
		return;
	/* Its code is named by its dump: perf with inject reads it, and perfmapd writes its map. */
	pr->jit.jitdump = true;
	/* Judged lost before its dump was found (a marker read late): not lost any more. */
	if (pr->jit.state == JIT_LOST) {
		pr->jit.state = JIT_NAMED;
		p->stats.lost_symbols_named++;
		pr_info("lost symbols: %d (%s) produces a jitdump: its code is named from it",
			(int)pr->tgid, pr->comm);
	}
}

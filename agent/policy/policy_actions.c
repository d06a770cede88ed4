/*
 * The policy's shared actions, which every decision file uses: a map moved
 * out of a path (with the dry run and the size bound in front of the
 * store), an ended process's map kept for the retention, a trap said once,
 * a squatted map moved aside. They call only the store and the tables.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "perfmap.h"
#include "policy/policy_internal.h"

bool policy__too_large(struct policy *p, const char *what, pid_t pid, const struct map_info *mi)
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
int policy__move_away(struct policy *p, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		     const struct map_info *mi, unsigned int flags)
{
	int err;

	/* A squatted map is only renamed: its size costs nothing here, and it must go. */
	if (!(flags & ARCHIVE_F_SQUATTED) && policy__too_large(p, "archive", pid, mi))
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

/*
 * The ended process's map @mi made canonical where it stays, so that every
 * consumer reads it right for the retention; @mi is the file at the path
 * afterwards. Never under a writer: the store's read lease decides.
 */
static void canonicalize(struct policy *p, pid_t pid, struct map_info *mi, uint64_t now_ns)
{
	struct map_info now;
	int err;

	if (!p->store.ops->canonicalize || p->cfg.dry_run || mi->refused)
		return;
	if (!budget__take(p->canon_uid, mi->uid, 1, now_ns) ||
	    !budget__take(p->canon_all, 0, 1, now_ns)) {
		p->stats.retained_canonical_skipped++;
		return;
	}
	err = p->store.ops->canonicalize(p->store.ctx, pid, mi);
	if (err == -EALREADY)
		return;
	if (err == -EBUSY) {
		p->stats.retained_canonical_busy++;
		pr_debug("exit %d: %s/perf-%d.map is open for writing still; left as it is",
			 (int)pid, p->cfg.map_dir, (int)pid);
		return;
	}
	if (err) {
		p->stats.retained_canonical_skipped++;
		return;
	}
	p->stats.retained_canonical++;
	if (!look(p, pid, 0, &now) && !now.refused)
		*mi = now;
	pr_info("exit %d: %s/perf-%d.map rewritten in canonical form for its retention (some consumer misread it)",
		(int)pid, p->cfg.map_dir, (int)pid);
}

/* Keep @mi, the map of the ended process (@pid, @start_ticks), for the retention. */
int policy__retain(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *in,
		  bool orphan, uint64_t now_ns)
{
	struct map_info m = *in, *mi = &m;

	if (!orphan)
		canonicalize(p, pid, mi, now_ns);
	struct retained r = {
		.pid = pid, .start_ticks = start_ticks, .kind = RETAIN_EXITED,
		.orphan = orphan, .uid = mi->uid,
		.reason = ARCHIVE_EXIT, .dev = mi->dev, .ino = mi->ino, .size = mi->size,
		.seen_ns = mi->seen_ns, .deadline_ns = now_ns + p->cfg.retention_ns,
	};

	/* Past the owner's cap: archived at the next tick, not kept at its path (issue 9, M3). */
	if (retention__exited(p->retained, mi->uid) >= p->cfg.retained_per_uid) {
		r.deadline_ns = now_ns;
		p->stats.retained_over_limit++;
		if (retention__first_over(p->retained, mi->uid))
			pr_warn("exit %d: uid %u has %zu exited processes' maps retained already; %s/perf-%d.map and its later ones are archived at once (said once until it has none)",
				(int)pid, (unsigned int)mi->uid, p->cfg.retained_per_uid,
				p->cfg.map_dir, (int)pid);
	}
	if (retention__add(p->retained, &r)) {
		p->stats.errors++;
		return -ENOMEM;
	}
	p->stats.retained_total++;
	return 0;
}

/*
 * A trap at @pid's path (a symlink, a hard link, not a regular file): never
 * a process's map and never movable, it is left in place and said once,
 * wherever the agent meets it first (a scan, a fork, an exit, a copy).
 */
void policy__say_trap(const struct policy *p, const char *what, pid_t pid,
		     const struct map_info *mi)
{
	char name[32];

	snprintf(name, sizeof(name), "perf-%d.map", (int)pid);
	if (log_first_time(mi->dev, mi->ino, name))
		pr_warn("%s %d: %s/%s %s; left in place", what, (int)pid, p->cfg.map_dir, name,
			perfmap_open_strerror(mi->refused));
}

/*
 * @mi at @pr's path is squatted: never @pr's, never kept for it. Moved aside
 * even while open for writing or with the archive's queue full; what cannot
 * be moved stays, not the process's (so judged again at its next event).
 */
void policy__move_squatted(struct policy *p, struct proc *pr, const char *what,
			  const struct map_info *mi)
{
	int err;

	err = policy__move_away(p, pr->tgid, 0, ARCHIVE_STALE, mi, ARCHIVE_F_SQUATTED);
	if (!err) {
		p->stats.squatted_moved++;
		pr_warn("%s %d (%s): %s/perf-%d.map belongs to uid %u, not to the process's uid %u: put there by another user; moved aside",
			what, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
			(unsigned int)mi->uid, (unsigned int)pr->uid);
		return;
	}
	if (err == -ENOENT || err == -ESTALE)
		return;  /* gone, or another file by now: the index reports that one */
	p->stats.squatted_left++;
	pr_warn("%s %d (%s): %s/perf-%d.map belongs to uid %u, not to the process's uid %u: put there by another user; cannot be moved (%s), left, not the process's",
		what, (int)pr->tgid, pr->comm, p->cfg.map_dir, (int)pr->tgid,
		(unsigned int)mi->uid, (unsigned int)pr->uid, strerror(-err));
}

/*
 * The policy: what each process event means for the maps in the map directory.
 *   fork  a child gets its parent's entries (mapfile.c); a map left at the
 *         child's pid by an earlier process is archived first;
 *   exec  the old image's map is archived (dropped if it was only our copy);
 *   exit  the map stays for --retention, then is archived (archive.c).
 * Processes in another mount or pid namespace are counted and left alone:
 * their /tmp and their pids are not the map directory's.
 */
#include <errno.h>
#include <linux/types.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "archive.h"
#include "log.h"
#include "mapfile.h"
#include "mapwatch.h"
#include "perfmapd_event.h"
#include "policy.h"
#include "procfs.h"

#define COPY_RETRIES 50   /* timer ticks: 5 s for a runtime to finish its line */

uint64_t ticks_of(const struct agent *a, uint64_t boot_ns)
{
	return boot_ns / (1000000000ull / a->ticks_per_sec);
}

int64_t real_of(const struct agent *a, uint64_t boot_ns)
{
	return a->boot_to_real_ns + (int64_t)boot_ns;
}

static bool foreign(const struct agent *a, const struct proc_event *ev)
{
	return ev->mnt_ns != a->self_mnt_ns || ev->pid_ns != a->self_pid_ns;
}

static struct proc *track(struct agent *a, const struct proc_event *ev)
{
	struct proc *p;
	bool fresh;

	p = proctab_get(&a->procs, ev->tgid, ticks_of(a, ev->start_ns), &fresh);
	if (!p)
		return NULL;
	if (fresh || !ev->from_proc)
		p->start_ns = ev->start_ns;
	p->ppid = ev->ptgid ? ev->ptgid : p->ppid;
	p->uid = ev->uid;
	p->gid = ev->gid;
	memcpy(p->comm, ev->comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
	if (foreign(a, ev))
		p->flags |= PROC_FOREIGN_NS;
	return p;
}

/* The map at @pid's path, if an earlier process wrote it, goes to the archive. */
static void clear_stale(struct agent *a, pid_t pid, uint64_t start_ns, const char *what)
{
	struct stat st;

	if (mapfile_stat(a, pid, &st))
		return;
	if (!mapfile_older_than(&st, real_of(a, start_ns)))
		return;
	pr_info("%s %d: %s/perf-%d.map is older than the process: an earlier pid %d wrote it",
		what, (int)pid, a->cfg.map_dir, (int)pid, (int)pid);
	if (!archive_map(a, pid, 0, ARCHIVE_STALE, &st))
		a->stats.stale_moved++;
}

static void log_copy(struct agent *a, const struct proc *p, const struct copy_result *res,
		     uint64_t t0)
{
	double ms = (mono_ns() - t0) / 1e6;

	switch (res->kind) {
	case COPY_NO_PARENT_MAP:
		return;
	case COPY_CREATED:
		a->stats.copies_created++;
		pr_info("copy %d -> %d (%s): %s/perf-%d.map created with %ld entries (%.2f ms)",
			(int)p->ppid, (int)p->tgid, p->comm, a->cfg.map_dir, (int)p->tgid,
			res->entries, ms);
		break;
	case COPY_APPENDED:
		a->stats.copies_appended++;
		pr_info("copy %d -> %d (%s): %ld entries appended to the child's own %s/perf-%d.map (%.2f ms)",
			(int)p->ppid, (int)p->tgid, p->comm, res->entries, a->cfg.map_dir,
			(int)p->tgid, ms);
		break;
	case COPY_BY_RUNTIME:
		a->stats.copies_by_runtime++;
		pr_info("copy %d -> %d (%s): the runtime copied the parent's entries itself; nothing added",
			(int)p->ppid, (int)p->tgid, p->comm);
		return;
	}
}

/*
 * Give @p its parent's entries; 0 done, -EAGAIN to try again later. @ts_ns
 * is the fork's time (0 unknown): a parent the index says had no map then
 * costs no lookup.
 */
static int copy_from_parent(struct agent *a, struct proc *p, uint64_t pstart_ns, uint64_t ts_ns)
{
	struct copy_req rq = {
		.parent = p->ppid,
		.parent_start_real_ns = real_of(a, pstart_ns),
		.child = p->tgid,
		.child_start_real_ns = real_of(a, p->start_ns),
		.uid = p->uid,
		.gid = p->gid,
	};
	struct copy_result res;
	uint64_t t0 = mono_ns();
	int err;

	if (!mapwatch__may_exist(a->watch, p->ppid, ts_ns))
		return 0;
	err = mapfile_copy(a, &rq, &res);
	if (err == -ESTALE) {
		clear_stale(a, p->tgid, p->start_ns, "copy to");
		err = mapfile_copy(a, &rq, &res);
	}
	if (err == -EAGAIN)
		return err;
	if (err) {
		a->stats.copies_failed++;
		pr_err("copy %d -> %d: %s/perf-%d.map %s%s%s", (int)p->ppid, (int)p->tgid,
		       a->cfg.map_dir, (int)res.on_pid, res.why ? res.why : "",
		       res.refused ? "" : ": ", res.refused ? "" : strerror(-err));
		return 0;
	}
	/* Known at once, not when inotify says so: its exit may be in this batch. */
	if (res.kind == COPY_CREATED && !a->cfg.dry_run)
		mapwatch__set(a, p->tgid, true);
	if (res.kind == COPY_CREATED || res.kind == COPY_APPENDED) {
		p->flags |= PROC_COPIED;
		p->copy_size = res.size;
		p->copy_mtime_ns = res.mtime_ns;
	}
	log_copy(a, p, &res, t0);
	return 0;
}

void policy_fork(struct agent *a, const struct proc_event *ev)
{
	struct proc *p, *old = proctab_find(&a->procs, ev->tgid);

	/* The pid's earlier holder died unseen (events were lost). */
	if (old && old->start_ticks != ticks_of(a, ev->start_ns)) {
		struct proc_event gone = { .type = PERFMAPD_EV_EXIT, .tgid = old->tgid,
					   .start_ns = old->start_ns, .mnt_ns = a->self_mnt_ns,
					   .pid_ns = a->self_pid_ns, .from_proc = true };

		if (old->flags & PROC_FOREIGN_NS)
			gone.mnt_ns = 0;
		policy_exit(a, &gone);
	}
	p = track(a, ev);
	if (!p) {
		a->stats.errors++;
		return;
	}
	if (p->flags & PROC_FOREIGN_NS) {
		a->stats.foreign_ns++;
		pr_debug("fork %d -> %d (%s): another mount or pid namespace; left alone",
			 (int)ev->ptgid, (int)ev->tgid, p->comm);
		return;
	}
	/* Even if its file is gone: the entry must not outlive its pid. */
	retain_evict_pid(a, ev->tgid);
	if (mapwatch__may_exist(a->watch, ev->tgid, ev->ts_ns))
		clear_stale(a, ev->tgid, ev->start_ns, "fork");
	/* A vfork child shares the parent's memory only until it execs. */
	if (ev->flags & (PERFMAPD_EVF_VFORK | POLICY_TRACK_ONLY))
		return;
	p->retry_pstart_ns = ev->pstart_ns;
	if (copy_from_parent(a, p, ev->pstart_ns, ev->ts_ns) == -EAGAIN)
		p->retries = COPY_RETRIES;
}

void policy_retry(struct agent *a)
{
	struct proc *p;
	size_t i;

	proctab_for_each(&a->procs, i, p) {
		if (!p->retries)
			continue;
		if (copy_from_parent(a, p, p->retry_pstart_ns, 0) != -EAGAIN) {
			p->retries = 0;
		} else if (!--p->retries) {
			a->stats.copies_failed++;
			pr_err("copy %d -> %d: %s/perf-%d.map still ends in an unfinished line; parent's entries not added",
			       (int)p->ppid, (int)p->tgid, a->cfg.map_dir, (int)p->tgid);
		}
	}
}

void policy_exec(struct agent *a, const struct proc_event *ev)
{
	struct proc *p = track(a, ev);
	enum archive_reason why = ARCHIVE_EXEC;
	struct proc_info pi;
	struct stat st;
	int err;

	if (!p) {
		a->stats.errors++;
		return;
	}
	p->retries = 0;
	if (p->flags & PROC_FOREIGN_NS)
		return;
	if (!mapwatch__may_exist(a->watch, p->tgid, ev->ts_ns) || mapfile_stat(a, p->tgid, &st))
		goto forget_copy;
	if (mapfile_older_than(&st, real_of(a, p->start_ns))) {
		clear_stale(a, p->tgid, p->start_ns, "exec");
		goto forget_copy;
	}

	/*
	 * Written after the exec (events can be read late): the new image's own.
	 * File times lag by up to a tick, so a write in the tick after the exec
	 * can look earlier; such a map is moved only if no one has it open for
	 * writing, and a runtime keeps its map open.
	 */
	if (ev->ts_ns && mapfile_mtime_ns(&st) > real_of(a, ev->ts_ns)) {
		pr_info("exec %d (%s): %s/perf-%d.map was written after the exec; kept for the new image",
			(int)p->tgid, p->comm, a->cfg.map_dir, (int)p->tgid);
		goto forget_copy;
	}
	/*
	 * Read so late that the process is gone: which image wrote the map is
	 * unclear, and queued forks may still need it. Its exit retains it.
	 */
	if (procfs_read(p->tgid, &pi) || pi.start_ticks != p->start_ticks)
		goto forget_copy;
	if ((p->flags & PROC_COPIED) && (uint64_t)st.st_size == p->copy_size &&
	    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == p->copy_mtime_ns)
		why = ARCHIVE_DROP;
	err = archive_map(a, p->tgid, p->start_ticks, why, &st);
	if (!err)
		why == ARCHIVE_DROP ? a->stats.exec_dropped++ : a->stats.exec_archived++;
	/*
	 * Open for writing. Read at once (the BPF side knew of the map, the
	 * event was urgent), that is the old image's fd, not yet released by
	 * the exec: try again shortly. Read late, it is the new image's own.
	 */
	else if (err == -EBUSY && (ev->flags & PERFMAPD_EVF_MAPPED))
		retain_retry_exec(a, p->tgid, p->start_ticks, &st, why);
forget_copy:
	p->flags &= ~PROC_COPIED;
}

void policy_exit(struct agent *a, const struct proc_event *ev)
{
	struct proc *p = proctab_find(&a->procs, ev->tgid);
	uint64_t start_ticks = ticks_of(a, ev->start_ns);
	struct stat st;

	if (p && p->start_ticks != start_ticks)
		p = NULL;  /* an exit for a process we never knew under this pid */
	if (foreign(a, ev) || (p && (p->flags & PROC_FOREIGN_NS)))
		goto forget;
	if (!mapwatch__may_exist(a->watch, ev->tgid, ev->ts_ns) || mapfile_stat(a, ev->tgid, &st))
		goto forget;
	if (mapfile_older_than(&st, real_of(a, ev->start_ns))) {
		clear_stale(a, ev->tgid, ev->start_ns, "exit");
		goto forget;
	}
	retain_add(a, ev->tgid, start_ticks, &st, mono_ns() + a->cfg.retention_s * 1000000000ull);
	pr_info("exit %d (%s): %s/perf-%d.map stays for %llus, then goes to %s",
		(int)ev->tgid, p ? p->comm : ev->comm, a->cfg.map_dir, (int)ev->tgid,
		(unsigned long long)a->cfg.retention_s, a->cfg.archive_dir);
forget:
	if (p)
		proctab_remove(&a->procs, ev->tgid);
}

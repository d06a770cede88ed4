/*
 * Catching up. At start (or restart after a crash) and whenever the ring
 * buffer dropped events, /proc and the map directory are the truth: this
 * file turns their difference with the process table into the same fork and
 * exit decisions the events would have caused (policy.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "log.h"
#include "mapfile.h"
#include "mapwatch.h"
#include "perfmapd_event.h"
#include "policy.h"
#include "procfs.h"
#include "scan.h"

struct scan_ctx {
	struct agent *a;
	struct proc_info *fresh;  /* processes the table did not have */
	size_t nfresh, cap;
};

static void event_of(const struct agent *a, const struct proc_info *pi, uint32_t type,
		     struct proc_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->tgid = pi->pid;
	ev->ptgid = pi->ppid;
	ev->start_ns = pi->start_ticks * (1000000000ull / a->ticks_per_sec);
	ev->uid = pi->uid;
	ev->gid = pi->gid;
	ev->mnt_ns = pi->mnt_ns;
	ev->pid_ns = pi->pid_ns;
	memcpy(ev->comm, pi->comm, sizeof(ev->comm));
	ev->from_proc = true;
}

static int visit(pid_t pid, void *arg)
{
	struct scan_ctx *c = arg;
	struct proc_info pi, *nv;
	struct proc *p;

	if (procfs_read(pid, &pi))
		return 0;  /* gone already: its exit is an event, or the next scan's */
	p = proctab_find(&c->a->procs, pid);
	if (p && p->start_ticks == pi.start_ticks) {
		p->flags |= PROC_SEEN;
		return 0;
	}
	if (c->nfresh == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		nv = realloc(c->fresh, c->cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		c->fresh = nv;
	}
	c->fresh[c->nfresh++] = pi;
	return 0;
}

/* A child we never saw fork runs its parent's code if it did not exec since. */
static bool runs_parent_image(pid_t child, pid_t parent)
{
	dev_t cd, pd;
	ino_t ci, pi;

	return !procfs_exe(child, &cd, &ci) && !procfs_exe(parent, &pd, &pi) &&
	       cd == pd && ci == pi;
}

static void exit_unseen(struct agent *a)
{
	struct proc_event ev;
	struct proc *p, *next;
	size_t i;

	for (i = 0; i < a->procs.nbuckets; i++) {
		for (p = a->procs.buckets[i]; p; p = next) {
			next = p->next;
			if (p->flags & PROC_SEEN) {
				p->flags &= ~PROC_SEEN;
				continue;
			}
			memset(&ev, 0, sizeof(ev));
			ev.type = PERFMAPD_EV_EXIT;
			ev.tgid = p->tgid;
			ev.start_ns = p->start_ns;
			ev.mnt_ns = (p->flags & PROC_FOREIGN_NS) ? 0 : a->self_mnt_ns;
			ev.pid_ns = a->self_pid_ns;
			memcpy(ev.comm, p->comm, sizeof(ev.comm));
			ev.from_proc = true;
			policy_exit(a, &ev);
		}
	}
}

int scan_procs(struct agent *a)
{
	struct scan_ctx c = { .a = a };
	struct proc_event ev;
	struct proc *parent;
	struct stat st;
	size_t i;
	int err;

	err = procfs_for_each(visit, &c);
	if (err)
		goto free_fresh;
	exit_unseen(a);
	/* Parents first: all are in the table before any child is copied. */
	for (i = 0; i < c.nfresh; i++) {
		event_of(a, &c.fresh[i], PERFMAPD_EV_FORK, &ev);
		ev.flags = POLICY_TRACK_ONLY;  /* copies below, once all are known */
		policy_fork(a, &ev);
	}
	for (i = 0; i < c.nfresh; i++) {
		const struct proc_info *pi = &c.fresh[i];

		parent = proctab_find(&a->procs, pi->ppid);
		if (!parent || (parent->flags & PROC_FOREIGN_NS) ||
		    pi->mnt_ns != a->self_mnt_ns || pi->pid_ns != a->self_pid_ns)
			continue;
		if (!mapfile_stat(a, pi->pid, &st) || mapfile_stat(a, pi->ppid, &st))
			continue;
		if (!runs_parent_image(pi->pid, pi->ppid))
			continue;
		pr_info("resync: %d (%s) forked from %d unseen; copying", (int)pi->pid,
			pi->comm, (int)pi->ppid);
		event_of(a, pi, PERFMAPD_EV_FORK, &ev);
		ev.pstart_ns = parent->start_ns;
		policy_fork(a, &ev);
	}
free_fresh:
	free(c.fresh);
	return err;
}

static void scan_one_map(struct agent *a, pid_t pid, const struct stat *st)
{
	struct proc *p = proctab_find(&a->procs, pid);
	int64_t mtime, now_real, left;

	if (retain_has(a, pid))
		return;
	if (p) {
		if (p->flags & PROC_FOREIGN_NS)
			return;
		if (mapfile_older_than(st, real_of(a, p->start_ns))) {
			pr_info("scan: %s/perf-%d.map is older than process %d (%s): an earlier pid %d wrote it",
				a->cfg.map_dir, (int)pid, (int)pid, p->comm, (int)pid);
			if (!archive_map(a, pid, 0, ARCHIVE_STALE, st))
				a->stats.stale_moved++;
		}
		return;
	}
	/* Alive but not in the table yet: its fork event is still queued. */
	if (!kill(pid, 0) || errno != ESRCH)
		return;
	/* Nobody holds the pid: its writer exited while we were not watching. */
	mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	now_real = real_of(a, boot_ns());
	left = mtime + (int64_t)a->cfg.retention_s * 1000000000 - now_real;
	retain_add(a, pid, 0, st, mono_ns() + (left > 0 ? (uint64_t)left : 0));
	pr_info("scan: %s/perf-%d.map has no process; kept %llds more, then archived",
		a->cfg.map_dir, (int)pid, (long long)(left > 0 ? left / 1000000000 : 0));
}

int scan_maps(struct agent *a, bool startup)
{
	uint64_t t0 = boot_ns();
	struct dirent *de;
	struct stat st;
	pid_t pid;
	DIR *d;

	d = fdopendir(dup(a->map_dir_fd));
	if (!d)
		return -errno;
	rewinddir(d);
	while ((de = readdir(d))) {
		/* Later, a staged map is the archiving thread's, in hand. */
		if (!strncmp(de->d_name, ARCHIVE_STAGE_PREFIX "perf-",
			     strlen(ARCHIVE_STAGE_PREFIX "perf-"))) {
			if (startup)
				archive_staged(a, de->d_name);
			continue;
		}
		if (!mapfile_pid(de->d_name, &pid))
			continue;
		if (fstatat(a->map_dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		mapwatch__set(a, pid, true);
		scan_one_map(a, pid, &st);
	}
	closedir(d);
	/* Whatever changed since t0 is in the inotify queue: the index is exact. */
	mapwatch__synced(a->watch, t0);
	return 0;
}

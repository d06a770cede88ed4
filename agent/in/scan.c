/*
 * Catching up. At start (or restart after a crash) and whenever the ring
 * buffer dropped events, /proc and the map directory are the truth: this
 * file turns what they show into events for the policy, which decides as it
 * does for the events BPF sends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/mapname.h"
#include "policy/policy.h"
#include "lib/procfs.h"
#include "in/scan.h"

struct found {
	const struct scan_env *env;
	struct proc_info *v;  /* processes the table does not have */
	size_t n, cap;
};

static int visit(pid_t pid, void *arg)
{
	struct found *f = arg;
	struct proc_info pi, *nv;

	if (procfs_read(pid, &pi))
		return 0;  /* gone already: its exit is an event, or the next scan's */
	if (policy__mark(f->env->policy, pid, pi.start_ticks))
		return 0;
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 256;
		nv = realloc(f->v, f->cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		f->v = nv;
	}
	f->v[f->n++] = pi;
	return 0;
}

/* Parents start before their children: in this order each finds its parent known. */
static int by_start(const void *x, const void *y)
{
	const struct proc_info *a = x, *b = y;

	if (a->start_ticks != b->start_ticks)
		return a->start_ticks < b->start_ticks ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static void found_event(const struct scan_env *env, const struct proc_info *pi,
			struct policy_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = POLICY_EV_FOUND;
	if (pi->mnt_ns != env->self_mnt_ns || pi->pid_ns != env->self_pid_ns)
		ev->flags |= POLICY_EVF_FOREIGN;
	ev->pid = pi->pid;
	ev->ppid = pi->ppid;
	ev->start_ticks = pi->start_ticks;
	ev->start = span_of_ticks(pi->start_ticks, clock_tick_ns());
	ev->pstart = SPAN_UNKNOWN;
	ev->at = SPAN_UNKNOWN;
	ev->uid = pi->uid;
	ev->gid = pi->gid;
	ev->ns_pid = pi->ns_pid;
	ev->mnt_ns = pi->mnt_ns;
	log_escape(ev->comm, sizeof(ev->comm), pi->comm, sizeof(pi->comm), LOG_ESC_REVERSIBLE);
}

int scan_procs(const struct scan_env *env)
{
	struct found f = { .env = env };
	struct policy_event ev;
	size_t i;
	int err, pass;

	err = procfs_for_each(visit, &f);
	/* Cut short, the unmarked may be alive: clear the marks, end nobody. */
	policy__sweep(env->policy, !err, clock_boot_ns());
	if (err)
		goto free_found;
	if (f.n)  /* qsort() wants an array, even of none */
		qsort(f.v, f.n, sizeof(*f.v), by_start);
	/*
	 * Processes in other namespaces first: one in a pid namespace sharing
	 * the map directory claims its perf-<ns pid>.map before the host
	 * process at that pid is weighed, which would take it for its own.
	 */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < f.n; i++) {
			found_event(env, &f.v[i], &ev);
			if (!!(ev.flags & POLICY_EVF_FOREIGN) == (pass == 0))
				policy__event(env->policy, &ev, clock_boot_ns());
		}
free_found:
	free(f.v);
	return err;
}

/* A stream over @dirfd that owns a duplicate of it. */
static DIR *open_dir(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

int scan_maps(const struct scan_env *env, bool startup)
{
	struct policy_event ev = { .type = POLICY_EV_MAP, .start = SPAN_UNKNOWN,
				   .at = SPAN_UNKNOWN };
	uint64_t t0 = clock_boot_ns();
	struct dirent *de;
	struct stat st;
	pid_t pid;
	DIR *d;

	d = open_dir(env->map_dir_fd);
	if (!d)
		return -errno;
	rewinddir(d);
	while ((de = readdir(d))) {
		/*
		 * At start, the archive finishes the staged maps its journal
		 * knows and leaves alone any other file named like one; later,
		 * a staged map is the archiving thread's, in hand.
		 */
		if (!strncmp(de->d_name, ARCHIVE_STAGE_PREFIX, strlen(ARCHIVE_STAGE_PREFIX))) {
			if (startup && !env->dry_run)
				archive__finish_staged(env->ar, de->d_name);
			continue;
		}
		if (!map_name_pid(de->d_name, &pid))
			continue;
		if (fstatat(env->map_dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		mapwatch__listed(env->mw, pid, &st);
		env->on_map(env->ctx, pid, true);
		ev.pid = pid;
		policy__event(env->policy, &ev, clock_boot_ns());
	}
	closedir(d);
	/* Whatever changed since t0 is in the inotify queue: the index is exact. */
	mapwatch__synced(env->mw, t0);
	return 0;
}

struct pids {
	pid_t *v;
	size_t n, cap;
	bool short_of_memory;
};

static void collect(pid_t pid, void *arg)
{
	struct pids *p = arg;
	pid_t *nv;

	if (p->n == p->cap) {
		nv = realloc(p->v, (p->cap ? p->cap * 2 : 256) * sizeof(*nv));
		if (!nv) {
			p->short_of_memory = true;
			return;
		}
		p->v = nv;
		p->cap = p->cap ? p->cap * 2 : 256;
	}
	p->v[p->n++] = pid;
}

int scan_index(const struct scan_env *env)
{
	struct policy_event ev = { .type = POLICY_EV_MAP, .start = SPAN_UNKNOWN,
				   .at = SPAN_UNKNOWN };
	struct pids p = { 0 };
	size_t i;

	/* Taken out first: what the policy does may change the index. */
	mapwatch__for_each(env->mw, collect, &p);
	for (i = 0; i < p.n; i++) {
		ev.pid = p.v[i];
		policy__event(env->policy, &ev, clock_boot_ns());
	}
	free(p.v);
	return p.short_of_memory ? -ENOMEM : 0;
}

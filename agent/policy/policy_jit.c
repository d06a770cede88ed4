/*
 * Lost symbols: processes that run JIT code perf cannot name. The kernel
 * tells of anonymous and memfd executable mappings (execmap.c, or
 * /proc/<pid>/maps for what came before); a process with such code and no
 * map at its path once a runtime has had time to make one is said once, by
 * name, with the command that says why (`perfmapctl doctor`).
 */
#include <stdio.h>
#include <string.h>

#include "policy/policy_internal.h"

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ull << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (1 << 20));
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(b + 1023) / 1024);
}

static void watch(struct policy *p, struct proc *pr, uint64_t now_ns)
{
	struct jit_watch *w;

	if (pr->jit.state != JIT_NONE)
		return;
	if (p->jit_len == JIT_QUEUE) {
		p->stats.jit_watch_dropped++;
		pr->jit.state = JIT_UNJUDGED;
		return;
	}
	w = &p->jit_q[(p->jit_head + p->jit_len++) % JIT_QUEUE];
	*w = (struct jit_watch){ pr->tgid, pr->start_ticks, now_ns + JIT_GRACE_NS };
	pr->jit.state = JIT_WATCH;
	pr->jit.due_ns = w->due_ns;
}

void policy__exec_mapping(struct policy *p, pid_t pid, uint64_t addr, uint64_t len, bool memfd,
			  uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, pid);

	p->stats.jit_regions_seen++;
	/* Its fork or exec is read first (loop.c): a process not known is one going away. */
	if (!pr) {
		p->stats.jit_unknown++;
		return;
	}
	pr->jit.regions++;
	if (memfd)
		pr->jit.memfd_bytes += len;
	else
		pr->jit.bytes += len;
	/* perf resolves memfd code as a file: only anonymous regions are the map's to name. */
	if (!memfd)
		p->stats.jit_regions_not_kept += jitregions__add(&pr->jit.kept, &p->procs.jit_regions,
								 addr, len);
	watch(p, pr, now_ns);
}

void policy__exec_mappings_found(struct policy *p, pid_t pid, uint64_t start_ticks,
				 uint32_t regions, uint64_t jit_bytes, uint64_t memfd_bytes,
				 uint64_t now_ns)
{
	struct proc *pr = proctab_find(&p->procs, pid);

	if (!pr || pr->start_ticks != start_ticks || !regions)
		return;
	/* The kernel's reports since are in the sums already; /proc is what is mapped now. */
	if (pr->jit.regions < regions)
		pr->jit.regions = regions;
	if (pr->jit.bytes < jit_bytes)
		pr->jit.bytes = jit_bytes;
	if (pr->jit.memfd_bytes < memfd_bytes)
		pr->jit.memfd_bytes = memfd_bytes;
	watch(p, pr, now_ns);
}

void policy__jit_exec(struct policy *p, struct proc *pr)
{
	/* The old image's mappings are gone with it. */
	jitregions__clear(&pr->jit.kept, &p->procs.jit_regions);
	/* A watch still queued for the old image is not the new one's (jit_due_ns): let go. */
	pr->jit.bytes = pr->jit.memfd_bytes = 0;
	pr->jit.due_ns = 0;
	pr->jit.regions = 0;
	pr->jit.state = JIT_NONE;
	pr->jit.jitdump = false;
}

void policy__jit_named(struct policy *p, struct proc *pr)
{
	if (pr->jit.state != JIT_LOST)
		return;
	pr->jit.state = JIT_NAMED;
	p->stats.lost_symbols_named++;
	pr_info("lost symbols: %d (%s) has a map now: %s/perf-%d.map", (int)pr->tgid, pr->comm,
		p->cfg.map_dir, (int)pr->tgid);
}

static void say_lost(struct policy *p, const struct proc *pr)
{
	char jit[32], memfd[48] = "";

	fmt_bytes(pr->jit.bytes, jit, sizeof(jit));
	if (pr->jit.memfd_bytes) {
		fmt_bytes(pr->jit.memfd_bytes, memfd + 6, sizeof(memfd) - 6);
		memcpy(memfd, " (and ", 6);
		snprintf(memfd + strlen(memfd), sizeof(memfd) - strlen(memfd), " memfd-backed)");
	}
	pr_warn("lost symbols: %d (%s) runs %s of JIT code%s in %u executable regions and has no %s/perf-%d.map: perf shows its JIT frames as hex; 'perfmapctl doctor %d' says why",
		(int)pr->tgid, pr->comm, jit, memfd, pr->jit.regions, p->cfg.map_dir,
		(int)pr->tgid, (int)pr->tgid);
}

/* The grace of @pr is over: has it a map? */
static void judge(struct policy *p, struct proc *pr, uint64_t now_ns)
{
	struct map_info mi;

	/* A container's map is found only when it is mirrored to our path. */
	if ((pr->flags & PROC_FOREIGN_NS) && !(pr->flags & PROC_MIRRORED)) {
		pr->jit.state = JIT_UNJUDGED;
		return;
	}
	if (pr->jit.jitdump || (!look(p, pr->tgid, 0, &mi) && !mi.refused)) {
		pr->jit.state = JIT_NAMED;
		return;
	}
	pr->jit.state = JIT_LOST;
	p->stats.lost_symbols_total++;
	if (budget__take(p->lost_lines, pr->uid, 1, now_ns))
		say_lost(p, pr);
	else
		p->stats.lost_symbols_unsaid++;
}

void policy__jit_tick(struct policy *p, uint64_t now_ns)
{
	struct jit_watch *w;
	struct proc *pr;

	while (p->jit_len) {
		w = &p->jit_q[p->jit_head];
		if (w->due_ns > now_ns)
			break;
		p->jit_head = (p->jit_head + 1) % JIT_QUEUE;
		p->jit_len--;
		pr = proctab_find(&p->procs, w->pid);
		if (!pr || pr->start_ticks != w->start_ticks || pr->jit.state != JIT_WATCH ||
		    pr->jit.due_ns != w->due_ns)
			continue;
		judge(p, pr, now_ns);
	}
}

static void jit_of(const struct proc *pr, struct policy_jit *j)
{
	*j = (struct policy_jit){
		.pid = pr->tgid, .regions = pr->jit.regions, .jit_bytes = pr->jit.bytes,
		.memfd_bytes = pr->jit.memfd_bytes, .lost = pr->jit.state == JIT_LOST,
		.regions_kept = pr->jit.kept.n, .regions_not_kept = pr->jit.kept.not_kept,
	};
	memcpy(j->comm, pr->comm, sizeof(j->comm));
}

void policy__for_each_jit(const struct policy *p, void (*fn)(const struct policy_jit *j, void *ctx),
			  void *ctx, uint64_t *lost)
{
	struct pidmap_node *n, *next;
	struct policy_jit j;
	struct proc *pr;
	size_t i;

	*lost = 0;
	pidmap_for_each(&p->procs.map, i, n, next) {
		pr = proc_of(n);
		if (pr->jit.state == JIT_NONE)
			continue;
		if (pr->jit.state == JIT_LOST)
			(*lost)++;
		jit_of(pr, &j);
		if (fn)
			fn(&j, ctx);
	}
}

bool policy__jit_of(const struct policy *p, pid_t pid, struct policy_jit *j)
{
	const struct proc *pr = proctab_find(&p->procs, pid);

	if (!pr || pr->jit.state == JIT_NONE)
		return false;
	jit_of(pr, j);
	return true;
}

void policy__for_each_jit_region(const struct policy *p, pid_t pid,
				 void (*fn)(uint64_t addr, uint64_t len, void *ctx), void *ctx)
{
	const struct proc *pr = proctab_find(&p->procs, pid);
	uint32_t i;

	for (i = 0; pr && i < pr->jit.kept.n; i++)
		fn(pr->jit.kept.v[i].addr, pr->jit.kept.v[i].len, ctx);
}

size_t policy__jit_regions_kept(const struct policy *p)
{
	return p->procs.jit_regions.kept;
}

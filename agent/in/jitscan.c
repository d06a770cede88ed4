/*
 * What the kernel's mmap reports leave out, /proc/<pid>/maps fills: the
 * code mapped before the agent started, after records were lost, or (with
 * no perf events) all of it. A pass reads each known process's mappings, a
 * bounded number a tick, and tells the policy what JIT code each has now.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "lib/clock.h"
#include "in/jitscan.h"
#include "perfmap_tools.h"
#include "lib/procfs.h"
#include "policy/policy.h"

struct jitscan {
	pid_t *pids;
	size_t n, next, cap;
	bool periodic;
	jitscan_marker_fn marker;
	void *ctx;
	bool again;           /* a pass was asked for while one ran: another follows it */
	uint64_t last_pass_ns;
	uint64_t reads, passes;
};

struct jitscan *jitscan__new(bool periodic, jitscan_marker_fn marker, void *ctx)
{
	struct jitscan *js = calloc(1, sizeof(*js));

	if (!js)
		return NULL;
	js->periodic = periodic;
	js->marker = marker;
	js->ctx = ctx;
	return js;
}

void jitscan__free(struct jitscan *js)
{
	if (!js)
		return;
	free(js->pids);
	free(js);
}

static void add_pid(pid_t pid, void *ctx)
{
	struct jitscan *js = ctx;
	pid_t *np;

	if (js->n == js->cap) {
		np = realloc(js->pids, (js->cap ? js->cap * 2 : 1024) * sizeof(*np));
		if (!np)
			return;  /* a shorter pass; the next one may do better */
		js->pids = np;
		js->cap = js->cap ? js->cap * 2 : 1024;
	}
	js->pids[js->n++] = pid;
}

void jitscan__pass(struct jitscan *js, const struct policy *p)
{
	/*
	 * Records lost again and again (anyone can map executable pages by the
	 * million) must not restart a pass forever: it runs to its end first.
	 */
	if (js->next < js->n) {
		js->again = true;
		return;
	}
	js->again = false;
	js->n = js->next = 0;
	policy__for_each_pid(p, add_pid, js);
	js->passes++;
}

/* The JIT code of @pid now, to the policy. */
static void read_one(struct jitscan *js, struct policy *p, pid_t pid, uint64_t now_ns)
{
	struct perfmap_vmas vs = { 0 };
	uint64_t jit = 0, memfd = 0;
	struct proc_info pi;
	uint32_t regions = 0;
	size_t i;

	if (procfs_read(pid, &pi) || perfmap__vmas_read(pid, &vs))
		goto release;
	js->reads++;
	for (i = 0; i < vs.n; i++) {
		if (!(vs.v[i].prot & PROT_EXEC))
			continue;
		if (vs.v[i].kind == PERFMAP_VMA_ANON)
			jit += vs.v[i].hi - vs.v[i].lo;
		else if (perfmap__vma_is_jit_memfd(&vs.v[i]))  /* as execmap.c */
			memfd += vs.v[i].hi - vs.v[i].lo;
		else
			continue;
		regions++;
	}
	/* Still the process whose stat was read: its mappings are its own. */
	if (regions && procfs_is(pid, pi.start_ticks))
		policy__exec_mappings_found(p, pid, pi.start_ticks, regions, jit, memfd, now_ns);
	/* A dump mapped before the agent started, or whose report was lost. */
	if (vs.marker[0] && js->marker)
		js->marker(js->ctx, pid, vs.marker, vs.marker_ino);
release:
	perfmap__vmas_release(&vs);
}

void jitscan__tick(struct jitscan *js, struct policy *p, uint64_t now_ns)
{
	uint64_t t0 = clock_mono_ns();
	unsigned int done = 0;

	if (js->periodic && js->next == js->n && now_ns - js->last_pass_ns >= JITSCAN_PERIOD_NS) {
		js->last_pass_ns = now_ns;
		jitscan__pass(js, p);
	}
	while (js->next < js->n && done++ < JITSCAN_PER_TICK &&
	       clock_mono_ns() - t0 < JITSCAN_TICK_NS)
		read_one(js, p, js->pids[js->next++], now_ns);
	if (js->again && js->next == js->n)
		jitscan__pass(js, p);
}

uint64_t jitscan__reads(const struct jitscan *js)
{
	return js->reads;
}

uint64_t jitscan__passes(const struct jitscan *js)
{
	return js->passes;
}

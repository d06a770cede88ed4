/* The BPF program's event record turned into a policy event, without system calls. */
#include <errno.h>
#include <string.h>

#include "in/evrecord.h"
#include "lib/log.h"
#include "policy/policy.h"

int evrecord__decode(const void *data, size_t len, const struct evrecord_ctx *ctx,
		     struct perfmapd_event *rec, struct policy_event *pe)
{
	struct perfmapd_event e;

	/* Copied, not cast: a record longer than ours (a newer BPF side) keeps our prefix. */
	if (len < sizeof(e) || !ctx->tick_ns)
		return -EINVAL;
	memcpy(&e, data, sizeof(e));
	if (e.type < PERFMAPD_EV_FORK || e.type > PERFMAPD_EV_EXIT || !e.tgid ||
	    e.tgid >= EVRECORD_PID_MAX || e.ptgid >= EVRECORD_PID_MAX)
		return -EINVAL;
	memset(pe, 0, sizeof(*pe));
	pe->type = e.type;  /* POLICY_EV_FORK, _EXEC and _EXIT have the same values */
	if (e.flags & PERFMAPD_EVF_VFORK)
		pe->flags |= POLICY_EVF_VFORK;
	/* Another mount or pid namespace: its /tmp and its pids are not the map directory's. */
	if (e.mnt_ns != ctx->self_mnt_ns || e.pid_ns != ctx->self_pid_ns)
		pe->flags |= POLICY_EVF_FOREIGN;
	pe->pid = (pid_t)e.tgid;
	pe->ppid = (pid_t)e.ptgid;
	pe->start_ticks = e.start_ns / ctx->tick_ns;
	pe->start = span_at(e.start_ns);
	pe->pstart = span_at(e.pstart_ns);
	pe->at = span_at(e.ts_ns);
	pe->uid = e.uid;
	pe->gid = e.gid;
	pe->ns_pid = e.ns_tgid < EVRECORD_PID_MAX ? (pid_t)e.ns_tgid : 0;
	pe->mnt_ns = e.mnt_ns;
	log_escape(pe->comm, sizeof(pe->comm), e.comm, sizeof(e.comm), LOG_ESC_REVERSIBLE);
	*rec = e;
	return 0;
}

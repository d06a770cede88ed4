// SPDX-License-Identifier: GPL-2.0
/* perfmapd's kernel side: process fork, exec and exit, sent to the agent over a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "perfmapd_event.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);  /* resized by the agent before load */
} events SEC(".maps");

/*
 * Pids with a map at their path, kept by the agent. Only a fork or an
 * exec about them needs the agent at once (a fork of a map holder, a pid
 * reused under a stale map, an old image's map); the rest wait in the ring
 * buffer for its next wake-up, at most a timer tick, which saves a context
 * switch per event on a busy host. Other execs: on_exec.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u8);
} mapped SEC(".maps");

/*
 * When each process last exec'd (CLOCK_BOOTTIME), by tgid. The agent reads
 * it before writing a child's copy: a child that exec'd since its fork runs
 * none of its parent's code, and its path may already hold the new image's
 * map. Recent entries are what matter; LRU drops old ones.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u64);
} execs SEC(".maps");

static __always_inline bool has_map(__u32 pid)
{
	return bpf_map_lookup_elem(&mapped, &pid) != NULL;
}

/* Events lost because the ring buffer was full; the agent resyncs when it grows. */
__u64 dropped = 0;

/* Set by the agent before load: the shortest time between two wake-ups for execs (on_exec). */
const volatile __u64 exec_wakeup_ns = 10000000;
/* When an exec last woke the agent; racing CPUs may both wake it, which is harmless. */
__u64 exec_woke_ns = 0;

/*
 * R(direct, src, a, b, ...) reads the field chain src->a->b. tp_btf programs
 * get BTF-typed pointers and read them with plain loads, which the verifier
 * makes fault-safe; raw_tp programs have untyped pointers and must call
 * bpf_probe_read_kernel(), about 80 ns a call on a VM. Every function below
 * is inlined into each program with @direct a constant, so each program
 * keeps only its own kind of read.
 */
#define R_ARROW1(s, a) (s)->a
#define R_ARROW2(s, a, b) (s)->a->b
#define R_ARROW3(s, a, b, c) (s)->a->b->c
#define R_PICK(_1, _2, _3, n, ...) n
#define R_ARROW(s, ...) R_PICK(__VA_ARGS__, R_ARROW3, R_ARROW2, R_ARROW1)(s, __VA_ARGS__)
#define R(direct, s, ...) ((direct) ? R_ARROW(s, __VA_ARGS__) : BPF_CORE_READ(s, __VA_ARGS__))

/* start_boottime since 5.5; the ring buffer and the boot clock need 5.8 anyway. */
static __always_inline __u64 task_start_ns(struct task_struct *t, bool direct)
{
	return R(direct, t, start_boottime);
}

/*
 * The pid namespace the task lives in: the last level of its struct pid.
 * The level indexes an array, which only a probe read may do; level 0 (the
 * host's namespace, most processes) is a constant index, read directly.
 */
static __always_inline void task_ns(struct task_struct *t, struct perfmapd_event *e, bool direct)
{
	struct pid *pid = R(direct, t, group_leader, thread_pid);
	unsigned int level = R(direct, pid, level);
	struct upid up;

	if (direct && level == 0) {
		e->pid_ns = pid->numbers[0].ns->ns.inum;
		e->ns_tgid = 0;  /* the host's namespace: the same pid, set by emit() */
	} else {
		bpf_core_read(&up, sizeof(up), &pid->numbers[level]);
		e->pid_ns = BPF_CORE_READ(up.ns, ns.inum);
		e->ns_tgid = up.nr;
	}
	e->mnt_ns = R(direct, t, nsproxy, mnt_ns, ns.inum);
	e->pad = 0;
}

static __always_inline int emit(struct task_struct *t, __u32 type, __u32 flags,
				struct task_struct *parent, bool urgent, __u64 now, bool direct)
{
	struct task_struct *leader = R(direct, t, group_leader);
	struct perfmapd_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&dropped, 1);
		return 0;
	}
	e->type = type;
	e->flags = flags;
	e->ts_ns = now;
	e->tgid = R(direct, t, tgid);
	e->uid = R(direct, t, cred, euid.val);
	e->gid = R(direct, t, cred, egid.val);
	e->start_ns = task_start_ns(leader, direct);
	task_ns(t, e, direct);
	/*
	 * Set from the record, not the task: the compiler would otherwise merge
	 * this load with task_ns()'s from the stack, which the verifier refuses.
	 */
	if (!e->ns_tgid)
		e->ns_tgid = e->tgid;
	if (parent) {
		e->ptgid = R(direct, parent, tgid);
		e->pstart_ns = task_start_ns(R(direct, parent, group_leader), direct);
	} else {
		e->ptgid = 0;
		e->pstart_ns = 0;
	}
	/* The agent ends the name itself: a rename racing with this copy only garbles it. */
	if (direct)
		__builtin_memcpy(e->comm, leader->comm, sizeof(e->comm));
	else
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), &leader->comm);
	/*
	 * Forced: the default wakes the agent only when it has read everything
	 * before, which is never the case behind events left without a wake-up.
	 */
	bpf_ringbuf_submit(e, urgent ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child,
				   bool direct)
{
	__u32 flags = 0;

	/* A new thread joins its creator's group: not a new process. */
	if (R(direct, child, pid) != R(direct, child, tgid))
		return 0;
	if (R(direct, child, vfork_done))
		flags |= PERFMAPD_EVF_VFORK;
	return emit(child, PERFMAPD_EV_FORK, flags, parent,
		    has_map(R(direct, parent, tgid)) || has_map(R(direct, child, tgid)),
		    bpf_ktime_get_boot_ns(), direct);
}

/*
 * An exec wakes the agent at once when the pid has a map (the old image's,
 * to be moved before the new image can append to it), and otherwise at most
 * once per exec_wakeup_ns: read at once, an exec is judged before the new
 * image's runtime has made its map, which then needs no judging at all. A
 * wake-up costs the exec'ing task a cross-CPU wake (about 50 us on a VM),
 * which every exec of an exec-heavy host must not pay.
 */
static __always_inline int on_exec(struct task_struct *t, bool direct)
{
	__u32 tgid = R(direct, t, tgid);
	__u64 now = bpf_ktime_get_boot_ns();
	bool mapped = has_map(tgid), urgent = mapped;

	/* The same time as the event's: the agent compares the two. */
	bpf_map_update_elem(&execs, &tgid, &now, BPF_ANY);
	if (!urgent && now - exec_woke_ns >= exec_wakeup_ns) {
		exec_woke_ns = now;
		urgent = true;
	}
	return emit(t, PERFMAPD_EV_EXEC, mapped ? PERFMAPD_EVF_MAPPED : 0, NULL, urgent, now,
		    direct);
}

/*
 * The process is gone when its last thread exits, not when the thread with
 * pid == tgid does (the leader may exit first). 6.16 passes group_dead;
 * before that, do_exit() has already counted this thread out of signal->live.
 */
static __always_inline int on_exit(struct task_struct *t, bool group_dead, bool has_arg,
				   bool direct)
{
	if (!has_arg)
		group_dead = R(direct, t, signal, live.counter) == 0;
	if (!group_dead)
		return 0;
	/* A map outlives its process by the retention: its exit is never urgent. */
	return emit(t, PERFMAPD_EV_EXIT, 0, NULL, false, bpf_ktime_get_boot_ns(), direct);
}

#define HAS_GROUP_DEAD \
	bpf_core_field_exists(struct trace_event_raw_sched_process_exit, group_dead)

/* BTF-typed tracepoints: direct reads, no tracefs. Preferred. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(btf_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child, true);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(btf_exec, struct task_struct *p)
{
	return on_exec(p, true);
}

SEC("tp_btf/sched_process_exit")
int btf_exit(unsigned long long *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	bool has = HAS_GROUP_DEAD;

	return on_exit(p, has ? (bool)ctx[1] : false, has, true);
}

/* Raw tracepoints: the fallback where tp_btf does not load; no tracefs either. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child, false);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_exec, struct task_struct *p)
{
	return on_exec(p, false);
}

SEC("raw_tp/sched_process_exit")
int raw_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (void *)ctx->args[0];
	bool has = HAS_GROUP_DEAD;

	return on_exit(p, has ? (bool)ctx->args[1] : false, has, false);
}

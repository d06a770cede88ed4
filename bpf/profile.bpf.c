// SPDX-License-Identifier: GPL-2.0
/*
 * perfmapctl profile's kernel side: a CPU-clock perf event per CPU runs
 * on_sample(), which counts (process, thread, kernel stack, user stack)
 * in a hash map whose key holds the stacks. Nothing is sent per sample:
 * user space reads the counts when the profile ends. Forks of profiled processes are followed, and
 * their forks, execs and exits are sent so that their mappings are read
 * while they exist. The whole host (-a) forks too often for that: there a
 * process is told of at its first sample (and its image's), and its exit
 * only if it was, so that others' churn costs user space nothing.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "profile_event.h"


char LICENSE[] SEC("license") = "GPL";

/* Set before load. */
const volatile bool all_tasks = false;     /* -a: every process but the idle task */
const volatile bool follow_forks = true;   /* children of targets become targets */
const volatile bool kernel_stacks = true;

/* The processes profiled (tgid -> 1); user space adds the first ones, forks add theirs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/*
 * How many times each profiled process exec'd since the profile began
 * (its start time with it: a pid reused is another process). A sample
 * carries its process's number, so that the old image's samples are named
 * with the old image's mappings.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct profile_image);
} images SEC(".maps");

/*
 * -a: the process image user space was last told of, at its first sample.
 * An entry evicted is told of again, which user space takes as a no-op.
 */
struct told {
	__u64 start_ns;
	__u32 image;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct told);
} told SEC(".maps");

/* The key being made, per CPU: two kilobytes do not fit the program's stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct profile_key);
} scratch SEC(".maps");

/*
 * Two count maps, one per period's parity: a flush turns `period` over and
 * reads the other at leisure, so that no sample falls between its reading
 * and its clearing (--every).
 */
struct counts_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 14);          /* resized by user space before load */
	__uint(map_flags, BPF_F_NO_PREALLOC);  /* memory for the stacks seen, not for the bound */
	__type(key, struct profile_key);
	__type(value, __u64);
};
struct counts_map counts0 SEC(".maps");
struct counts_map counts1 SEC(".maps");

/* Which of the two counts now: user space turns it over at each flush. */
__u32 period = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} events SEC(".maps");

/*
 * Samples not counted (the counts map was full); process events the ring
 * buffer had no room for; children not followed (the targets map was full).
 */
__u64 lost_keys = 0;
/* Samples of profiled processes the kernel took: counted in a map, or in lost_keys. */
__u64 taken = 0;
__u64 lost_events = 0;
__u64 lost_targets = 0;

static __always_inline bool targeted(__u32 tgid)
{
	return all_tasks || bpf_map_lookup_elem(&targets, &tgid);
}

static __always_inline void count(void *counts, struct profile_key *key)
{
	__u64 one = 1, *n = bpf_map_lookup_elem(counts, key);

	if (n) {
		__sync_fetch_and_add(n, 1);
	} else if (bpf_map_update_elem(counts, key, &one, BPF_NOEXIST)) {
		/* Another CPU made it first, or the map is full. */
		n = bpf_map_lookup_elem(counts, key);
		if (n)
			__sync_fetch_and_add(n, 1);
		else
			__sync_fetch_and_add(&lost_keys, 1);
	}
}

static __always_inline bool send(__u32 type, struct task_struct *task, __u32 ppid, __u32 image,
				 __u64 flags)
{
	struct profile_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return false;
	}
	e->type = type;
	e->tgid = BPF_CORE_READ(task, tgid);
	e->ppid = ppid;
	e->image = image;
	e->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	e->at_ns = bpf_ktime_get_boot_ns();
	bpf_ringbuf_submit(e, flags);
	return true;
}

/*
 * -a: the first sample of a process image not told of yet says so, with
 * its parent (a child forked after the start names its code with the
 * parent's mappings until read). Told is marked only once sent: a sample
 * after a full ring buffer tries again.
 */
static __always_inline void tell_sampled(struct task_struct *task, const struct profile_key *key)
{
	struct told *t = bpf_map_lookup_elem(&told, &key->tgid), now = {};

	if (t && t->start_ns == key->start_ns && t->image == key->image)
		return;
	if (!send(PROFILE_EV_SAMPLED, task, BPF_CORE_READ(task, group_leader, real_parent, tgid),
		  key->image, 0))
		return;
	now.start_ns = key->start_ns;
	now.image = key->image;
	bpf_map_update_elem(&told, &key->tgid, &now, BPF_ANY);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct profile_key *key;
	__u32 zero = 0, tgid = id >> 32;
	struct profile_image *im;
	long len;

	/* The idle task is no process; the rest only when asked for. */
	if (!tgid || !targeted(tgid))
		return 0;
	__sync_fetch_and_add(&taken, 1);
	key = bpf_map_lookup_elem(&scratch, &zero);
	if (!key)
		return 0;
	key->tgid = tgid;
	key->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	im = bpf_map_lookup_elem(&images, &tgid);
	key->image = im && im->start_ns == key->start_ns ? im->n : 0;
	bpf_get_current_comm(key->comm, sizeof(key->comm));
	/* Each helper zeroes what it leaves of the buffer, on error all of it: the keys compare whole. */
	len = kernel_stacks ? bpf_get_stack(ctx, key->kips, sizeof(key->kips), 0) : 0;
	if (!kernel_stacks)
		__builtin_memset(key->kips, 0, sizeof(key->kips));
	key->nkernel = len > 0 ? len / sizeof(__u64) : 0;
	/*
	 * In an exec, from the new image's registers to the count on_exec()
	 * keeps (this very program may interrupt it), the user frames may be
	 * the new image's while the sample is counted as the old one's: none
	 * then. The time is the kernel's, in execve, and its stack says so.
	 */
	if (BPF_CORE_READ_BITFIELD_PROBED(task, in_execve)) {
		__builtin_memset(key->uips, 0, sizeof(key->uips));
		len = 0;
	} else {
		len = bpf_get_stack(ctx, key->uips, sizeof(key->uips), BPF_F_USER_STACK);
	}
	key->nuser = len > 0 ? len / sizeof(__u64) : 0;
	/* Each call with its own map: the verifier wants one map per call site. */
	if (period & 1)
		count(&counts1, key);
	else
		count(&counts0, key);
	if (all_tasks)
		tell_sampled(task, key);
	/* 0: the perf event writes no sample record of its own. */
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	/* A new thread is no new process; -a tells of a child at its first sample. */
	if (all_tasks || !follow_forks || child->pid != ctgid || !targeted(ptgid))
		return 0;
	if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY))
		__sync_fetch_and_add(&lost_targets, 1);
	send(PROFILE_EV_FORK, child, ptgid, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct profile_image *im, next = {};

	if (!targeted(tgid))
		return 0;
	next.start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	im = bpf_map_lookup_elem(&images, &tgid);
	next.n = im && im->start_ns == next.start_ns ? im->n + 1 : 1;
	bpf_map_update_elem(&images, &tgid, &next, BPF_ANY);
	/* -a: the new image is told of at its first sample. */
	if (!all_tasks)
		send(PROFILE_EV_EXEC, p, 0, next.n, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	struct told *t;

	/* The last thread: the process ends. */
	if (BPF_CORE_READ(p, signal, live.counter) || !targeted(tgid))
		return 0;
	/*
	 * Its count of execs stays (the map is LRU, and a later process at the
	 * pid has another start time): a sample taken from here to its end,
	 * this program's own wakeup among them, is still its image's. Deleted
	 * here, such a sample was counted as image 0's, whose mappings hold
	 * none of its code.
	 */
	if (all_tasks) {
		/* Only a process user space was told of has anything to read at its exit. */
		t = bpf_map_lookup_elem(&told, &tgid);
		if (!t || t->start_ns != BPF_CORE_READ(p, group_leader, start_boottime))
			return 0;
		bpf_map_delete_elem(&told, &tgid);
		/*
		 * No wakeup: its map is kept at its path for the retention, and
		 * user space reads the ring at least every poll; a wakeup is an
		 * interrupt to this CPU, a VM's exit to its host.
		 */
		send(PROFILE_EV_EXIT, p, 0, 0, BPF_RB_NO_WAKEUP);
		return 0;
	}
	send(PROFILE_EV_EXIT, p, 0, 0, 0);
	/* Its pid may go to another process, maybe another user's: not profiled for it. */
	bpf_map_delete_elem(&targets, &tgid);
	return 0;
}

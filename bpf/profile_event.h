/* What perfmapctl profile's BPF side (profile.bpf.c) and libperfmap-profile share. */
#ifndef PERFMAP_PROFILE_EVENT_H
#define PERFMAP_PROFILE_EVENT_H

#define PROFILE_DEPTH 127          /* frames kept of a user stack, the kernel's PERF_MAX_STACK_DEPTH */
#define PROFILE_KDEPTH 64          /* of a kernel stack: deeper ones are interrupts on interrupts */
#define PROFILE_COMM_LEN 16

/*
 * One distinct (process, thread name, kernel stack, user stack): the unit
 * of counting, in the kernel, so that no sample wakes user space. The
 * stacks are in the key itself, leaf first, zero past their last frame:
 * no stack map, whose buckets collide and drop stacks long before it is
 * full, and memory only for the stacks seen (the map is not preallocated).
 */
struct profile_key {
	__u32 tgid;
	__u32 nkernel;             /* frames of @kips */
	__u32 nuser;               /* frames of @uips */
	__u32 image;               /* execs of the process since the profile began: which image ran */
	__u64 start_ns;            /* the group leader's start_boottime: (tgid, start) is the process */
	char comm[PROFILE_COMM_LEN];
	__u64 kips[PROFILE_KDEPTH];
	__u64 uips[PROFILE_DEPTH];
};

/* The images map's value: execs of a process (its start with it: a pid reused is another). */
struct profile_image {
	__u64 start_ns;
	__u32 n;
	__u32 pad;
};

enum profile_event_type {
	PROFILE_EV_FORK = 1,
	PROFILE_EV_EXEC = 2,
	PROFILE_EV_EXIT = 3,
	PROFILE_EV_SAMPLED = 4,    /* -a: a process image's first sample (@ppid its parent) */
};

/* A process event about a profiled process: user space reads its mappings while they are there. */
struct profile_event {
	__u32 type;
	__u32 tgid;
	__u32 ppid;
	__u32 image;               /* after an exec, the new image's number */
	__u64 start_ns;
	__u64 at_ns;               /* CLOCK_BOOTTIME */
};

#endif /* PERFMAP_PROFILE_EVENT_H */

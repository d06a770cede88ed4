/* The event record the BPF program sends to perfmapd: shared by both sides. */
#ifndef PERFMAPD_EVENT_H
#define PERFMAPD_EVENT_H

#define PERFMAPD_COMM_LEN 16

enum perfmapd_event_type {
	PERFMAPD_EV_FORK = 1,  /* a new process (thread group), not a thread */
	PERFMAPD_EV_EXEC = 2,  /* a process replaced its image */
	PERFMAPD_EV_EXIT = 3,  /* the last thread of a process exited */
};

enum perfmapd_event_flags {
	PERFMAPD_EVF_VFORK = 1 << 0,  /* fork: vfork()/CLONE_VFORK child, execs or exits next */
	PERFMAPD_EVF_MAPPED = 1 << 1, /* the agent had told BPF this pid has a map */
};

/*
 * Fixed-size and naturally aligned, so the layout is the same for the BPF
 * target and the host compiler. Times are CLOCK_BOOTTIME nanoseconds: the
 * group leader's start_boottime, what /proc/<pid>/stat field 22 shows in ticks.
 */
struct perfmapd_event {
	__u32 type;
	__u32 flags;
	__u32 tgid;        /* as the host (initial pid namespace) sees it */
	__u32 ptgid;       /* fork: the parent process */
	__u32 uid;         /* effective uid and gid: they own the files it creates */
	__u32 gid;
	__u32 mnt_ns;      /* mount and pid namespace inode numbers */
	__u32 pid_ns;
	__u64 start_ns;    /* the process's start time */
	__u64 pstart_ns;   /* fork: the parent's start time */
	__u64 ts_ns;       /* when it happened (the agent may read it late) */
	char comm[PERFMAPD_COMM_LEN];
	__u32 ns_tgid;     /* as its own (innermost) pid namespace sees it: its perf-<pid>.map there */
	__u32 pad;
};

#endif /* PERFMAPD_EVENT_H */

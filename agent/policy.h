/* What perfmapd does on each process event: the policy, in one place. */
#ifndef PERFMAPD_POLICY_H
#define PERFMAPD_POLICY_H

#include <stdint.h>
#include <sys/types.h>

struct agent;

/* proc_event.flags beside PERFMAPD_EVF_*: record the process, copy nothing. */
#define POLICY_TRACK_ONLY (1u << 31)

/* An event from BPF, or one a /proc resync inferred. */
struct proc_event {
	uint32_t type;            /* PERFMAPD_EV_* */
	uint32_t flags;           /* PERFMAPD_EVF_* */
	pid_t tgid;
	pid_t ptgid;
	uint64_t start_ns;        /* CLOCK_BOOTTIME */
	uint64_t pstart_ns;
	uint64_t ts_ns;           /* CLOCK_BOOTTIME of the event itself; 0 unknown */
	uid_t uid;
	gid_t gid;
	uint64_t mnt_ns;
	uint64_t pid_ns;
	char comm[16];
	bool from_proc;           /* times are whole clock ticks */
};

void policy_fork(struct agent *a, const struct proc_event *ev);
void policy_exec(struct agent *a, const struct proc_event *ev);
void policy_exit(struct agent *a, const struct proc_event *ev);
/* Retry copies that found the child's map in the middle of a line. */
void policy_retry(struct agent *a);

uint64_t ticks_of(const struct agent *a, uint64_t boot_ns);
int64_t real_of(const struct agent *a, uint64_t boot_ns);

#endif /* PERFMAPD_POLICY_H */

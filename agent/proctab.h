/* The process table: every live process perfmapd knows, keyed by (tgid, start time). */
#ifndef PERFMAPD_PROCTAB_H
#define PERFMAPD_PROCTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum proc_flags {
	PROC_FOREIGN_NS = 1 << 0,  /* another mount or pid namespace: its /tmp is not ours */
	PROC_COPIED = 1 << 1,      /* perfmapd wrote the parent's entries into its map */
	PROC_SEEN = 1 << 2,        /* mark for a /proc resync */
};

struct proc {
	struct proc *next;         /* hash chain */
	pid_t tgid;
	pid_t ppid;
	uint64_t start_ticks;      /* /proc/<pid>/stat field 22: the identity */
	uint64_t start_ns;         /* CLOCK_BOOTTIME ns; ticks * 10^9/HZ when from /proc */
	uid_t uid;
	gid_t gid;
	uint32_t flags;
	/* The map as perfmapd left it after a copy: was it written since? */
	uint64_t copy_size;
	int64_t copy_mtime_ns;
	/* A copy waiting for the child's runtime to finish a line. */
	unsigned int retries;
	uint64_t retry_pstart_ns;
	char comm[16];
};

struct proctab {
	struct proc **buckets;
	size_t nbuckets;
	size_t count;
};

int proctab_init(struct proctab *t);
void proctab_fini(struct proctab *t);
struct proc *proctab_find(struct proctab *t, pid_t tgid);
/* Insert or reuse the entry of @tgid; a different start time resets it. */
struct proc *proctab_get(struct proctab *t, pid_t tgid, uint64_t start_ticks, bool *fresh);
void proctab_remove(struct proctab *t, pid_t tgid);

#define proctab_for_each(t, i, p) \
	for ((i) = 0; (i) < (t)->nbuckets; (i)++) \
		for ((p) = (t)->buckets[i]; (p); (p) = (p)->next)

#endif /* PERFMAPD_PROCTAB_H */

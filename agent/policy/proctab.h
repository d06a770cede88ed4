/* The process table: every live process perfmapd knows, keyed by (tgid, start time). */
#ifndef PERFMAPD_PROCTAB_H
#define PERFMAPD_PROCTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/pidmap.h"
#include "policy/jitregions.h"

enum proc_flags {
	PROC_FOREIGN_NS = 1 << 0,  /* another mount or pid namespace, its map not mirrored: left alone */
	PROC_COPIED = 1 << 1,      /* @copy: the map perfmapd made or appended to for it */
	PROC_SEEN = 1 << 2,        /* mark for a /proc scan */
	PROC_NS_OURS = 1 << 3,     /* another namespace, but its map is at our path: a host process */
	PROC_MIRRORED = 1 << 4,    /* another namespace: its map is mirrored to our path (mirror.c) */
};

/* What the copy of its parent's entries into its map left and does (policy_copy.c). */
struct proc_copy {
	/* The child's map as perfmapd's copy left it: was it written since? */
	dev_t dev;
	ino_t ino;
	uint64_t size;
	/* A copy in the worker (policy__copy_done): its ticket (0: none), what it does, what it was charged. */
	uint64_t ticket;
	uint64_t charged;
	int op;
	/* A copy waiting for the child's runtime to finish a line. */
	uint64_t retry_until_ns;   /* CLOCK_BOOTTIME; 0: none waiting */
	struct span retry_pstart;
};

/* What was judged of the maps at its path, not judged again while they stay (policy_judge.c). */
struct proc_judged {
	/* The map last judged its own. */
	dev_t own_dev;
	ino_t own_ino;
	/* The map last judged not its own (an old image's), at this size. */
	dev_t not_own_dev;
	ino_t not_own_ino;
	uint64_t not_own_size;
};

/* Its image's JIT code as the kernel reported it (policy_jit.c): mapped, never unmapped. */
struct proc_jit {
	uint64_t bytes;            /* anonymous executable: what perf-<pid>.map names */
	uint64_t memfd_bytes;      /* memfd-backed executable: perf never looks these up in a map */
	uint32_t regions;
	uint8_t state;             /* enum jit_state */
	bool jitdump;              /* it produces a jitdump: its code is described there */
	uint64_t due_ns;           /* its watch's: one queued for an earlier image is not it */
	struct jitregions kept;    /* its anonymous regions, as the kernel's reports made them */
};

/* Where it runs when not in the agent's namespaces (policy_ns.c). */
struct proc_ns {
	pid_t pid;                 /* its pid in its own pid namespace (0: not known) */
	uint64_t mnt_ns;           /* the mount namespace it was placed in */
};

/* A process the policy tracks: who it is, and a part for each file of the policy that decides for it. */
struct proc {
	struct pidmap_node node;   /* keyed by tgid */
	pid_t tgid;
	pid_t ppid;
	uint64_t start_ticks;      /* /proc/<pid>/stat field 22: the identity */
	struct span start;         /* CLOCK_BOOTTIME; a whole tick when read from /proc */
	struct span image;         /* when its image began: its start, or its last exec */
	uid_t uid;
	gid_t gid;
	uint32_t flags;
	char comm[LOG_COMM_LEN];   /* escaped, as the event had it */
	struct proc_copy copy;
	struct proc_judged judged;
	struct proc_jit jit;
	struct proc_ns ns;
};

/* Does a process run JIT code without a map? Judged once a while after its first region. */
enum jit_state {
	JIT_NONE,       /* no JIT code seen */
	JIT_WATCH,      /* some: judged when the grace is over */
	JIT_NAMED,      /* a map was at its path */
	JIT_LOST,       /* none: its JIT frames are hex to perf (said once) */
	JIT_UNJUDGED,   /* in another namespace, its map not mirrored here: cannot tell */
};

struct proctab {
	struct pidmap map;
	struct jitregions_pool jit_regions;   /* every process's jit.kept */
};

int proctab_init(struct proctab *t);
void proctab_fini(struct proctab *t);
struct proc *proctab_find(const struct proctab *t, pid_t tgid);
/* Insert or reuse the entry of @tgid; a different start time resets it (its regions freed too). */
struct proc *proctab_get(struct proctab *t, pid_t tgid, uint64_t start_ticks, bool *fresh);
void proctab_remove(struct proctab *t, pid_t tgid);
size_t proctab_count(const struct proctab *t);

/* The process a node of the table's map is; iterate with pidmap_for_each(&t->map, ...). */
static inline struct proc *proc_of(struct pidmap_node *n)
{
	return (struct proc *)n;
}

#endif /* PERFMAPD_PROCTAB_H */

/*
 * The policy's insides, shared by policy.c (the events), policy_judge.c (who
 * wrote a map) and policy_copy.c (the parent's entries for a child). Only
 * policy*.c include this file; the rest of the agent sees policy.h.
 */
#ifndef PERFMAPD_POLICY_INTERNAL_H
#define PERFMAPD_POLICY_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/budget.h"
#include "policy/policy.h"
#include "policy/proctab.h"
#include "policy/retention.h"

/*
 * A copy that fails for the system's sake (a full filesystem, no file
 * descriptors left) fails alike for every fork until the cause goes away:
 * it is said once, counted every time, and its end is said.
 */
struct copy_fault {
	int err;          /* 0: the last copy worked */
	const char *why;
	uint64_t quiet;   /* failures alike since the one said */
};

/*
 * A map made at a pid no process holds is weighed at the next tick, at most
 * ORPHAN_PER_TICK a tick: such a map waits for the retention anyway, and one
 * made and deleted meanwhile (a storm of them) then costs the event loop an
 * entry here, not a /proc read, a stat and a retention entry each. Past
 * ORPHAN_QUEUE waiting, more are left where they are (counted): no runtime
 * makes them, and a process that later takes the pid has its path claimed.
 */
#define ORPHAN_QUEUE 4096
#define ORPHAN_PER_TICK 256

/*
 * At most JIT_QUEUE processes wait for their judgement (anyone can make
 * processes with executable memory); more are counted and not judged.
 */
#define JIT_QUEUE 4096
/*
 * Anyone can exec small programs that map executable memory, each said to
 * lose its symbols: past LOST_LINES_BURST lines of one uid, one a second;
 * the rest are counted (lost_symbols_unsaid), not said.
 */
/*
 * Exited processes' maps made canonical at their paths, in the event loop:
 * each a read, and for the few some consumer misreads a rewrite and an
 * fsync. At most CANON_RATE_PER_UID a second per uid, CANON_RATE for all;
 * the rest stay as they are until archived (compacted then), counted.
 */
#define CANON_RATE_PER_UID 8
#define CANON_RATE 32
#define LOST_LINES_RATE 1
#define LOST_LINES_BURST 64

struct jit_watch {
	pid_t pid;
	uint64_t start_ticks;
	uint64_t due_ns;
};

struct policy {
	struct policy_config cfg;
	struct mapstore store;
	struct proctab procs;
	struct retention *retained;
	struct pidmap held;           /* processes held, by pid (policy_hold.c) */
	struct budget *copy_budget;   /* bytes of copies per uid */
	struct budget *loop_budget;   /* bytes of copies per uid made in the event loop */
	struct budget *lost_lines;    /* "lost symbols" lines per uid (policy_jit.c) */
	struct budget *canon_uid;     /* retained maps made canonical, per uid (policy_actions.c) */
	struct budget *canon_all;     /* ... and by all uids together (the key 0) */
	uint64_t tickets;             /* of copies sent to the worker */
	struct policy_stats stats;
	struct copy_fault copy_fault;
	uint64_t moves_put_off;  /* exited maps not moved for want of fds since the first said */
	bool put_off_now, moved_now;  /* in this tick */
	/* Maps that appeared at pids no process holds, weighed at the tick (policy__map_appeared()). */
	pid_t orphan_q[ORPHAN_QUEUE];
	size_t orphan_head, orphan_len;
	/* Processes whose JIT code is judged when their grace is over (policy_jit.c). */
	struct jit_watch jit_q[JIT_QUEUE];
	size_t jit_head, jit_len;
};

/*
 * Out of file descriptors or memory: a passing state of the agent, not of the
 * map. What failed for it is tried again, never given up for it at once.
 */
static inline bool short_of_resources(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM;
}

/* An event's time for look(): its latest moment, or 0 (now) when unknown. */
static inline uint64_t latest(struct span t)
{
	return t.hi == UINT64_MAX ? 0 : t.hi;
}

/* ---- the evidence ---- */

enum verdict {
	EARLIER,     /* the path's earlier holder wrote it: not the new holder's */
	LATER,       /* the new holder's own */
	AMBIGUOUS,   /* cannot tell: it stays, nothing is lost, and it is counted */
};

enum evidence { BY_NOTHING, BY_INDEX, BY_IDENTITY, BY_MAPPINGS };

struct judgement {
	enum verdict verdict;
	enum evidence by;
	const char *why;
};

/* A file the policy saw at @seen_ns, when only the path's earlier holder had written it. */
struct known_file {
	dev_t dev;
	ino_t ino;
	uint64_t size;
	uint64_t seen_ns;
};

/* Whose memory the process's mappings are. */
enum mappings_of {
	MAPPINGS_OWN,        /* a new image's: an address space of its own */
	MAPPINGS_INHERITED,  /* a forked child's: its parent's, as any sibling's were */
};

static inline bool same_file(const struct map_info *mi, dev_t dev, ino_t ino)
{
	return mi->dev == dev && mi->ino == ino;
}

static inline int look(struct policy *p, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	return p->store.ops->look(p->store.ctx, pid, at_ns, mi);
}

static inline bool copied_here(const struct proc *pr, const struct map_info *mi)
{
	return (pr->flags & PROC_COPIED) && same_file(mi, pr->copy.dev, pr->copy.ino);
}

static inline void own_map(struct proc *pr, const struct map_info *mi)
{
	pr->judged.own_dev = mi->dev;
	pr->judged.own_ino = mi->ino;
}

static inline bool is_own(const struct proc *pr, const struct map_info *mi)
{
	return pr->judged.own_ino && same_file(mi, pr->judged.own_dev, pr->judged.own_ino);
}

/*
 * Is @mi, at @pr's path since before or after @change (its start or exec),
 * another uid's map? A process cannot make a file another uid owns, nor
 * change its uid, unless it runs as root: root's files are excepted (a
 * runtime that wrote as root and dropped its uid later), and so are files a
 * root process's path got after its @change (it may have dropped to that uid
 * since): for root, the file must be known from before, by the index or as
 * @known, seen then. Such a map was put there by somebody else, for the
 * process to append its symbols to.
 */
static inline bool policy__squatted(const struct proc *pr, const struct map_info *mi,
				    struct span change, const struct known_file *known)
{
	if (mi->uid == 0 || mi->uid == pr->uid)
		return false;
	if (pr->uid != 0 || span_before(mi->born, change))
		return true;
	return known && same_file(mi, known->dev, known->ino) && known->seen_ns < change.lo;
}

/* ---- policy_jit.c ---- */

/* A new image has none of the old one's code. */
void policy__jit_exec(struct policy *p, struct proc *pr);
/* Judge the processes whose grace is over. */
void policy__jit_tick(struct policy *p, uint64_t now_ns);
/* A map appeared at @pr's path. */
void policy__jit_named(struct policy *p, struct proc *pr);

/* policy.c: what policy_ns.c shares with the host's rules. */
int policy__move_away(struct policy *p, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		      const struct map_info *mi, unsigned int flags);
int policy__retain(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *mi,
		   bool orphan, uint64_t now_ns);
void policy__say_trap(const struct policy *p, const char *what, pid_t pid,
		      const struct map_info *mi);
void policy__move_squatted(struct policy *p, struct proc *pr, const char *what,
			   const struct map_info *mi);

/*
 * policy_ns.c: processes in other mount or pid namespaces. track() notes
 * their namespaces; placing one says whether it is handled as a host
 * process (true) or mirrored, or left alone (false).
 */
void policy__ns_track(struct proc *pr, const struct policy_event *ev, bool fresh);
bool policy__ns_place(struct policy *p, struct proc *pr, const struct policy_event *ev,
		      uint64_t now_ns);
/* Exec of a mirrored or unplaced process: true when the host's exec rules judge it next. */
bool policy__ns_exec(struct policy *p, struct proc *pr, const struct policy_event *ev,
		     uint64_t now_ns);
/* Exit of a mirrored process: its mirror stays for the retention, as a host map would. */
void policy__ns_end(struct policy *p, struct proc *pr, uint64_t now_ns);

/* ---- policy_judge.c ---- */

/*
 * Who wrote @mi, the map at @pid's path, whose holder changed at @change: an
 * exec, or a new process at the pid. (@pid, @start_ticks) is the holder now.
 */
void policy__judge(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *mi,
		   struct span change, const struct known_file *known, enum mappings_of mappings,
		   struct judgement *j);
void policy__count_judgement(struct policy *p, const struct judgement *j);

/* ---- policy.c ---- */

/* Over --max-map-bytes: said, counted, and true; the map is left as it is. */
bool policy__too_large(struct policy *p, const char *what, pid_t pid, const struct map_info *mi);

/* ---- policy_copy.c ---- */

/*
 * Give @pr its parent's entries; 0 done, -EAGAIN to try again later,
 * -EINPROGRESS when the worker makes the copy.
 */
int policy__copy_from_parent(struct policy *p, struct proc *pr, struct span pstart, struct span at,
			     enum copy_op op, uint64_t now_ns);
/* After a try at @pr's copy that returned @ret: wait for a runtime's line or for fds, or give up. */
void policy__after_copy(struct policy *p, struct proc *pr, int ret, uint64_t now_ns);
/* @pr execs or ends (@what): its copy in the worker is stopped or taken as made. */
void policy__settle_copy(struct policy *p, struct proc *pr, const char *what, uint64_t now_ns);
/* Copies waiting for a runtime's line or for fds: tried again. */
void policy__retry_copies(struct policy *p, uint64_t now_ns);

#endif /* PERFMAPD_POLICY_INTERNAL_H */

/*
 * Maps that wait at their paths: an exited process's map for --retention,
 * so that perf report and samply still find it, and a map whose move was
 * refused because a process had it open for writing, until it can move.
 * The object owns the timers and the retry rules; what to do when an entry
 * is due is its caller's.
 */
#ifndef PERFMAPD_RETENTION_H
#define PERFMAPD_RETENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum retain_kind {
	RETAIN_EXITED,    /* its process ended: archive when the retention is over */
	RETAIN_MOVE,      /* a move refused while open for writing: retry shortly */
};

struct retained {
	pid_t pid;
	uint64_t start_ticks;     /* the process that wrote it; 0 unknown */
	enum retain_kind kind;
	/* No process was known for it (a listing found it): counted against @uid, its owner. */
	bool orphan;
	uid_t uid;
	int reason;               /* the caller's: what the move is for */
	/* The map as it was when it began to wait. */
	dev_t dev;
	ino_t ino;
	uint64_t size;
	uint64_t seen_ns;         /* when it was seen so (CLOCK_BOOTTIME, after the look) */
	uint64_t deadline_ns;     /* CLOCK_BOOTTIME, as every time the policy keeps */
	/* RETAIN_MOVE: when the first attempt was refused, and the wait before the next. */
	uint64_t first_ns;
	uint64_t backoff_ns;
	bool held;                /* kept past its deadline for a holder once at least */
};

struct retention;

struct retention *retention__new(void);
void retention__free(struct retention *r);

/* Wait with @e (replacing any entry of its pid) until @e->deadline_ns. */
int retention__add(struct retention *r, const struct retained *e);
/* Wait @e for a retry of a move refused at @now_ns; its schedule is set here. */
int retention__add_move(struct retention *r, const struct retained *e, uint64_t now_ns);
/* Its deadline is the heap's key: change it only by retention__add(). */
struct retained *retention__find(struct retention *r, pid_t pid);
void retention__forget(struct retention *r, pid_t pid);
size_t retention__count(const struct retention *r, enum retain_kind kind);
/* Entries with @orphan set whose map @uid owns. */
size_t retention__orphans(const struct retention *r, uid_t uid);
/* Entries of kind RETAIN_EXITED whose map @uid owns (the cap of exits retained per uid). */
size_t retention__exited(const struct retention *r, uid_t uid);
/* True the first time @uid, which has entries, is found over its cap, until it has none again. */
bool retention__first_over(struct retention *r, uid_t uid);

/* What the caller's attempt at a due entry came to. */
enum retain_result {
	RETAIN_DONE,      /* moved, or nothing left to move: forget it */
	RETAIN_BUSY,      /* open for writing, or the archive full: the rules say when to try again */
	RETAIN_HELD,      /* a profiler holds it (policy_hold.c): looked at again in RETRY_HELD_NS */
};

struct retention_cb {
	enum retain_result (*due)(void *ctx, const struct retained *e);
	/* A move retried until the rules gave up; the entry is forgotten after. */
	void (*gave_up)(void *ctx, const struct retained *e);
	void *ctx;
};

/*
 * Hand every entry due at @now_ns to @cb->due, which must not add or
 * forget entries. The rules: an exited process's map that is busy waits
 * RETRY_EXITED_NS more, for as long as it takes (a forked LuaJIT child may
 * write into its parent's map). A busy move is retried after 1 ms, then
 * twice as long each time up to RETRY_MOVE_MAX_NS, for MOVE_BUDGET_NS: the
 * writer is usually an exec'd image's fd, which the kernel closes as the
 * task returns to user space, and the new image's runtime may open the path
 * a millisecond later.
 */
void retention__expire(struct retention *r, uint64_t now_ns, const struct retention_cb *cb);
/*
 * The earliest deadline of a busy move, or UINT64_MAX: such retries need
 * more than the tick. O(1): the deadlines are kept in a heap per kind, and a
 * tick costs O(log n) per entry due, none per entry waiting.
 */
uint64_t retention__next_move(const struct retention *r);

#define RETRY_EXITED_NS (10ull * 1000000000)
#define RETRY_HELD_NS (1ull * 1000000000)
#define RETRY_MOVE_FIRST_NS (1ull * 1000000)
#define RETRY_MOVE_MAX_NS (100ull * 1000000)
#define MOVE_BUDGET_NS (2ull * 1000000000)

#endif /* PERFMAPD_RETENTION_H */

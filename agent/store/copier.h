/*
 * The copier: forked children's copies too large (or too many) for the
 * event loop, made by worker threads. Results come back to the loop's
 * thread through an eventfd, so that the policy records them as its own.
 */
#ifndef PERFMAPD_COPIER_H
#define PERFMAPD_COPIER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/mapstore.h"

struct copier_config {
	int map_dir_fd;
	uint64_t max_map_bytes;
	unsigned int threads;         /* workers; each serves one copy of a uid at a time */
	unsigned int queue_max;       /* copies waiting, in all */
	unsigned int queue_per_uid;   /* copies waiting, of one uid */
	/* Did @pid exec since @since_ns? Called from the workers: must be thread-safe. */
	bool (*execd_since)(void *ctx, pid_t pid, uint64_t since_ns);
	void *ctx;
};

struct copier;

struct copier *copier__open(const struct copier_config *cfg);
/* Stops the copies under way before they show, and the workers. Accepts NULL. */
void copier__free(struct copier *c);
/* Readable when copies are done: call copier__drain(). */
int copier__fd(const struct copier *c);
/* Queue a copy (@rq and its parent_map are copied); -EAGAIN when @rq->uid's share is full, -EBUSY the queue. */
int copier__submit(struct copier *c, const struct copy_req *rq, enum copy_op op, uint64_t ticket);
/* As mapstore_ops.copy_settle; a copy being linked in is waited for (microseconds). */
int copier__settle(struct copier *c, uint64_t ticket, struct copy_result *res);

typedef void (*copier_done_fn)(void *ctx, pid_t child, uint64_t ticket, enum copy_op op, int err,
			       const struct copy_result *res);
/* Every copy done and not settled, to @fn, in the caller's thread. */
void copier__drain(struct copier *c, copier_done_fn fn, void *ctx);

#endif /* PERFMAPD_COPIER_H */

/*
 * The map store: the map directory as the policy sees it and acts on it.
 * Evidence from the inotify index, BPF and /proc; copies, moves and the
 * archive. This is where the policy's decisions touch the file system.
 */
#ifndef PERFMAPD_STORE_H
#define PERFMAPD_STORE_H

#include <stdint.h>

#include "policy/mapstore.h"
#include "store/jitdumps.h"

struct archive;
struct events;
struct mapwatch;
struct mirrors;

struct store_config {
	const char *map_dir;
	int map_dir_fd;
	uint64_t max_map_bytes;
	/* Copies off the event loop: workers, and how many may wait, in all and per uid. */
	unsigned int copy_threads, copy_queue_max, copy_queue_per_uid;
};

struct store;

/*
 * @mw, @ev, @ar and @mirrors stay the caller's; @ev may be NULL (no BPF:
 * nothing exec'd is known), @mirrors too (processes in other namespaces are
 * then left alone).
 */
struct store *store__new(const struct store_config *cfg, struct mapwatch *mw,
			 struct events *ev, struct archive *ar, struct mirrors *mirrors);
void store__free(struct store *s);
/* The interface the policy acts through. */
struct mapstore store__mapstore(struct store *s);
/* Readable when copies made off the loop are done: call store__drain_copies(). */
int store__copy_fd(const struct store *s);
typedef void (*store_copy_done_fn)(void *ctx, pid_t child, uint64_t ticket, int err,
				   const struct copy_result *res);
/* Each copy done off the loop, to @fn (policy__copy_done), in the caller's thread. */
void store__drain_copies(struct store *s, store_copy_done_fn fn, void *ctx);

#endif /* PERFMAPD_STORE_H */

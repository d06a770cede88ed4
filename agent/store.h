/*
 * The map store: the map directory as the policy sees it and acts on it.
 * Evidence from the inotify index, BPF and /proc; copies, moves and the
 * archive. This is where the policy's decisions touch the file system.
 */
#ifndef PERFMAPD_STORE_H
#define PERFMAPD_STORE_H

#include <stdint.h>

#include "policy.h"

struct archive;
struct events;
struct mapwatch;

struct store_config {
	const char *map_dir;
	int map_dir_fd;
	uint64_t max_map_bytes;
};

struct store;

/* @mw, @ev and @ar stay the caller's; @ev may be NULL (no BPF: nothing exec'd is known). */
struct store *store__new(const struct store_config *cfg, struct mapwatch *mw,
			 struct events *ev, struct archive *ar);
void store__free(struct store *s);
/* The interface the policy acts through. */
struct mapstore store__mapstore(struct store *s);

#endif /* PERFMAPD_STORE_H */

/* Catching up from /proc and the map directory: at start, and after lost events. */
#ifndef PERFMAPD_SCAN_H
#define PERFMAPD_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "in/mapwatch.h"

struct archive;
struct policy;

struct scan_env {
	struct policy *policy;
	struct mapwatch *mw;
	struct archive *ar;
	int map_dir_fd;
	bool dry_run;
	uint64_t self_mnt_ns, self_pid_ns;
	/* Told of each map the listing finds, as the index's changes are. */
	mapwatch_fn on_map;
	void *ctx;
};

/*
 * Bring the policy's process table in line with /proc: processes it lacks
 * come in as found (parents first), processes gone unseen as ended.
 */
int scan_procs(const struct scan_env *env);
/*
 * List the map directory into the index and hand every map to the policy;
 * at @startup, also finish the archiving of maps a crash left staged.
 */
int scan_maps(const struct scan_env *env, bool startup);
/*
 * Hand every map the index knows to the policy, as a listing would: enough
 * after lost process events while the index is exact, and it reads no
 * directory. -ENOMEM when some could not be handed (list the directory then).
 */
int scan_index(const struct scan_env *env);

#endif /* PERFMAPD_SCAN_H */

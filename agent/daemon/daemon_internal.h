/* What loop.c calls of daemon.c: the wiring's callbacks and SIGHUP. Nothing outside daemon/ includes this. */
#ifndef PERFMAPD_DAEMON_INTERNAL_H
#define PERFMAPD_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/daemon.h"
#include "in/in.h"  /* struct scan_env, returned */

struct copy_result;

/* daemon.c: SIGHUP: the config read again, what may change applied to the pieces. */
void daemon__reload(struct daemon *d);
/* daemon.c: what the scans need of the agent. */
struct scan_env daemon__scan_env(struct daemon *d);
/* daemon.c: a change the inotify index read. */
void daemon__on_map_change(void *ctx, pid_t pid, bool exists);
/* daemon.c: a copy made off the loop is done: to the policy, in the loop's thread. */
void daemon__on_copy_done(void *ctx, pid_t child, uint64_t ticket, int err,
			  const struct copy_result *res);

#endif /* PERFMAPD_DAEMON_INTERNAL_H */

/* One agent per map directory: its lock and the status socket perfmapctl talks to. */
#ifndef PERFMAPD_INSTANCE_H
#define PERFMAPD_INSTANCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct instance;

/* No group may read the status: only root. */
#define STATUS_NO_GROUP ((gid_t)-1)

/*
 * Take the lock for @map_dir and listen; NULL (after a message) when another
 * agent holds it. The socket is root's alone (0600), or root's and
 * @status_gid's (0660).
 */
struct instance *instance__open(const char *run_dir, const char *map_dir, gid_t status_gid);
void instance__free(struct instance *inst);
int instance__fd(const struct instance *inst);

/*
 * A flood of perfmapctl must not starve the event loop: at most
 * STATUS_PER_WAKEUP answers each time the loop comes by, STATUS_PER_S a
 * second. How many may be answered at @now_ns (CLOCK_MONOTONIC); 0 when
 * this second's are spent, and the socket should not be watched until then.
 */
unsigned int instance__budget(struct instance *inst, uint64_t now_ns);
/* Answer at most @max waiting perfmapctl with @text. */
void instance__serve(struct instance *inst, const char *text, size_t len, unsigned int max);
/* Answers given; seconds whose budget ran out, the rest left waiting. */
void instance__stats(const struct instance *inst, uint64_t *served, uint64_t *throttled);

#define STATUS_PER_WAKEUP 8
#define STATUS_PER_S 100

#endif /* PERFMAPD_INSTANCE_H */

/* One agent per map directory: its lock and the status socket perfmapctl talks to. */
#ifndef PERFMAPD_INSTANCE_H
#define PERFMAPD_INSTANCE_H

#include <stddef.h>

struct agent;
struct instance;

#define PERFMAPD_RUN_DIR "/run/perfmapd"

/*
 * The lock and socket paths of the agent for @map_dir, shared by perfmapd
 * and perfmapctl: "/tmp" -> "/run/perfmapd/tmp.lock" and "tmp.sock".
 */
int instance_paths(const char *run_dir, const char *map_dir, char *lock, char *sock,
		   size_t len);

/* Take the lock and listen; NULL (after a message) when another agent holds it. */
struct instance *instance__open(struct agent *a);
void instance__free(struct instance *inst);
int instance__fd(const struct instance *inst);
/* Answer one waiting perfmapctl with the status text. */
void instance__serve(struct instance *inst, struct agent *a);

/* The status report, "key: value" lines. */
size_t status_format(struct agent *a, char *buf, size_t len);

#endif /* PERFMAPD_INSTANCE_H */

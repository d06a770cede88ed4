/* One agent per map directory: its lock and the status socket perfmapctl talks to. */
#ifndef PERFMAPD_INSTANCE_H
#define PERFMAPD_INSTANCE_H

#include <stddef.h>

struct instance;

/* Take the lock for @map_dir and listen; NULL (after a message) when another agent holds it. */
struct instance *instance__open(const char *run_dir, const char *map_dir);
void instance__free(struct instance *inst);
int instance__fd(const struct instance *inst);
/* Answer every waiting perfmapctl with @text. */
void instance__serve(struct instance *inst, const char *text, size_t len);

#endif /* PERFMAPD_INSTANCE_H */

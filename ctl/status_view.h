/*
 * perfmapctl status for a person: the agent's "key: value" lines laid out by
 * the counter table it shares with the agent (perfmapd_counters.def): a
 * short summary, or every line by group. Pure: no sockets.
 */
#ifndef CTL_STATUS_VIEW_H
#define CTL_STATUS_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "perfmapd_counters.h"

/* A line the table has no row for: a list's item ("jit_<pid>"), or a key of a newer agent. */
struct status_extra {
	const char *key, *value;
	int group;                     /* enum perfmapd_group_id; PMG__COUNT: none */
};

struct status_view {
	const char *value[PMC__COUNT]; /* NULL: the agent did not send it */
	struct status_extra *extra;    /* in the order sent */
	size_t n_extra;
};

/*
 * The agent's @text, split in place (it must outlive @v). 0 or -ENOMEM;
 * status_view__free() after, in either case.
 */
int status_view__parse(struct status_view *v, char *text);
void status_view__free(struct status_view *v);

/*
 * What the agent for @map_dir manages, what it did, what went wrong (every
 * problem counter that is not 0), in a few lines.
 */
void status_view__summary(const struct status_view *v, const char *map_dir, FILE *out);
/* Every line, under its group's title, the groups in the table's order; unknown keys last. */
void status_view__all(const struct status_view *v, FILE *out);

#endif /* CTL_STATUS_VIEW_H */

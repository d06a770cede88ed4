/* The status text `perfmapctl status` reads: one "key: value" line per counter shown, in the table's order. */
#ifndef PERFMAPD_STATUS_H
#define PERFMAPD_STATUS_H

#include <stddef.h>

#include "report/counters.h"

/* A buffer the text goes into: cut to fit, always NUL-terminated. */
struct status_text {
	char *buf;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
void status_text__put(struct status_text *t, const char *fmt, ...);

/* A group's list lines (PERFMAPD_LIST: "jit_<pid>: ..."), put after the group's last row. */
typedef void status_list_fn(struct status_text *t, enum perfmapd_group_id group, void *ctx);

/*
 * The counters @cv shows into @buf (@len bytes), and the lists @list puts
 * (NULL: none); the text's length.
 */
size_t status_render(const struct counter_values *cv, status_list_fn *list, void *ctx, char *buf,
		     size_t len);

#endif /* PERFMAPD_STATUS_H */

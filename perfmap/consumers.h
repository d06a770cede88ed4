/* How perf, samply, blazesym and bcc parse a perf-map line and look an address up; not installed. */
#ifndef PERFMAP_CONSUMERS_H
#define PERFMAP_CONSUMERS_H

#include "internal.h"

enum sim_result {
	SIM_NONE,   /* the consumer skips the line */
	SIM_ENTRY,  /* it makes a symbol of it */
	SIM_FATAL,  /* it gives up on the whole file */
};

struct sim_entry {
	uint64_t start, size;
	const char *name;
	size_t name_len;
};

/* A symbol as a consumer holds it, with the table entry of its line (-1: none). */
struct sim_sym {
	uint64_t start, end;
	long ent;
};

/*
 * What consumer @c makes of @line. @scratch has room for line->len + 2
 * bytes: perf and bcc work on NUL-terminated copies, as getline() gives them.
 */
enum sim_result perfmap__sim_line(enum perfmap_consumer c, const struct perfmap_line *line,
				  char *scratch, struct sim_entry *e);

/* Sort @syms as consumer @c keeps them for lookups. */
void perfmap__sim_sort(enum perfmap_consumer c, struct sim_sym *syms, size_t n);
/*
 * The symbol consumer @c resolves @addr to, as an index into @syms, or -ENOENT.
 * When the answer depends on an unstable sort, the other symbols it could be
 * are the @ties ones just before it.
 */
long perfmap__sim_lookup(enum perfmap_consumer c, const struct sim_sym *syms, size_t n,
			 uint64_t addr, size_t *ties);

#endif /* PERFMAP_CONSUMERS_H */

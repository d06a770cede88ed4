/* What a forked child inherited of its parent's memory: the entries of the parent's map it may keep. */
#ifndef PERFMAPD_INHERIT_H
#define PERFMAPD_INHERIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perfmap_tools.h"

/*
 * A child's /proc/<pid>/maps is read up to this many bytes (some 16,000
 * mappings, a few milliseconds): past it, every entry is kept. The child is
 * its owner's process, and its owner chooses how many mappings it has.
 */
#define INHERIT_MAPS_MAX_BYTES (1u << 20)

struct inherit {
	struct perfmap_vmas vs;   /* only the ranges whose entries are kept, merged */
	bool known;        /* false: its mappings could not be read; every entry is kept */
};

/* The mappings of (@pid, @start_ticks) now; @in->known says whether they were read. */
void inherit_read(pid_t pid, uint64_t start_ticks, struct inherit *in);
void inherit_release(struct inherit *in);
/* Does the child have memory at @addr that perf names from a map? */
bool inherit_has(const struct inherit *in, uint64_t addr);
/* The start address of a map line as perf reads it (blanks, an optional 0x, hex), or false. */
bool inherit_line_start(const char *p, const char *end, uint64_t *start);
/* Does some whole line of @buf (@len bytes) name memory the child lacks? */
bool inherit_names_other(const struct inherit *in, const char *buf, size_t len);
/*
 * The whole lines of @buf (@len bytes) that name memory the child lacks
 * removed, in place; what follows the last newline is left as it is. The
 * new length; the lines removed are added to *@left_out.
 */
size_t inherit_filter(const struct inherit *in, char *buf, size_t len, long *left_out);

#endif /* PERFMAPD_INHERIT_H */

/* perfmapctl profile -j a / A: source files with each line's share of the samples (p.lua's prof_annotate). */
#ifndef PERFMAPD_PROFILE_ANNOTATE_H
#define PERFMAPD_PROFILE_ANNOTATE_H

#include <stdint.h>
#include <stdio.h>

#include "profile_report.h"

/* A key and its count, at one level of a report. */
struct tally {
	const char *key;
	uint64_t count;
	size_t first, last;        /* its second-level tallies, in the level below */
};

/*
 * The files of the "file:line" keys of @t: excerpts around the lines with
 * samples (v->annotate 3 lines of context) or whole files (0). 0, or -EIO.
 */
int prof_annotate(const struct tally *t, size_t n, uint64_t total, const struct prof_view *v,
		  FILE *out);

#endif /* PERFMAPD_PROFILE_ANNOTATE_H */

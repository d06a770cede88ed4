/* Compaction of a whole map into its canonical form, for perfmapctl and the archive. */
#ifndef PERFMAPD_COMPACT_H
#define PERFMAPD_COMPACT_H

#include "perfmap.h"

struct compact_job {
	uint64_t max_bytes;                  /* in: read at most this much; 0 default */
	struct perfmap_reader_stats read;    /* out */
	struct perfmap_table_stats table;    /* out */
};

/*
 * A replace_fill_fn: the canonical form of all of @src_fd into @out_fd.
 * -EFBIG when the map is larger than @job->max_bytes: a prefix would lose the rest.
 */
int compact_fill(int src_fd, int out_fd, void *job);

#endif /* PERFMAPD_COMPACT_H */

/* Compaction of a whole map into its canonical form, for perfmapctl and the archive. */
#include <errno.h>

#include "perfmap_tools.h"

int perfmap__compact_fill(int src_fd, int out_fd, void *ctx)
{
	PERFMAP_OPTS(perfmap_reader_opts, ropts);
	struct perfmap_compact_job *job = ctx;
	struct perfmap_table *t = NULL;
	struct perfmap_reader *r;
	int err;

	ropts.max_bytes = job->max_bytes;
	r = perfmap_reader__from_fd(src_fd, &ropts);
	if (!r)
		return -errno;
	t = perfmap_table__new();
	err = t ? perfmap_table__load(t, r) : -ENOMEM;
	job->read = *perfmap_reader__stats(r);
	/* Compacting a prefix would drop the rest of the map. */
	if (!err && job->read.truncated)
		err = -EFBIG;
	if (!err)
		err = perfmap_table__stats(t, &job->table);
	if (!err)
		err = perfmap_table__write_canonical(t, out_fd);
	perfmap_table__free(t);
	perfmap_reader__free(r);
	return err;
}

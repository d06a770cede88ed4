/* Compaction of a whole map into its canonical form, for perfmapctl and the archive. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "perfmap_tools.h"

#define STREAM_OUT_BUF (64u << 10)

int perfmap__stream_fill(int src_fd, int out_fd, void *ctx)
{
	struct perfmap_compact_job *job = ctx;
	uint64_t limit = job->max_bytes ? job->max_bytes : PERFMAP_READ_MAX_DEFAULT;
	char *buf, *out;
	long copied;

	buf = malloc(PERFMAP_LINE_MAX_DEFAULT + 1);
	out = malloc(STREAM_OUT_BUF);
	copied = buf && out ? perfmap__copy_fd(src_fd, limit, out_fd, buf,
					       PERFMAP_LINE_MAX_DEFAULT + 1, out, STREAM_OUT_BUF)
			    : -ENOMEM;
	free(out);
	free(buf);
	if (copied < 0)
		return (int)copied;
	job->uncompacted = true;
	job->table.entries = job->table.lines_out = (size_t)copied;
	return 0;
}

/* Every entry of @r into @t, or -E2BIG once @t would need more than @max bytes (0: no bound). */
static int load_bounded(struct perfmap_table *t, struct perfmap_reader *r, uint64_t max)
{
	struct perfmap_record rec;
	int err;

	while ((err = perfmap_reader__next(r, &rec)) > 0) {
		err = perfmap_table__add(t, &rec);
		if (err)
			return err;
		if (max && perfmap__table_bytes(t) > max)
			return -E2BIG;
	}
	return err;
}

/* Too many entries to hold: start over and copy the map as it is, in bounded memory. */
static int stream_instead(int src_fd, int out_fd, struct perfmap_compact_job *job)
{
	if (lseek(src_fd, 0, SEEK_SET) < 0)
		return -errno;
	return perfmap__stream_fill(src_fd, out_fd, job);
}

int perfmap__compact_fill(int src_fd, int out_fd, void *ctx)
{
	PERFMAP_OPTS(perfmap_reader_opts, ropts);
	struct perfmap_compact_job *job = ctx;
	struct perfmap_table *t = NULL;
	struct perfmap_reader *r;
	int err;

	job->uncompacted = false;
	ropts.max_bytes = job->max_bytes;
	r = perfmap_reader__from_fd(src_fd, &ropts);
	if (!r)
		return -errno;
	t = perfmap_table__new();
	err = t ? load_bounded(t, r, job->max_table_bytes) : -ENOMEM;
	job->read = *perfmap_reader__stats(r);
	if (err == -E2BIG) {
		/* Free the table before streaming: the bound is on the peak. */
		perfmap_table__free(t);
		perfmap_reader__free(r);
		return stream_instead(src_fd, out_fd, job);
	}
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

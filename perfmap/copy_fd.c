/*
 * The copy primitive: another map's entries appended to an fd in whole
 * canonical lines, with the caller's buffers. A leaf: it calls the reader
 * and the formatter, neither of which calls back; the writer (copy.c), the
 * fork child (fork.c), the compactor and the tools call it.
 */
#include "internal.h"

long perfmap__copy_fd(int src_fd, uint64_t limit, int dst_fd, char *buf,
		      size_t cap, char *out, size_t out_cap)
{
	return perfmap__copy_fd_if(src_fd, limit, dst_fd, buf, cap, out, out_cap, NULL, NULL,
				   NULL);
}

long perfmap__copy_fd_if(int src_fd, uint64_t limit, int dst_fd, char *buf, size_t cap,
			 char *out, size_t out_cap, perfmap_keep_fn keep, void *ctx,
			 long *dropped)
{
	struct perfmap_reader r;
	struct perfmap_record rec;
	size_t off = 0, name_len;
	long copied = 0;
	int err;

	perfmap__reader_init(&r, src_fd, buf, cap, limit);
	while ((err = perfmap_reader__next(&r, &rec)) > 0) {
		if (keep && !keep(ctx, rec.start, rec.size)) {
			(*dropped)++;
			continue;
		}
		copied++;
		/* Flush before a line could overflow: every write ends a line. */
		if (off + PERFMAP_LINE_MAX > out_cap) {
			err = perfmap__write_all(dst_fd, out, off);
			if (err)
				return err;
			off = 0;
		}
		/* What this library writes keeps its own name bound. */
		name_len = perfmap__name_cut(rec.name, rec.name_len, PERFMAP_NAME_MAX);
		off += perfmap__format_line(out + off, rec.start, rec.size,
					    rec.name, name_len);
	}
	if (err < 0)
		return err;
	if (off) {
		err = perfmap__write_all(dst_fd, out, off);
		if (err)
			return err;
	}
	return copied;
}

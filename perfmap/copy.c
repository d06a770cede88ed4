/* Copying another process's map into ours: whole canonical lines, bounded memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

#define COPY_OUT_BUF (16u << 10)

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

size_t perfmap__canonical_lines(char *buf, size_t len, uint64_t *dropped)
{
	char line[PERFMAP_FIXED_MAX + PERFMAP_NAME_MAX];
	char *p = buf, *end = buf + len, *nl;
	struct perfmap_record rec;
	size_t out = 0, n;

	for (; p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		if (perfmap_parse_line(p, (size_t)(nl - p), 0, &rec) != PERFMAP_REJECT_NONE) {
			/* An empty line (or a lone CR) is no text: nothing of it is lost. */
			if (nl > p && !(nl - p == 1 && *p == '\r'))
				(*dropped)++;
			continue;
		}
		n = perfmap__format_line(line, rec.start, rec.size, rec.name,
					 perfmap__name_cut(rec.name, rec.name_len, PERFMAP_NAME_MAX));
		/* Formatted aside first: the name it reads lies where it is written. */
		memcpy(buf + out, line, n);
		out += n;
	}
	return out;
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int perfmap_copy_file(const char *parent_filename)
{
	char *buf = NULL, *out = NULL;
	struct stat st;
	long copied;
	int src, err;

	if (!parent_filename) {
		errno = EINVAL;
		return -1;
	}
	src = perfmap_open_map(parent_filename, NULL);
	if (src < 0) {
		errno = -src;
		return -1;
	}
	err = -ENOMEM;
	buf = malloc(PERFMAP_LINE_MAX_DEFAULT + 1);
	out = malloc(COPY_OUT_BUF);
	if (!buf || !out)
		goto cleanup;
	/* Copy what the file holds now; a parent still writing must not keep us here. */
	if (fstat(src, &st)) {
		err = -errno;
		goto cleanup;
	}

	err = perfmap__writer_lock_open();
	if (err) {
		err = -errno;
		goto cleanup;
	}
	if (same_file(src, perfmap__writer.fd))
		copied = -EINVAL;
	else
		copied = perfmap__copy_fd(src, (uint64_t)st.st_size, perfmap__writer.fd,
					  buf, PERFMAP_LINE_MAX_DEFAULT + 1, out,
					  COPY_OUT_BUF);
	perfmap__writer_unlock();
	err = copied < 0 ? (int)copied : 0;

cleanup:
	free(out);
	free(buf);
	close(src);
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

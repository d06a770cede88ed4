/*
 * Copying another process's map into ours (perfmap_copy_file), and lines
 * rewritten in canonical form; the copy itself is copy_fd.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

#define COPY_OUT_BUF (16u << 10)

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
		goto close_src;
	/* Copy what the file holds now; a parent still writing must not keep us here. */
	if (fstat(src, &st)) {
		err = -errno;
		goto close_src;
	}

	err = perfmap__writer_lock_open();
	if (err)
		goto close_src;
	if (same_file(src, perfmap__writer.fd))
		copied = -EINVAL;
	else
		copied = perfmap__copy_fd(src, (uint64_t)st.st_size, perfmap__writer.fd,
					  buf, PERFMAP_LINE_MAX_DEFAULT + 1, out,
					  COPY_OUT_BUF);
	perfmap__writer_unlock();
	err = copied < 0 ? (int)copied : 0;

close_src:
	free(out);
	free(buf);
	close(src);
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

/* Streaming perf-map reader: whole lines from an fd or memory, bounded in bytes and memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int reader_setup(struct perfmap_reader *r,
			const struct perfmap_reader_opts *opts)
{
	if (opts && opts->sz < sizeof(opts->sz))
		return -EINVAL;
	r->max_bytes = OPTS_GET(opts, max_bytes, PERFMAP_READ_MAX_DEFAULT);
	r->max_size = OPTS_GET(opts, max_size, PERFMAP_SIZE_MAX_DEFAULT);
	r->max_line = OPTS_GET(opts, max_line, PERFMAP_LINE_MAX_DEFAULT);
	/* The buffer holds a whole line: its size is the caller's to bound, within reason. */
	if (r->max_line > PERFMAP_LINE_MAX_LIMIT)
		return -EINVAL;
	return 0;
}

void perfmap__reader_init(struct perfmap_reader *r, int fd, char *buf,
			  size_t cap, uint64_t max_bytes)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->buf = buf;
	r->cap = cap;
	r->max_bytes = max_bytes;
	r->max_size = PERFMAP_SIZE_MAX_DEFAULT;
	r->max_line = cap - 1;
}

struct perfmap_reader *perfmap_reader__from_fd(int fd,
					       const struct perfmap_reader_opts *opts)
{
	struct perfmap_reader *r;
	int err;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = fd;
	err = reader_setup(r, opts);
	if (err)
		goto free_reader;
	/* One line of max_line bytes and its newline always fit. */
	r->cap = r->max_line + 1;
	r->buf = malloc(r->cap);
	if (!r->buf) {
		err = -ENOMEM;
		goto free_reader;
	}
	r->own_buf = true;
	return r;

free_reader:
	free(r);
	errno = -err;
	return NULL;
}

struct perfmap_reader *perfmap_reader__from_mem(const void *data, size_t len,
						const struct perfmap_reader_opts *opts)
{
	struct perfmap_reader *r;
	int err;

	if (!data && len) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = -1;
	err = reader_setup(r, opts);
	if (err) {
		free(r);
		errno = -err;
		return NULL;
	}
	/* Lines point straight into the caller's memory; nothing is copied. */
	r->buf = (char *)data;
	if (len > r->max_bytes) {
		len = (size_t)r->max_bytes;
		r->stats.truncated = true;
	}
	r->cap = len;
	r->tail = len;
	r->eof = true;
	return r;
}

void perfmap_reader__free(struct perfmap_reader *r)
{
	if (!r)
		return;
	if (r->own_buf)
		free(r->buf);
	free(r);
}

const struct perfmap_reader_stats *perfmap_reader__stats(const struct perfmap_reader *r)
{
	return &r->stats;
}

/* Whether the fd has anything past the byte budget: one probing read. */
static void note_truncation(struct perfmap_reader *r)
{
	char c;
	ssize_t n;

	do {
		n = read(r->fd, &c, 1);
	} while (n < 0 && errno == EINTR);
	if (n > 0)
		r->stats.truncated = true;
}

static int fill(struct perfmap_reader *r)
{
	size_t room;
	ssize_t n;

	if (!r->max_bytes) {
		note_truncation(r);
		r->eof = true;
		return 0;
	}
	if (r->head) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
	room = r->cap - r->tail;
	if (room > r->max_bytes)
		room = (size_t)r->max_bytes;
	do {
		n = read(r->fd, r->buf + r->tail, room);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0) {
		r->eof = true;
		return 0;
	}
	r->tail += (size_t)n;
	r->max_bytes -= (uint64_t)n;
	return 0;
}

static void count_entry(struct perfmap_reader_stats *s, unsigned int quirks)
{
	unsigned int bit;

	s->entries++;
	for (bit = 0; bit < PERFMAP_QUIRK_COUNT; bit++)
		if (quirks & (1u << bit))
			s->quirks[bit]++;
}

/* Fill @line with the @len bytes at head and say what they are. */
static void emit_line(struct perfmap_reader *r, struct perfmap_line *line,
		      size_t len, bool terminated)
{
	struct perfmap_reader_stats *s = &r->stats;

	memset(line, 0, sizeof(*line));
	line->text = r->buf + r->head;
	line->len = len;
	line->lineno = ++r->lineno;
	s->bytes += len + terminated;

	if (!terminated) {
		/* A write in progress: parsed for callers who compare, never counted. */
		line->kind = PERFMAP_LINE_INCOMPLETE;
		s->incomplete_bytes = r->skipped + len;
		if (r->skipped)
			line->len = 0;  /* its start is gone: nothing to show */
		r->skipped = 0;
		perfmap_parse_line(line->text, line->len, r->max_size, &line->rec);
		line->rec.lineno = line->lineno;
		return;
	}
	s->lines++;
	if (r->skipped || len > r->max_line) {
		line->kind = PERFMAP_LINE_REJECTED;
		line->reject = PERFMAP_REJECT_TOO_LONG;
		s->rejected[PERFMAP_REJECT_TOO_LONG]++;
		r->skipped = 0;
		return;
	}
	if (len == 0 || (len == 1 && line->text[0] == '\r')) {
		line->kind = PERFMAP_LINE_EMPTY;
		s->empty++;
		return;
	}
	line->reject = perfmap_parse_line(line->text, len, r->max_size, &line->rec);
	line->rec.lineno = line->lineno;
	if (line->reject != PERFMAP_REJECT_NONE) {
		line->kind = PERFMAP_LINE_REJECTED;
		s->rejected[line->reject]++;
		return;
	}
	line->kind = PERFMAP_LINE_ENTRY;
	count_entry(s, line->rec.quirks);
}

int perfmap_reader__next_line(struct perfmap_reader *r, struct perfmap_line *line)
{
	size_t avail;
	char *nl;
	int err;

	for (;;) {
		avail = r->tail - r->head;
		nl = avail ? memchr(r->buf + r->head, '\n', avail) : NULL;
		if (nl) {
			avail = (size_t)(nl - (r->buf + r->head));
			emit_line(r, line, avail, true);
			r->head += avail + 1;
			return 1;
		}
		if (r->fd >= 0 && avail > r->max_line) {
			/*
			 * Memory stays bounded: drop the start of an over-long
			 * line; the line is rejected when its newline comes.
			 */
			r->skipped += avail;
			r->stats.bytes += avail;
			r->head = r->tail = 0;
			avail = 0;
		}
		if (r->eof) {
			if (!avail && !r->skipped)
				return 0;
			emit_line(r, line, avail, false);
			r->head = r->tail;
			return 1;
		}
		err = fill(r);
		if (err)
			return err;
	}
}

int perfmap_reader__next(struct perfmap_reader *r, struct perfmap_record *rec)
{
	struct perfmap_line line;
	int err;

	while ((err = perfmap_reader__next_line(r, &line)) > 0) {
		if (line.kind == PERFMAP_LINE_ENTRY) {
			*rec = line.rec;
			return 1;
		}
	}
	return err;
}

/*
 * libperfmap internals shared between its files; not installed. A function
 * that is not PERFMAP_API and can fail returns 0 (or a count or index >= 0)
 * or a negative errno; the public functions turn that into what perfmap.h
 * documents (-1 with errno for the writer) at their boundary.
 */
#ifndef PERFMAP_INTERNAL_H
#define PERFMAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfmap.h"
#include "perfmap_tools.h"   /* what the library offers its tools is internal too */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* libbpf's options idiom: fields beyond the caller's .sz read as unset. */
#define offsetofend(TYPE, FIELD) (offsetof(TYPE, FIELD) + sizeof(((TYPE *)0)->FIELD))
#define OPTS_HAS(opts, field)                                                  \
	((opts) && (opts)->sz >= offsetofend(typeof(*(opts)), field))
#define OPTS_GET(opts, field, fallback)                                        \
	(OPTS_HAS(opts, field) && (opts)->field ? (opts)->field : (fallback))

/* Bound of one canonical line: two 16-digit fields, two spaces, newline. */
#define PERFMAP_FIXED_MAX (16 + 1 + 16 + 1 + 1)

struct stat;

/*
 * An entry every consumer can hold: START > 0, SIZE > 0, and the end
 * START + SIZE fits in 64 bits (consumers compute it in a u64).
 */
static inline bool perfmap__range_ok(uint64_t start, uint64_t size)
{
	return start && size && size <= UINT64_MAX - start;
}

/*
 * safe_open.c. The one policy for a map's inode, whoever opens it: a regular
 * file (-EINVAL; -ELOOP for a symlink), one link (-EMLINK), owned by @owner
 * when @check_owner (-EPERM), at most @max_bytes when not 0 (-EFBIG).
 */
int perfmap__check_map_inode(const struct stat *st, bool check_owner, uid_t owner,
			     uint64_t max_bytes);
/*
 * Open again, with @flags, the very file @fd refers to, through
 * /proc/self/fd: whatever became of its path. -errno on failure (-ENOENT
 * without /proc). Async-signal-safe.
 */
int perfmap__reopen_fd(int fd, int flags);

/* utf8.c: length of the valid UTF-8 sequence at @s, 0 if invalid. */
size_t perfmap__utf8_seq(const unsigned char *s, size_t len);
bool perfmap__utf8_valid(const char *s, size_t len);

/*
 * format.c. Everything here is async-signal-safe: the fork handler uses it
 * in a child that may have been forked from any thread at any time.
 */
/* Copy @len bytes of @src to @dst with control bytes and invalid UTF-8 as '?'. */
void perfmap__sanitize_name(char *dst, const char *src, size_t len);
/* Bytes of @name to keep so that it is at most @max bytes of whole characters. */
size_t perfmap__name_cut(const char *name, size_t len, size_t max);
/*
 * Write "%lx %lx %s\n" to @dst, which has room for PERFMAP_FIXED_MAX +
 * @name_len bytes, the name sanitized. Returns the line's length.
 */
size_t perfmap__format_line(char *dst, uint64_t start, uint64_t size,
			    const char *name, size_t name_len);
/* Decimal @v to @dst (room for 20 bytes); returns the digits written. */
size_t perfmap__utoa(char *dst, uint64_t v);
/* "<dir>/perf-<pid>.map" into @dst of @cap bytes; -ENAMETOOLONG if it won't fit. */
int perfmap__map_path(char *dst, size_t cap, const char *dir, pid_t pid);

/* reader.c: the reader's layout, so a fork handler can keep one on its stack. */
struct perfmap_reader {
	int fd;              /* -1 when reading memory */
	char *buf;
	size_t cap;
	size_t head, tail;   /* unread bytes are buf[head, tail) */
	bool own_buf;
	bool eof;
	uint64_t skipped;    /* dropped bytes of a line longer than max_line */
	uint64_t max_bytes;  /* left to read from fd */
	uint64_t max_size;
	size_t max_line;
	uint64_t lineno;
	struct perfmap_reader_stats stats;
};

/*
 * A reader over @fd using the caller's @buf of @cap bytes; lines longer than
 * @cap - 1 are rejected as too long. Allocates nothing.
 */
void perfmap__reader_init(struct perfmap_reader *r, int fd, char *buf,
			  size_t cap, uint64_t max_bytes);

/*
 * table.c: the index of the entry last covering @addr, short names included;
 * -ENOENT when none does, -ENOMEM when the table cannot be painted.
 */
long perfmap__table_lookup_entry(struct perfmap_table *t, uint64_t addr);
/* Which entry names each address, worked out once until the next add: 0 or -ENOMEM. */
int perfmap__table_paint(struct perfmap_table *t);
/* The memory @t holds now and will hold at its peak, painted and counted. */
size_t perfmap__table_bytes(const struct perfmap_table *t);
/* START, END (exclusive) and name of entry @i, in the order added. */
void perfmap__table_entry(const struct perfmap_table *t, size_t i,
			  uint64_t *start, uint64_t *end, const char **name,
			  size_t *name_len);

#endif /* PERFMAP_INTERNAL_H */

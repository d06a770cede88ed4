/* libperfmap: write, copy, read, check and compact perf maps (/tmp/perf-<pid>.map). */
#ifndef PERFMAP_H
#define PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PERFMAP_API __attribute__((visibility("default")))

#define PERFMAP_VERSION_MAJOR 0
#define PERFMAP_VERSION_MINOR 1

/*
 * Options structs follow libbpf's convention: the caller sets .sz to the size
 * it was compiled with, so fields can be added without breaking old callers.
 * PERFMAP_OPTS(perfmap_reader_opts, opts, .max_bytes = 1 << 20);
 */
#define PERFMAP_OPTS(TYPE, NAME, ...)                                          \
	struct TYPE NAME = { .sz = sizeof(struct TYPE), __VA_ARGS__ }

/* ------------------------------------------------------------------------
 * Writer: the JIT author's side.
 *
 * The semantics of CPython's PyUnstable_*PerfMap* helpers, for any runtime.
 * The map is <dir>/perf-<pid>.map, <dir> being $PERFMAP_DIR or /tmp as it is
 * when the map is opened. Functions return 0 on success and -1 with errno set
 * on failure, like CPython's. None is async-signal-safe.
 * ------------------------------------------------------------------------ */

/* Longest name kept, in bytes; longer names are cut at a UTF-8 boundary. */
#define PERFMAP_NAME_MAX 4000
/* Longest line the writer emits, newline included. */
#define PERFMAP_LINE_MAX 4096

/*
 * Open this process's map (O_WRONLY|O_CREAT|O_APPEND|O_NOFOLLOW|O_CLOEXEC,
 * mode 0600) unless already open. Returns 0; -1 when the file cannot be
 * created or opened, or is not a regular file owned by us with one link;
 * -2 when the lock cannot be created. errno says why.
 */
PERFMAP_API int perfmap_init(void);

/*
 * Append "START SIZE NAME\n" in one write(), so that concurrent threads and
 * processes never interleave or tear lines. Thread-safe; opens the map on
 * first use. Control bytes and invalid UTF-8 in @name become '?'. NULL
 * @code_addr, zero @code_size, a range past the end of the address space and
 * a NULL or empty @name fail with EINVAL.
 */
PERFMAP_API int perfmap_write_entry(const void *code_addr, size_t code_size,
				    const char *name);

struct perfmap_entry {
	const void *code_addr;
	size_t code_size;
	const char *name;
};

/*
 * Append @count entries with as few write() calls as whole lines allow. All
 * entries are validated first: one invalid entry fails the call with EINVAL
 * and nothing is written.
 */
PERFMAP_API int perfmap_write_entries(const struct perfmap_entry *entries,
				      size_t count);

/* Close the map. Harmless when called twice or without perfmap_init(). */
PERFMAP_API void perfmap_fini(void);

/*
 * Append the complete, well-formed lines of the map @parent_filename to this
 * process's map, in canonical form and in whole lines. Reads at most the
 * size the file had when opened, with bounded memory. Symlinks, FIFOs,
 * devices, other non-regular and hard-linked files are refused (ELOOP,
 * EINVAL, EMLINK) without ever blocking.
 */
PERFMAP_API int perfmap_copy_file(const char *parent_filename);

/*
 * What a child gets after fork(). Disabled (the default): the child never
 * writes into the parent's map; its next write starts its own map under its
 * own pid. Enabled: the child's map starts, right at the fork, with the
 * entries the parent had written before it forked. Set it in the parent.
 */
PERFMAP_API int perfmap_set_persist_after_fork(int enable);

/* ------------------------------------------------------------------------
 * Reader: a streaming parser for what real producers write.
 *
 * Accepted: 0x/0X prefixes, upper case, zero padding, leading blanks, tabs and
 * repeated blanks between fields, CRLF, empty lines. A last line without a
 * newline is incomplete and never an entry. Rejected lines are counted by
 * kind. Functions returning int give a negative errno on failure.
 * ------------------------------------------------------------------------ */

enum perfmap_reject {
	PERFMAP_REJECT_NONE = 0,  /* an entry */
	PERFMAP_REJECT_GARBAGE,   /* not "START SIZE NAME" */
	PERFMAP_REJECT_BAD_UTF8,  /* name is not valid UTF-8 */
	PERFMAP_REJECT_ZERO_START,
	PERFMAP_REJECT_ZERO_SIZE,
	PERFMAP_REJECT_HUGE_SIZE, /* above the reader's max_size */
	PERFMAP_REJECT_OVERFLOW,  /* START + SIZE does not fit in 64 bits */
	PERFMAP_REJECT_TOO_LONG,  /* line longer than the reader's max_line */
	__PERFMAP_REJECT_MAX,
};

/* Accepted, but not canonical: some consumers read such lines differently. */
enum perfmap_quirk {
	PERFMAP_QUIRK_HEX_PREFIX = 1 << 0,    /* 0x or 0X */
	PERFMAP_QUIRK_UPPER_HEX = 1 << 1,
	PERFMAP_QUIRK_ZERO_PAD = 1 << 2,
	PERFMAP_QUIRK_LEADING_BLANK = 1 << 3,
	PERFMAP_QUIRK_TAB = 1 << 4,           /* tab between fields */
	PERFMAP_QUIRK_MULTI_BLANK = 1 << 5,   /* several blanks between fields */
	PERFMAP_QUIRK_CRLF = 1 << 6,
	PERFMAP_QUIRK_SHORT_NAME = 1 << 7,    /* under 3 bytes: perf drops it */
	PERFMAP_QUIRK_CONTROL = 1 << 8,       /* control byte inside the name */
};
#define PERFMAP_QUIRK_COUNT 9

struct perfmap_record {
	uint64_t start;
	uint64_t size;
	const char *name;  /* not NUL-terminated; valid until the next call */
	size_t name_len;
	uint64_t lineno;   /* 1-based */
	unsigned int quirks;
};

enum perfmap_line_kind {
	PERFMAP_LINE_ENTRY,
	PERFMAP_LINE_EMPTY,
	PERFMAP_LINE_REJECTED,
	PERFMAP_LINE_INCOMPLETE, /* last line, no newline: a write in progress */
};

struct perfmap_line {
	const char *text;  /* raw bytes without the newline; valid until next call */
	size_t len;
	uint64_t lineno;
	enum perfmap_line_kind kind;
	enum perfmap_reject reject;  /* why, for PERFMAP_LINE_REJECTED */
	/*
	 * Entries, and rejected lines that parsed as START SIZE NAME (zero or
	 * huge sizes, overflow, bad UTF-8): the fields as written.
	 */
	struct perfmap_record rec;
};

#define PERFMAP_READ_MAX_DEFAULT (1ULL << 30)  /* bytes read from one map */
#define PERFMAP_SIZE_MAX_DEFAULT (1ULL << 30)  /* larger sizes are absurd */
#define PERFMAP_LINE_MAX_DEFAULT (64u << 10)
#define PERFMAP_LINE_MAX_LIMIT (16u << 20)     /* largest max_line accepted */

struct perfmap_reader_opts {
	size_t sz;
	uint64_t max_bytes;  /* stop after this many bytes; 0: default */
	uint64_t max_size;   /* reject larger SIZE fields; 0: default */
	size_t max_line;     /* reject longer lines; 0: default; at most
			      * PERFMAP_LINE_MAX_LIMIT, else EINVAL */
};

struct perfmap_reader_stats {
	uint64_t bytes;             /* consumed */
	uint64_t lines;             /* newline-terminated lines */
	uint64_t entries;
	uint64_t empty;
	uint64_t rejected[__PERFMAP_REJECT_MAX];
	uint64_t quirks[PERFMAP_QUIRK_COUNT];  /* entries showing each quirk */
	uint64_t incomplete_bytes;  /* unterminated last line, 0 if none */
	bool truncated;             /* stopped at max_bytes */
};

struct perfmap_reader;

/* Reads from @fd (not closed by the reader). NULL with errno on failure. */
PERFMAP_API struct perfmap_reader *
perfmap_reader__from_fd(int fd, const struct perfmap_reader_opts *opts);
/* Reads @len bytes at @data, which must outlive the reader. */
PERFMAP_API struct perfmap_reader *
perfmap_reader__from_mem(const void *data, size_t len,
			 const struct perfmap_reader_opts *opts);
/* Every line. Returns 1 with @line filled, 0 at the end, or -errno. */
PERFMAP_API int perfmap_reader__next_line(struct perfmap_reader *r,
					  struct perfmap_line *line);
/* Entries only. Returns 1 with @rec filled, 0 at the end, or -errno. */
PERFMAP_API int perfmap_reader__next(struct perfmap_reader *r,
				     struct perfmap_record *rec);
PERFMAP_API const struct perfmap_reader_stats *
perfmap_reader__stats(const struct perfmap_reader *r);
PERFMAP_API void perfmap_reader__free(struct perfmap_reader *r);

/* Parse one line (no newline). PERFMAP_REJECT_NONE when it is an entry. */
PERFMAP_API enum perfmap_reject
perfmap_parse_line(const char *text, size_t len, uint64_t max_size,
		   struct perfmap_record *rec);

PERFMAP_API const char *perfmap_reject_str(enum perfmap_reject reject);
/* @bit: 0 .. PERFMAP_QUIRK_COUNT - 1 */
PERFMAP_API const char *perfmap_quirk_str(unsigned int bit);

/* ------------------------------------------------------------------------
 * Opening map paths safely, for privileged readers in a world-writable /tmp.
 * ------------------------------------------------------------------------ */

struct perfmap_open_opts {
	size_t sz;
	bool check_owner;    /* refuse a file not owned by @owner */
	uid_t owner;
	uint64_t max_bytes;  /* refuse larger files; 0: no bound */
};

/*
 * Open @path read-only. Never follows a symlink, never blocks on a FIFO,
 * never opens a device. Returns the fd, or -ELOOP (symlink), -EINVAL (not a
 * regular file), -EMLINK (several hard links), -EPERM (other owner), -EFBIG
 * (over max_bytes), or the errno of open().
 */
PERFMAP_API int perfmap_open_map(const char *path,
				 const struct perfmap_open_opts *opts);
/* Words for an error of perfmap_open_map(): "is a symlink, refused". */
PERFMAP_API const char *perfmap_open_strerror(int err);

/* ------------------------------------------------------------------------
 * Table and compactor: all entries of a map, analysed and written back in
 * the canonical form every consumer reads the same way: "%lx %lx %s\n",
 * sorted, no duplicates, no overlaps (every address keeps the name of the
 * last line that covered it), START and SIZE above 0, names of at least
 * 3 bytes of valid UTF-8 without control bytes.
 * ------------------------------------------------------------------------ */

struct perfmap_table;

struct perfmap_table_stats {
	uint64_t entries;
	uint64_t duplicates;   /* lines repeating an earlier START SIZE NAME */
	uint64_t overlapping;  /* entries intersecting another (dups aside) */
	uint64_t nested;       /* overlapping entries lying inside another */
	uint64_t trimmed;      /* entries losing some bytes to later lines */
	uint64_t hidden;       /* entries losing all their bytes to later lines */
	uint64_t short_names;  /* entries whose names are under 3 bytes */
	uint64_t lines_out;    /* lines of the canonical form */
};

PERFMAP_API struct perfmap_table *perfmap_table__new(void);
PERFMAP_API void perfmap_table__free(struct perfmap_table *t);
/* Entries are kept in the order added: later ones win where they overlap. */
PERFMAP_API int perfmap_table__add(struct perfmap_table *t,
				   const struct perfmap_record *rec);
/* Add every entry @r still has to give. */
PERFMAP_API int perfmap_table__load(struct perfmap_table *t,
				    struct perfmap_reader *r);
PERFMAP_API size_t perfmap_table__count(const struct perfmap_table *t);
PERFMAP_API int perfmap_table__stats(struct perfmap_table *t,
				     struct perfmap_table_stats *stats);
/* Write the canonical form to @fd. */
PERFMAP_API int perfmap_table__write_canonical(struct perfmap_table *t, int fd);
/*
 * Name the address @addr resolves to in the canonical form: the last line
 * covering it. Returns the length and sets *@name, or -ENOENT.
 */
PERFMAP_API ssize_t perfmap_table__lookup(struct perfmap_table *t,
					  uint64_t addr, const char **name);

/* ------------------------------------------------------------------------
 * Consumer verdicts: would perf, samply, blazesym and bcc read this file
 * fully and resolve every entry as written? Each consumer's line parser and
 * lookup are reproduced from its source; see docs/format.md.
 * ------------------------------------------------------------------------ */

enum perfmap_consumer {
	PERFMAP_CONSUMER_PERF,
	PERFMAP_CONSUMER_SAMPLY,
	PERFMAP_CONSUMER_BLAZESYM,
	PERFMAP_CONSUMER_BCC,
	__PERFMAP_CONSUMER_MAX,
};

struct perfmap_verdict {
	bool ok;
	bool file_lost;      /* ignores or fails on the whole file */
	uint64_t lost;       /* entries it drops */
	uint64_t misread;    /* entries read with another start, size or name */
	uint64_t junk;       /* symbols made from lines that are no entries */
	uint64_t missed;     /* addresses its lookup resolves otherwise */
	uint64_t lineno;     /* line of the first problem; 0: none or whole file */
	char reason[192];    /* the first problem, in words */
};

struct perfmap_report {
	struct perfmap_reader_stats read;
	struct perfmap_table_stats table;
	struct perfmap_verdict verdict[__PERFMAP_CONSUMER_MAX];
};

/* Read @r to the end and fill @report. */
PERFMAP_API int perfmap_check(struct perfmap_reader *r,
			      struct perfmap_report *report);
PERFMAP_API const char *perfmap_consumer_str(enum perfmap_consumer c);

#ifdef __cplusplus
}
#endif

#endif /* PERFMAP_H */

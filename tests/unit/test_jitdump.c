/* jitdump: the incremental reader of jit-<pid>.dump files and the perf map it writes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "testutil.h"
#include "jdbuild.h"

static int strcmp_ptr(const char **a, const char **b)
{
	return strcmp(*a, *b);
}

static int memfd_with(const void *data, size_t len)
{
	int fd = memfd_create("jitdump", MFD_CLOEXEC);

	assert_true(fd >= 0);
	if (len)
		assert_int_equal(write(fd, data, len), (ssize_t)len);
	return fd;
}

static void append(int fd, const void *data, size_t len)
{
	off_t end = lseek(fd, 0, SEEK_END);

	assert_true(end >= 0);
	assert_int_equal(pwrite(fd, data, len, end), (ssize_t)len);
}

/* The map perfmap__jitdump_write_map() writes for @pid, as a malloc'd string. */
static char *map_of(const struct perfmap_jitdump *j, uint32_t pid, long *lines)
{
	int fd = memfd_create("map", MFD_CLOEXEC);
	off_t len;
	char *text;

	assert_true(fd >= 0);
	*lines = perfmap__jitdump_write_map(j, fd, pid);
	assert_true(*lines >= 0);
	len = lseek(fd, 0, SEEK_END);
	text = calloc(1, (size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(pread(fd, text, (size_t)len, 0), len);
	close(fd);
	return text;
}

/* Every record kind: debug info, loads, a move, a forked child's load, unwinding, unknown, empty, close. */
static void build_every_kind(struct jdb *b)
{
	jdb_header(b, 100);
	jdb_debug(b, 0x10000, 3, "/app/alpha.py");
	jdb_load(b, 100, 0x10000, 0x100, "jd::alpha");
	jdb_load(b, 100, 0x10100, 0x80, "jd::beta");
	jdb_load(b, 100, 0x10200, 0x40, "jd::gamma");
	jdb_move(b, 100, 0x10200, 0x20000, 0x40);
	/* A forked child writing into its parent's dump: its own pid, the parent's addresses. */
	jdb_load(b, 101, 0x10000, 0x100, "jd::delta");
	jdb_unwind(b);
	jdb_unknown(b, 99, 8);
	jdb_load(b, 100, 0x30000, 0, "jd::empty");
	jdb_load(b, 100, 0x30000, 0x10, "ab");   /* under 3 bytes: perf drops it, so do we */
	jdb_close(b);
}

static const char every_kind_100[] = "10000 100 jd::alpha\n10100 80 jd::beta\n20000 40 jd::gamma\n";

static void check_every_kind(const struct perfmap_jitdump *j)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(j);
	long lines;
	char *text;

	assert_true(s->header);
	assert_int_equal(s->pid, 100);
	assert_int_equal(s->stop, PERFMAP_JITDUMP_OK);
	assert_int_equal(s->records, 11);
	assert_int_equal(s->loads, 6);
	assert_int_equal(s->empty, 1);
	assert_int_equal(s->moves, 1);
	assert_int_equal(s->moves_unmatched, 0);
	assert_int_equal(s->debug_info, 1);
	assert_int_equal(s->debug_entries, 3);
	assert_int_equal(s->closes, 1);
	assert_int_equal(s->skipped, 2);
	assert_int_equal(s->funcs, 5);
	assert_int_equal(s->torn_bytes, 0);
	assert_int_equal(s->replaced, 0);

	/* The move: gamma at its new address only. */
	text = map_of(j, 100, &lines);
	assert_string_equal(text, every_kind_100);
	assert_int_equal(lines, 3);
	free(text);
	text = map_of(j, 101, &lines);
	assert_string_equal(text, "10000 100 jd::delta\n");
	free(text);
	text = map_of(j, 0, &lines);
	assert_int_equal(lines, 4);
	assert_true(tu_has_line(text, "10000 100 jd::delta"));
	assert_true(tu_has_line(text, "20000 40 jd::gamma"));
	free(text);
	text = map_of(j, 4242, &lines);
	assert_string_equal(text, "");
	free(text);
}

static void test_every_kind(void **state)
{
	struct jdb b = { 0 };
	struct perfmap_jitdump *j;
	int fd;

	(void)state;
	build_every_kind(&b);
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	assert_non_null(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 11);
	check_every_kind(j);
	assert_int_equal(perfmap__jitdump_stats(j)->offset, b.len);
	/* Nothing new: nothing read. */
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 0);
	perfmap__jitdump_free(j);
	perfmap__jitdump_free(NULL);
	close(fd);
	jdb_free(&b);
}

/* A writer of the other byte order: read the same (perf reads both). */
static void test_swapped(void **state)
{
	struct jdb b = { .swap = true };
	struct perfmap_jitdump *j;
	int fd;

	(void)state;
	build_every_kind(&b);
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 11);
	assert_true(perfmap__jitdump_stats(j)->swapped);
	check_every_kind(j);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* Fed a byte at a time, and a record at a time: the same as whole. */
static void test_bytewise(void **state)
{
	struct jdb b = { 0 };
	struct perfmap_jitdump *j;
	long total = 0, n;
	size_t i;
	int fd;

	(void)state;
	build_every_kind(&b);
	fd = memfd_with(NULL, 0);
	j = perfmap__jitdump_new();
	for (i = 0; i < b.len; i++) {
		append(fd, b.p + i, 1);
		n = perfmap__jitdump_read(j, fd, 0);
		assert_true(n >= 0);
		total += n;
		/* Whatever is not consumed is torn, and waits. */
		assert_int_equal(perfmap__jitdump_stats(j)->offset +
				 perfmap__jitdump_stats(j)->torn_bytes, i + 1);
	}
	assert_int_equal(total, 11);
	check_every_kind(j);
	perfmap__jitdump_free(j);

	j = perfmap__jitdump_new();
	for (i = 0; i < 11; i++)
		assert_int_equal(perfmap__jitdump_read(j, fd, 1), 1);
	assert_int_equal(perfmap__jitdump_read(j, fd, 1), 0);
	check_every_kind(j);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* A torn last record consumes nothing, and is read whole once the rest is appended. */
static void test_torn_then_completed(void **state)
{
	struct jdb b = { 0 }, tail = { 0 };
	const struct perfmap_jitdump_stats *s;
	struct perfmap_jitdump *j;
	size_t cut, whole;
	long lines;
	char *text;
	int fd;

	(void)state;
	jdb_header(&b, 100);
	jdb_load(&b, 100, 0x10000, 0x100, "jd::alpha");
	whole = b.len;
	jdb_load(&b, 100, 0x10100, 0x80, "jd::beta");
	cut = whole + 30;   /* inside beta's fixed part */
	fd = memfd_with(b.p, cut);
	j = perfmap__jitdump_new();
	s = perfmap__jitdump_stats(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 1);
	assert_int_equal(s->offset, whole);
	assert_int_equal(s->torn_bytes, 30);
	/* Then inside its code bytes: still waiting. */
	append(fd, b.p + cut, b.len - cut - 5);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 0);
	assert_int_equal(s->offset, whole);
	assert_int_equal(s->torn_bytes, b.len - whole - 5);
	text = map_of(j, 100, &lines);
	assert_string_equal(text, "10000 100 jd::alpha\n");
	free(text);
	append(fd, b.p + b.len - 5, 5);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 1);
	assert_int_equal(s->torn_bytes, 0);
	assert_int_equal(s->offset, b.len);
	/* A later append: a move, tailed. */
	jdb_move(&tail, 100, 0x10100, 0x50000, 0x80);
	append(fd, tail.p, tail.len);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 1);
	text = map_of(j, 100, &lines);
	assert_string_equal(text, "10000 100 jd::alpha\n50000 80 jd::beta\n");
	free(text);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
	jdb_free(&tail);

	/* A torn header: nothing yet, then the dump. */
	jdb_header(&b, 100);
	jdb_load(&b, 100, 0x10000, 0x100, "jd::alpha");
	fd = memfd_with(b.p, 10);
	j = perfmap__jitdump_new();
	s = perfmap__jitdump_stats(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 0);
	assert_false(s->header);
	assert_int_equal(s->torn_bytes, 10);
	append(fd, b.p + 10, b.len - 10);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 1);
	assert_true(s->header);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* Code loaded over live code replaces it, whole; a move onto live code too; an unmatched move is counted. */
static void test_overlap_and_moves(void **state)
{
	struct jdb b = { 0 };
	const struct perfmap_jitdump_stats *s;
	struct perfmap_jitdump *j;
	long lines;
	char *text;
	int fd;

	(void)state;
	jdb_header(&b, 100);
	jdb_load(&b, 100, 0x1000, 0x100, "jd::a");
	jdb_load(&b, 100, 0x1100, 0x100, "jd::b");
	jdb_load(&b, 100, 0x1200, 0x100, "jd::c");
	jdb_load(&b, 100, 0x1300, 0x100, "jd::d");
	jdb_load(&b, 100, 0x1080, 0x100, "jd::ab");   /* over a's tail and b's head */
	jdb_load(&b, 100, 0x1300, 0x100, "jd::d2");   /* d's very range: recompiled */
	jdb_move(&b, 100, 0x1200, 0x1300, 0x100);     /* c onto d2 */
	jdb_move(&b, 100, 0x9999, 0xa000, 0x10);      /* nothing there */
	jdb_move(&b, 101, 0x1080, 0xb000, 0x100);     /* another pid's: not ours */
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	s = perfmap__jitdump_stats(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 9);
	assert_int_equal(s->moves, 3);
	assert_int_equal(s->moves_unmatched, 2);
	assert_int_equal(s->replaced, 4);   /* a, b, d, d2 */
	assert_int_equal(s->funcs, 2);
	text = map_of(j, 100, &lines);
	assert_string_equal(text, "1080 100 jd::ab\n1300 100 jd::c\n");
	free(text);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* Many functions in falling address order: the tree stays usable, the map sorted. */
static void test_many(void **state)
{
	struct jdb b = { 0 };
	struct perfmap_jitdump *j;
	char name[32], *text, *p;
	uint64_t prev = 0, start;
	long lines;
	int i, fd;

	(void)state;
	jdb_header(&b, 100);
	for (i = 20000; i > 0; i--) {
		snprintf(name, sizeof(name), "jd::f%d", i);
		jdb_load(&b, 100, 0x100000 + (uint64_t)i * 0x10, 0x10, name);
	}
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 20000);
	text = map_of(j, 100, &lines);
	assert_int_equal(lines, 20000);
	for (p = text; *p; p = strchr(p, '\n') + 1) {
		start = strtoull(p, NULL, 16);
		assert_true(start > prev);
		prev = start;
	}
	free(text);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* The lines of @text sorted, one string (a multiset compared as text). */
static char *sorted_lines(const char *text)
{
	size_t n = 0, i, len = strlen(text);
	char *copy = strdup(text), **v, *p, *out;

	assert_non_null(copy);
	for (p = copy; *p; p++)
		n += *p == '\n';
	v = calloc(n + 1, sizeof(*v));
	out = calloc(1, len + 1);
	assert_true(v && out);
	for (i = 0, p = strtok(copy, "\n"); p; p = strtok(NULL, "\n"))
		v[i++] = p;
	qsort(v, i, sizeof(*v), (int (*)(const void *, const void *))strcmp_ptr);
	for (n = 0; n < i; n++) {
		strcat(out, v[n]);
		strcat(out, "\n");
	}
	free(v);
	free(copy);
	return out;
}

/* What perfmap__jitdump_write_since() writes after @seq, as a string. */
static char *since_of(const struct perfmap_jitdump *j, uint32_t pid, uint64_t seq)
{
	int fd = memfd_create("since", MFD_CLOEXEC);
	off_t len;
	char *text;

	assert_true(fd >= 0);
	assert_true(perfmap__jitdump_write_since(j, fd, pid, seq) >= 0);
	len = lseek(fd, 0, SEEK_END);
	text = calloc(1, (size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(pread(fd, text, (size_t)len, 0), len);
	close(fd);
	return text;
}

/*
 * An append writes exactly what the map lacks: the map before, with what
 * perfmap__jitdump_write_since() gives after it, is the map now, round after
 * round, across reloads by the ten thousand (the load log made again many
 * times over) and a second pid's loads in between.
 */
static void test_appends_are_what_the_map_lacks(void **state)
{
	struct perfmap_jitdump *j = perfmap__jitdump_new();
	char name[32], *before, *added, *now, *joined, *a, *b;
	uint64_t seq, next = 0x200000;
	struct jdb rec = { 0 };
	int round, i, fd;
	long lines;

	(void)state;
	jdb_header(&rec, 100);
	fd = memfd_with(rec.p, rec.len);
	rec.len = 0;
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 0);
	for (round = 0; round < 6; round++) {
		/* Reloads over live code: removals, which an append cannot express; the log grows. */
		for (i = 0; i < 12000; i++) {
			snprintf(name, sizeof(name), "jd::re%d_%d", round, i);
			jdb_load(&rec, 100, 0x100000 + (uint64_t)(i % 64) * 0x10, 0x10, name);
		}
		append(fd, rec.p, rec.len);
		rec.len = 0;
		assert_true(perfmap__jitdump_read(j, fd, 0) > 0);
		before = map_of(j, 100, &lines);
		seq = perfmap__jitdump_seq(j);
		/* Then loads only: new ranges of pid 100, and pid 200's, which pid 100's append leaves out. */
		for (i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "jd::new%d_%d", round, i);
			next += 0x100;
			jdb_load(&rec, i % 5 ? 100 : 200, next, 0x40, name);
		}
		append(fd, rec.p, rec.len);
		rec.len = 0;
		assert_true(perfmap__jitdump_read(j, fd, 0) > 0);
		added = since_of(j, 100, seq);
		now = map_of(j, 100, &lines);
		joined = calloc(1, strlen(before) + strlen(added) + 1);
		assert_non_null(joined);
		strcat(strcat(joined, before), added);
		a = sorted_lines(joined);
		b = sorted_lines(now);
		assert_string_equal(a, b);
		assert_null(strstr(added, "jd::re"));
		free(a);
		free(b);
		free(joined);
		free(now);
		free(added);
		free(before);
	}
	/* Nothing new: nothing to append. */
	added = since_of(j, 100, perfmap__jitdump_seq(j));
	assert_string_equal(added, "");
	free(added);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&rec);
}

/* Names as every consumer reads them: no leading blanks, control bytes as '?', cut as the writer cuts. */
static void test_names(void **state)
{
	static char longname[5001];
	struct jdb b = { 0 };
	struct perfmap_jitdump *j;
	char want[4200], *text;
	long lines;
	int fd;

	(void)state;
	memset(longname, 'x', sizeof(longname) - 1);
	jdb_header(&b, 100);
	jdb_load(&b, 100, 0x1000, 0x10, "  jd::lead");
	jdb_load(&b, 100, 0x2000, 0x10, "   ab");       /* short once the blanks go */
	jdb_load(&b, 100, 0x3000, 0x10, "jd::a\nb\rc");
	jdb_load(&b, 100, 0x4000, 0x10, longname);
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 4);
	text = map_of(j, 100, &lines);
	snprintf(want, sizeof(want), "1000 10 jd::lead\n3000 10 jd::a?b?c\n4000 10 %.4000s\n", longname);
	assert_string_equal(text, want);
	assert_int_equal(lines, 3);
	free(text);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

struct bad_case {
	const char *what;
	enum perfmap_jitdump_stop want;
	bool in_header;
};

/* One dump per malformed case: a good load first, then the bad part. */
static void build_bad(struct jdb *b, int k)
{
	static char longname[70000];
	size_t at;

	if (k >= 10) {
		switch (k) {
		case 10: jdb_header_raw(b, 0x12345678, 1, 40, 100); break;
		case 11: jdb_header_raw(b, JDB_MAGIC, 2, 40, 100); break;
		case 12: jdb_header_raw(b, JDB_MAGIC, 1, 1u << 20, 100); break;
		case 13: jdb_header_raw(b, JDB_MAGIC, 1, 8, 100); break;
		case 14: jdb_header_raw(b, JDB_MAGIC, 1, 40, 0); break;
		}
		jdb_load(b, 100, 0x10000, 0x10, "jd::alpha");
		return;
	}
	jdb_header(b, 100);
	jdb_load(b, 100, 0x10000, 0x10, "jd::alpha");
	switch (k) {
	case 0: /* record size 0 */
		jdb_u32(b, 0); jdb_u32(b, 0); jdb_u64(b, 0);
		break;
	case 1: /* below the record header */
		jdb_u32(b, 0); jdb_u32(b, 8); jdb_u64(b, 0);
		break;
	case 2: /* 4 GiB, in a short file: refused at once, not waited for */
		jdb_u32(b, 0); jdb_u32(b, 0xffffffffu); jdb_u64(b, 0);
		break;
	case 3: /* a name without its NUL: "jd::x" then the code bytes */
		jdb_prefix(b, 0, 56 + 5 + 4);
		jdb_u32(b, 100); jdb_u32(b, 100);
		jdb_u64(b, 0x20000); jdb_u64(b, 0x20000); jdb_u64(b, 4); jdb_u64(b, 1);
		jdb_bytes(b, "jd::x", 5);
		jdb_bytes(b, "\x90\x90\x90\x90", 4);
		break;
	case 4: /* a huge code size */
		jdb_prefix(b, 0, 56 + 10);
		jdb_u32(b, 100); jdb_u32(b, 100);
		jdb_u64(b, 0x20000); jdb_u64(b, 0x20000); jdb_u64(b, 1ull << 40); jdb_u64(b, 1);
		jdb_bytes(b, "jd::huge", 9);
		jdb_bytes(b, NULL, 1);
		break;
	case 5: /* a code size larger than its record */
		jdb_prefix(b, 0, 56 + 10);
		jdb_u32(b, 100); jdb_u32(b, 100);
		jdb_u64(b, 0x20000); jdb_u64(b, 0x20000); jdb_u64(b, 100); jdb_u64(b, 1);
		jdb_bytes(b, "jd::big", 8);
		jdb_bytes(b, NULL, 2);
		break;
	case 6: /* a name past the bound */
		memset(longname, 'n', sizeof(longname));
		jdb_prefix(b, 0, 56 + sizeof(longname));
		jdb_u32(b, 100); jdb_u32(b, 100);
		jdb_u64(b, 0x20000); jdb_u64(b, 0x20000); jdb_u64(b, 0); jdb_u64(b, 1);
		jdb_bytes(b, longname, sizeof(longname));
		break;
	case 7: /* code at address 0 */
		jdb_load(b, 100, 0, 0x10, "jd::zero");
		break;
	case 8: /* debug info claiming more entries than fit */
		at = b->len;
		jdb_debug(b, 0x10000, 2, "/app/x.py");
		memcpy(b->p + at + 24, &(uint64_t){ 3 }, 8);
		break;
	case 9: /* a load too short for its fixed part */
		jdb_prefix(b, 0, 40);
		jdb_bytes(b, NULL, 24);
		break;
	}
}

static const struct bad_case bad_cases[] = {
	{ "record size 0", PERFMAP_JITDUMP_RECORD_TOO_SMALL, false },
	{ "record size below its header", PERFMAP_JITDUMP_RECORD_TOO_SMALL, false },
	{ "record size 4 GiB", PERFMAP_JITDUMP_RECORD_TOO_LARGE, false },
	{ "name without NUL", PERFMAP_JITDUMP_NAME_UNTERMINATED, false },
	{ "huge code size", PERFMAP_JITDUMP_CODE_SIZE, false },
	{ "code size past its record", PERFMAP_JITDUMP_CODE_SIZE, false },
	{ "name past the bound", PERFMAP_JITDUMP_NAME_TOO_LONG, false },
	{ "code at 0", PERFMAP_JITDUMP_BAD_RANGE, false },
	{ "debug info entries past the record", PERFMAP_JITDUMP_BAD_DEBUG_INFO, false },
	{ "load below its fixed part", PERFMAP_JITDUMP_RECORD_TOO_SMALL, false },
	{ "bad magic", PERFMAP_JITDUMP_BAD_MAGIC, true },
	{ "bad version", PERFMAP_JITDUMP_BAD_VERSION, true },
	{ "header claiming 1 MiB", PERFMAP_JITDUMP_BAD_HEADER_SIZE, true },
	{ "header claiming 8 bytes", PERFMAP_JITDUMP_BAD_HEADER_SIZE, true },
	{ "header pid 0", PERFMAP_JITDUMP_BAD_PID, true },
};

/* Each malformed case stops the file with its reason and offset; what came before stays. */
static void test_malformed(void **state)
{
	const struct perfmap_jitdump_stats *s;
	struct jdb more = { 0 };
	struct perfmap_jitdump *j;
	size_t k, good;
	long lines;
	char *text;
	int fd;

	(void)state;
	jdb_load(&more, 100, 0x40000, 0x10, "jd::later");
	for (k = 0; k < sizeof(bad_cases) / sizeof(bad_cases[0]); k++) {
		struct jdb b = { 0 };

		print_message("case: %s\n", bad_cases[k].what);
		build_bad(&b, (int)k);
		fd = memfd_with(b.p, b.len);
		j = perfmap__jitdump_new();
		s = perfmap__jitdump_stats(j);
		assert_int_equal(perfmap__jitdump_read(j, fd, 0), -EBADMSG);
		assert_int_equal(s->stop, bad_cases[k].want);
		assert_string_not_equal(perfmap__jitdump_stop_str(s->stop), "unknown");
		good = 40 + 56 + strlen("jd::alpha") + 1 + 0x10;
		if (bad_cases[k].in_header) {
			assert_false(s->header);
			assert_int_equal(s->stop_offset, 0);
			assert_int_equal(s->funcs, 0);
		} else {
			assert_int_equal(s->stop_offset, good);
			assert_int_equal(s->offset, good);
			text = map_of(j, 100, &lines);
			assert_string_equal(text, "10000 10 jd::alpha\n");
			free(text);
		}
		/* Stopped for good: a valid record appended is not read. */
		append(fd, more.p, more.len);
		assert_int_equal(perfmap__jitdump_read(j, fd, 0), -EBADMSG);
		assert_int_equal(s->stop, bad_cases[k].want);
		assert_true(s->funcs <= 1);
		perfmap__jitdump_free(j);
		close(fd);
		jdb_free(&b);
	}
	jdb_free(&more);
	assert_string_equal(perfmap__jitdump_stop_str(__PERFMAP_JITDUMP_STOP_MAX), "unknown");
}

/* What names @addr of @pid: "name file:line", "name" without a line, "-" for nothing. */
static const char *sym_at(const struct perfmap_jitdump *j, uint32_t pid, uint64_t addr)
{
	static char buf[8192];
	struct perfmap_jitdump_sym sym;

	if (perfmap__jitdump_lookup(j, pid, addr, &sym))
		return "-";
	assert_int_equal(strlen(sym.name), sym.name_len);
	assert_true(addr >= sym.start && addr - sym.start < sym.size);
	if (sym.file)
		snprintf(buf, sizeof(buf), "%s %s:%u", sym.name, sym.file, sym.line);
	else
		snprintf(buf, sizeof(buf), "%s", sym.name);
	return buf;
}

/* A debug record of @n entries at @addrs, each with its line and file (NULL: "\xff", the previous one's). */
static void debug_raw(struct jdb *b, uint64_t code_addr, size_t n, const uint64_t *addrs,
		      const uint32_t *lines, const char *const *files)
{
	size_t total = 32, i;

	for (i = 0; i < n; i++)
		total += 16 + (files[i] ? strlen(files[i]) + 1 : 2);
	jdb_prefix(b, 2, (uint32_t)total);
	jdb_u64(b, code_addr);
	jdb_u64(b, n);
	for (i = 0; i < n; i++) {
		jdb_u64(b, addrs[i]);
		jdb_u32(b, lines[i]);
		jdb_u32(b, 0);
		if (files[i])
			jdb_bytes(b, files[i], strlen(files[i]) + 1);
		else
			jdb_bytes(b, "\xff", 2);
	}
}

/* Every kind's dump, line tables kept: alpha's lines, in either byte order; none without keeping them. */
static void test_lines_every_kind(void **state)
{
	const struct perfmap_jitdump_stats *s;
	struct perfmap_jitdump *j;
	int swap, fd;

	(void)state;
	for (swap = 0; swap < 2; swap++) {
		struct jdb b = { .swap = swap };

		build_every_kind(&b);
		fd = memfd_with(b.p, b.len);
		j = perfmap__jitdump_new();
		perfmap__jitdump_keep_lines(j, 1u << 20);
		s = perfmap__jitdump_stats(j);
		assert_int_equal(perfmap__jitdump_read(j, fd, 0), 11);
		check_every_kind(j);
		assert_int_equal(s->lines_tables, 1);
		assert_true(s->lines_bytes > 0 && s->lines_bytes < 256);
		assert_int_equal(s->lines_over, 0);
		assert_int_equal(s->lines_unattached, 0);
		/* jdb_debug: entries at +0, +4, +8, lines 10, 11, 12; each holds until the next. */
		assert_string_equal(sym_at(j, 100, 0x10000), "jd::alpha /app/alpha.py:10");
		assert_string_equal(sym_at(j, 100, 0x10003), "jd::alpha /app/alpha.py:10");
		assert_string_equal(sym_at(j, 100, 0x10004), "jd::alpha /app/alpha.py:11");
		assert_string_equal(sym_at(j, 100, 0x10009), "jd::alpha /app/alpha.py:12");
		assert_string_equal(sym_at(j, 100, 0x100ff), "jd::alpha /app/alpha.py:12");
		assert_string_equal(sym_at(j, 100, 0x10100), "jd::beta");
		/* The moved function, at its new address only; the child's, by its pid. */
		assert_string_equal(sym_at(j, 100, 0x20010), "jd::gamma");
		assert_string_equal(sym_at(j, 100, 0x10210), "-");
		assert_string_equal(sym_at(j, 101, 0x10004), "jd::delta");
		assert_string_equal(sym_at(j, 102, 0x10004), "-");
		assert_string_equal(sym_at(j, 100, 0xffff), "-");
		assert_string_equal(sym_at(j, 100, 0x20040), "-");
		perfmap__jitdump_free(j);

		/* Not asked for: not kept, the names the same. */
		j = perfmap__jitdump_new();
		s = perfmap__jitdump_stats(j);
		assert_int_equal(perfmap__jitdump_read(j, fd, 0), 11);
		assert_int_equal(s->lines_tables + s->lines_bytes + s->lines_unattached, 0);
		assert_string_equal(sym_at(j, 100, 0x10004), "jd::alpha");
		perfmap__jitdump_free(j);
		close(fd);
		jdb_free(&b);
	}
}

/*
 * Tables go with their functions: to the load of their code_addr only, moved
 * along, freed when replaced; entries outside the code left out, unsorted
 * ones sorted, "\xff" the previous file, long names cut; and the bound.
 */
static void test_lines_tables(void **state)
{
	static char longfile[PERFMAP_JITDUMP_FILE_MAX + 100];
	const uint64_t addrs[] = { 0x1030, 0x1010, 0x0ff0, 0x1000, 0x1020, 0x1100 };
	const uint32_t lines[] = { 4, 2, 99, 1, 3, 98 };
	const char *const files[] = { "/b.js", "/a.js", "/out.js", NULL, NULL, "/past.js" };
	const char *const cut[] = { longfile };
	const struct perfmap_jitdump_stats *s;
	struct jdb b = { 0 };
	struct perfmap_jitdump *j;
	char want[PERFMAP_JITDUMP_FILE_MAX + 64];
	uint64_t one;
	int fd;

	(void)state;
	memset(longfile, 'f', sizeof(longfile) - 1);
	longfile[0] = '/';
	jdb_header(&b, 100);
	debug_raw(&b, 0x1000, 6, addrs, lines, files);
	jdb_load(&b, 100, 0x1000, 0x100, "jd::sorted");
	jdb_debug(&b, 0x5000, 2, "/never.js");          /* no load of 0x5000 follows */
	jdb_load(&b, 100, 0x2000, 0x40, "jd::plain");
	jdb_debug(&b, 0x3000, 2, "/moved.js");
	jdb_close(&b);                                  /* between: still pending */
	jdb_load(&b, 100, 0x3000, 0x40, "jd::mover");
	jdb_move(&b, 100, 0x3000, 0x7000, 0x40);
	debug_raw(&b, 0x4000, 1, (const uint64_t[]){ 0x4000 }, (const uint32_t[]){ 7 }, cut);
	jdb_load(&b, 100, 0x4000, 0x10, "jd::longfile");
	/* After its load, as some producers write it: that function's. After a move: nobody's. */
	jdb_load(&b, 100, 0x6000, 0x40, "jd::after");
	jdb_debug(&b, 0x6000, 3, "/after.js");
	jdb_load(&b, 100, 0x8000, 0x40, "jd::movedaway");
	jdb_move(&b, 100, 0x8000, 0x8100, 0x40);
	jdb_debug(&b, 0x8100, 3, "/late.js");
	jdb_close(&b);
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	perfmap__jitdump_keep_lines(j, 1u << 20);
	s = perfmap__jitdump_stats(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 16);
	assert_int_equal(s->stop, PERFMAP_JITDUMP_OK);
	assert_int_equal(s->lines_tables, 4);
	/* Still pending at the end, /late.js is nobody's yet: not counted. */
	assert_int_equal(s->lines_unattached, 1);
	assert_string_equal(sym_at(j, 100, 0x6008), "jd::after /after.js:12");
	assert_string_equal(sym_at(j, 100, 0x8104), "jd::movedaway");
	/* The entry below the code and the one past it are left out; "\xff" after /out.js is /out.js. */
	assert_string_equal(sym_at(j, 100, 0x1000), "jd::sorted /out.js:1");
	assert_string_equal(sym_at(j, 100, 0x1018), "jd::sorted /a.js:2");
	assert_string_equal(sym_at(j, 100, 0x1020), "jd::sorted /out.js:3");
	assert_string_equal(sym_at(j, 100, 0x10ff), "jd::sorted /b.js:4");
	assert_string_equal(sym_at(j, 100, 0x2000), "jd::plain");
	assert_string_equal(sym_at(j, 100, 0x7004), "jd::mover /moved.js:11");
	assert_string_equal(sym_at(j, 100, 0x3004), "-");
	snprintf(want, sizeof(want), "jd::longfile %.*s:7", (int)PERFMAP_JITDUMP_FILE_MAX, longfile);
	assert_string_equal(sym_at(j, 100, 0x4000), want);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);

	/* The bound: room for one table; the second is counted, kept once the first is replaced. */
	jdb_header(&b, 100);
	jdb_debug(&b, 0x1000, 3, "/app/one.js");
	jdb_load(&b, 100, 0x1000, 0x40, "jd::one");
	fd = memfd_with(b.p, b.len);
	j = perfmap__jitdump_new();
	perfmap__jitdump_keep_lines(j, 1u << 20);
	s = perfmap__jitdump_stats(j);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 2);
	one = s->lines_bytes;
	perfmap__jitdump_free(j);
	j = perfmap__jitdump_new();
	perfmap__jitdump_keep_lines(j, one + one / 2);
	s = perfmap__jitdump_stats(j);
	jdb_free(&b);
	jdb_debug(&b, 0x2000, 3, "/app/two.js");
	jdb_load(&b, 100, 0x2000, 0x40, "jd::two");
	append(fd, b.p, b.len);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 4);
	assert_int_equal(s->lines_tables, 1);
	assert_int_equal(s->lines_bytes, one);
	assert_int_equal(s->lines_over, 1);
	assert_string_equal(sym_at(j, 100, 0x1004), "jd::one /app/one.js:11");
	assert_string_equal(sym_at(j, 100, 0x2004), "jd::two");
	/* one reloaded without lines: its table goes, and the next fits. */
	jdb_free(&b);
	jdb_load(&b, 100, 0x1000, 0x40, "jd::one2");
	jdb_debug(&b, 0x3000, 3, "/app/three.js");
	jdb_load(&b, 100, 0x3000, 0x40, "jd::three");
	append(fd, b.p, b.len);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 3);
	assert_int_equal(s->lines_tables, 1);
	assert_int_equal(s->lines_over, 1);
	assert_string_equal(sym_at(j, 100, 0x1004), "jd::one2");
	assert_string_equal(sym_at(j, 100, 0x3008), "jd::three /app/three.js:12");
	/* A move to size 0 frees it too. */
	jdb_free(&b);
	jdb_move(&b, 100, 0x3000, 0x9000, 0);
	append(fd, b.p, b.len);
	assert_int_equal(perfmap__jitdump_read(j, fd, 0), 1);
	assert_int_equal(s->lines_tables, 0);
	assert_int_equal(s->lines_bytes, 0);
	perfmap__jitdump_free(j);
	close(fd);
	jdb_free(&b);
}

/* Only regular files: a pipe could block and cannot be read at an offset. */
static void test_not_regular(void **state)
{
	struct perfmap_jitdump *j = perfmap__jitdump_new();
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(perfmap__jitdump_read(j, p[0], 0), -EINVAL);
	perfmap__jitdump_free(j);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_swapped),
		cmocka_unit_test(test_bytewise),
		cmocka_unit_test(test_torn_then_completed),
		cmocka_unit_test(test_overlap_and_moves),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_appends_are_what_the_map_lacks),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_lines_every_kind),
		cmocka_unit_test(test_lines_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

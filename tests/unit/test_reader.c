/* Reader tests: lines as real producers write them, torn tails, garbage, bounds, streaming. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfmap.h"
#include "testutil.h"

struct producer_line {
	const char *who;
	const char *line;
	uint64_t start, size;
	const char *name;
	unsigned int quirks;
};

/* What each runtime writes, from its source or a map it produced. */
static const struct producer_line producers[] = {
	{ "CPython 3.12 -X perf", "7f3b2c1a2000 b py::fib:/app/fib.py",
	  0x7f3b2c1a2000, 0xb, "py::fib:/app/fib.py", 0 },
	{ "CPython, path with spaces", "7f3b2c1a200b b py::<module>:/my app/x.py",
	  0x7f3b2c1a200b, 0xb, "py::<module>:/my app/x.py", 0 },
	{ "V8 --perf-basic-prof", "3ef2a8c0a0e0 1c4 LazyCompile:*fib /app/fib.js:1:13",
	  0x3ef2a8c0a0e0, 0x1c4, "LazyCompile:*fib /app/fib.js:1:13", 0 },
	{ "V8 builtin", "1a5e06540 58 Builtin:ArgumentsAdaptorTrampoline",
	  0x1a5e06540, 0x58, "Builtin:ArgumentsAdaptorTrampoline", 0 },
	{ ".NET PerfMapEnabled", "00007FF8A3B41230 1F [OptimizedTier1] System.String::Concat(string,string)[Optimized]",
	  0x7ff8a3b41230, 0x1f, "[OptimizedTier1] System.String::Concat(string,string)[Optimized]",
	  PERFMAP_QUIRK_UPPER_HEX | PERFMAP_QUIRK_ZERO_PAD },
	{ "HotSpot jcmd Compiler.perfmap", "0x00007f2d4d0f0000 0x0000000000000180 Interpreter",
	  0x7f2d4d0f0000, 0x180, "Interpreter",
	  PERFMAP_QUIRK_HEX_PREFIX | PERFMAP_QUIRK_ZERO_PAD },
	{ "HotSpot nmethod", "0x00007f2d54a1c510 0x00000000000001f8 java.lang.String::hashCode()I",
	  0x7f2d54a1c510, 0x1f8, "java.lang.String::hashCode()I",
	  PERFMAP_QUIRK_HEX_PREFIX | PERFMAP_QUIRK_ZERO_PAD },
	{ "LuaJIT perftools", "7f5c2a3c0000 13c TRACE_1::/app/x.lua:12",
	  0x7f5c2a3c0000, 0x13c, "TRACE_1::/app/x.lua:12", 0 },
	{ "Wasmtime (0x build)", "0x7f4b5c001000 0x1a wasm[0]::function[12]",
	  0x7f4b5c001000, 0x1a, "wasm[0]::function[12]", PERFMAP_QUIRK_HEX_PREFIX },
	{ "Ruby YJIT", "7f8a1c00d040 2c [JIT] block in <main>@/app/a.rb:3",
	  0x7f8a1c00d040, 0x2c, "[JIT] block in <main>@/app/a.rb:3", 0 },
	{ "tab separated", "7f0000001000\t40\tjit_tab",
	  0x7f0000001000, 0x40, "jit_tab", PERFMAP_QUIRK_TAB },
	{ "repeated blanks", "  7f0000001000   40  jit_spaces",
	  0x7f0000001000, 0x40, "jit_spaces",
	  PERFMAP_QUIRK_LEADING_BLANK | PERFMAP_QUIRK_MULTI_BLANK },
	{ "CRLF", "7f0000001000 40 jit_crlf\r",
	  0x7f0000001000, 0x40, "jit_crlf", PERFMAP_QUIRK_CRLF },
	{ "short name", "7f0000001000 40 ab",
	  0x7f0000001000, 0x40, "ab", PERFMAP_QUIRK_SHORT_NAME },
	{ "control byte", "7f0000001000 40 a\x01z",
	  0x7f0000001000, 0x40, "a\x01z", PERFMAP_QUIRK_CONTROL },
	{ "UTF-8 name", "7f0000001000 40 \xe5\x87\xbd\xe6\x95\xb0::\xf0\x9f\x90\x8d",
	  0x7f0000001000, 0x40, "\xe5\x87\xbd\xe6\x95\xb0::\xf0\x9f\x90\x8d", 0 },
	{ "largest end", "fffffffffffffff0 f at_the_top",
	  0xfffffffffffffff0ull, 0xf, "at_the_top", 0 },
};

static void test_producer_lines(void **state)
{
	struct perfmap_record rec;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(producers) / sizeof(producers[0]); i++) {
		const struct producer_line *p = &producers[i];

		print_message("  %s\n", p->who);
		assert_int_equal(perfmap_parse_line(p->line, strlen(p->line), 0, &rec),
				 PERFMAP_REJECT_NONE);
		assert_int_equal(rec.start, p->start);
		assert_int_equal(rec.size, p->size);
		assert_int_equal(rec.name_len, strlen(p->name));
		assert_memory_equal(rec.name, p->name, rec.name_len);
		assert_int_equal(rec.quirks, p->quirks);
	}
}

struct bad_line {
	const char *line;
	size_t len;  /* 0: strlen */
	enum perfmap_reject want;
};

static const struct bad_line bad[] = {
	{ "hello world", 0, PERFMAP_REJECT_GARBAGE },
	{ "# comment 12 34", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000 40", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000 40 ", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000 xx name", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000-40 name", 0, PERFMAP_REJECT_GARBAGE },
	{ "-1 40 name", 0, PERFMAP_REJECT_GARBAGE },
	{ "0x 40 name", 0, PERFMAP_REJECT_GARBAGE },
	{ "10000000000000000 40 name", 0, PERFMAP_REJECT_GARBAGE },
	{ "7f0000001000\v40 name", 0, PERFMAP_REJECT_GARBAGE },
	{ "   ", 0, PERFMAP_REJECT_GARBAGE },
	{ "0 40 at_zero", 0, PERFMAP_REJECT_ZERO_START },
	{ "7f0000001000 0 empty_fn", 0, PERFMAP_REJECT_ZERO_SIZE },
	{ "7f0000001000 40000001 huge_fn", 0, PERFMAP_REJECT_HUGE_SIZE },
	{ "fffffffffffffff0 10 end_is_2_pow_64", 0, PERFMAP_REJECT_OVERFLOW },
	{ "ffffffffffffffff ffffffffffffffff wraps", 0, PERFMAP_REJECT_OVERFLOW },
	{ "7f0000001000 40 bad\xff", 0, PERFMAP_REJECT_BAD_UTF8 },
	{ "7f0000001000 40 overlong\xc0\xaf", 0, PERFMAP_REJECT_BAD_UTF8 },
	{ "7f0000001000 40 surrogate\xed\xa0\x80", 0, PERFMAP_REJECT_BAD_UTF8 },
	{ "7f0000001000 40 too_high\xf4\x90\x80\x80", 0, PERFMAP_REJECT_BAD_UTF8 },
	{ "7f0000001000 40 cut\xe2\x82", 0, PERFMAP_REJECT_BAD_UTF8 },
	{ "7f0000001000 40 nul\0inside", 24, PERFMAP_REJECT_NONE },
};

static void test_rejects_by_kind(void **state)
{
	struct perfmap_record rec;
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		len = bad[i].len ? bad[i].len : strlen(bad[i].line);
		assert_int_equal(perfmap_parse_line(bad[i].line, len, 0, &rec), bad[i].want);
	}
	/* A NUL in a name is a control byte: accepted, flagged. */
	assert_int_equal(perfmap_parse_line(bad[i - 1].line, bad[i - 1].len, 0, &rec),
			 PERFMAP_REJECT_NONE);
	assert_true(rec.quirks & PERFMAP_QUIRK_CONTROL);
	/* max_size is the caller's. */
	assert_int_equal(perfmap_parse_line("1000 100 name", 13, 0xff, &rec),
			 PERFMAP_REJECT_HUGE_SIZE);
}

static const char mixed[] =
	"7f0000001000 40 py::first\n"
	"\n"
	"garbage line here\n"
	"7f0000001040 20 py::crlf\r\n"
	"\r\n"
	"0 10 zero_start\n"
	"7f0000001060 0 zero_size\n"
	"7f0000001080 10 bad\xff\n"
	"7f00000010a0\t10\tpy::tab\n"
	"7f00000010b0 10 py::torn_in_the_mid";

static void check_mixed_stats(const struct perfmap_reader_stats *s)
{
	assert_int_equal(s->lines, 9);
	assert_int_equal(s->entries, 3);
	assert_int_equal(s->empty, 2);
	assert_int_equal(s->rejected[PERFMAP_REJECT_GARBAGE], 1);
	assert_int_equal(s->rejected[PERFMAP_REJECT_ZERO_START], 1);
	assert_int_equal(s->rejected[PERFMAP_REJECT_ZERO_SIZE], 1);
	assert_int_equal(s->rejected[PERFMAP_REJECT_BAD_UTF8], 1);
	assert_int_equal(s->incomplete_bytes, strlen("7f00000010b0 10 py::torn_in_the_mid"));
	assert_int_equal(s->quirks[6], 1);  /* CRLF */
	assert_int_equal(s->quirks[4], 1);  /* tab */
	assert_int_equal(s->bytes, sizeof(mixed) - 1);
	assert_false(s->truncated);
}

static void test_mixed_file_from_memory(void **state)
{
	struct perfmap_reader *r = perfmap_reader__from_mem(mixed, sizeof(mixed) - 1, NULL);
	struct perfmap_record rec;
	const char *names[] = { "py::first", "py::crlf", "py::tab" };
	int n = 0;

	(void)state;
	assert_non_null(r);
	while (perfmap_reader__next(r, &rec) > 0) {
		assert_true(n < 3);
		assert_int_equal(rec.name_len, strlen(names[n]));
		assert_memory_equal(rec.name, names[n], rec.name_len);
		n++;
	}
	assert_int_equal(n, 3);
	check_mixed_stats(perfmap_reader__stats(r));
	perfmap_reader__free(r);
}

static int temp_file(const char *data, size_t len)
{
	char path[] = "/tmp/perfmap-reader.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* The same file through an fd with a buffer smaller than the file: refills. */
static void test_mixed_file_streamed(void **state)
{
	PERFMAP_OPTS(perfmap_reader_opts, opts, .max_line = 40);
	int fd = temp_file(mixed, sizeof(mixed) - 1);
	struct perfmap_reader *r = perfmap_reader__from_fd(fd, &opts);
	struct perfmap_line line;
	int n = 0;

	(void)state;
	assert_non_null(r);
	while (perfmap_reader__next_line(r, &line) > 0)
		n++;
	assert_int_equal(n, 10);
	assert_int_equal(line.kind, PERFMAP_LINE_INCOMPLETE);
	check_mixed_stats(perfmap_reader__stats(r));
	perfmap_reader__free(r);
	close(fd);
}

/* Lines longer than max_line are rejected without ever being held whole. */
static void test_long_lines_bounded(void **state)
{
	PERFMAP_OPTS(perfmap_reader_opts, opts, .max_line = 64);
	char buf[2048];
	struct perfmap_reader *r;
	struct perfmap_record rec;
	size_t off = 0;
	int fd, n = 0;

	(void)state;
	off += (size_t)sprintf(buf + off, "1000 10 before\n");
	off += (size_t)sprintf(buf + off, "2000 10 ");
	memset(buf + off, 'x', 500);
	off += 500;
	buf[off++] = '\n';
	off += (size_t)sprintf(buf + off, "3000 10 after\n");
	memset(buf + off, 'y', 300);  /* an over-long unterminated tail */
	off += 300;
	fd = temp_file(buf, off);
	r = perfmap_reader__from_fd(fd, &opts);
	assert_non_null(r);
	while (perfmap_reader__next(r, &rec) > 0)
		n++;
	assert_int_equal(n, 2);
	assert_int_equal(perfmap_reader__stats(r)->rejected[PERFMAP_REJECT_TOO_LONG], 1);
	assert_int_equal(perfmap_reader__stats(r)->incomplete_bytes, 300);
	assert_int_equal(perfmap_reader__stats(r)->bytes, off);
	perfmap_reader__free(r);
	close(fd);
}

static void test_max_bytes(void **state)
{
	PERFMAP_OPTS(perfmap_reader_opts, opts, .max_bytes = 40);
	const char data[] = "1000 10 aaaa\n2000 10 bbbb\n3000 10 cccc\n4000 10 dddd\n";
	struct perfmap_reader *r;
	struct perfmap_record rec;
	int fd, n = 0;

	(void)state;
	fd = temp_file(data, sizeof(data) - 1);
	r = perfmap_reader__from_fd(fd, &opts);
	while (perfmap_reader__next(r, &rec) > 0)
		n++;
	/* 3 lines of 13 bytes fit in 40; the 4th starts past the bound. */
	assert_int_equal(n, 3);
	assert_true(perfmap_reader__stats(r)->truncated);
	assert_true(perfmap_reader__stats(r)->bytes <= 40);
	perfmap_reader__free(r);

	r = perfmap_reader__from_mem(data, sizeof(data) - 1, &opts);
	n = 0;
	while (perfmap_reader__next(r, &rec) > 0)
		n++;
	assert_int_equal(n, 3);
	assert_true(perfmap_reader__stats(r)->truncated);
	perfmap_reader__free(r);
	close(fd);
}

static void test_empty_and_errors(void **state)
{
	struct perfmap_reader *r;
	struct perfmap_record rec;

	(void)state;
	r = perfmap_reader__from_mem("", 0, NULL);
	assert_non_null(r);
	assert_int_equal(perfmap_reader__next(r, &rec), 0);
	assert_int_equal(perfmap_reader__stats(r)->lines, 0);
	perfmap_reader__free(r);
	perfmap_reader__free(NULL);

	errno = 0;
	assert_null(perfmap_reader__from_fd(-1, NULL));
	assert_int_equal(errno, EBADF);
	{
		PERFMAP_OPTS(perfmap_reader_opts, huge, .max_line = (size_t)-1);

		errno = 0;
		assert_null(perfmap_reader__from_fd(0, &huge));
		assert_int_equal(errno, EINVAL);
		errno = 0;
		assert_null(perfmap_reader__from_mem("", 0, &huge));
		assert_int_equal(errno, EINVAL);
	}
	/* A directory fd reads with EISDIR: an error, not an empty map. */
	{
		int fd = open("/", O_RDONLY | O_DIRECTORY);

		r = perfmap_reader__from_fd(fd, NULL);
		assert_non_null(r);
		assert_int_equal(perfmap_reader__next(r, &rec), -EISDIR);
		perfmap_reader__free(r);
		close(fd);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_producer_lines),
		cmocka_unit_test(test_rejects_by_kind),
		cmocka_unit_test(test_mixed_file_from_memory),
		cmocka_unit_test(test_mixed_file_streamed),
		cmocka_unit_test(test_long_lines_bounded),
		cmocka_unit_test(test_max_bytes),
		cmocka_unit_test(test_empty_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

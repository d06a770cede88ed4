/* Compactor tests: later lines win, nesting, duplicates, short names, and a model check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "perfmap.h"
#include "perfmap_tools.h"
#include "testutil.h"

/* The canonical form of @in, and its stats. Caller frees. */
static char *compact(const char *in, size_t len, struct perfmap_table_stats *stats)
{
	struct perfmap_reader *r = perfmap_reader__from_mem(in, len, NULL);
	struct perfmap_table *t = perfmap_table__new();
	struct perfmap_table_stats st;
	int fd = memfd_create("compact", MFD_CLOEXEC);
	char *out;
	off_t end;

	assert_non_null(r);
	assert_non_null(t);
	assert_true(fd >= 0);
	assert_int_equal(perfmap_table__load(t, r), 0);
	assert_int_equal(perfmap_table__stats(t, stats ? stats : &st), 0);
	assert_int_equal(perfmap_table__write_canonical(t, fd), 0);
	end = lseek(fd, 0, SEEK_END);
	out = calloc(1, (size_t)end + 1);
	assert_int_equal(pread(fd, out, (size_t)end, 0), end);
	close(fd);
	perfmap_table__free(t);
	perfmap_reader__free(r);
	return out;
}

static void expect(const char *in, const char *want)
{
	char *out = compact(in, strlen(in), NULL);

	assert_string_equal(out, want);
	free(out);
}

static void test_later_line_wins(void **state)
{
	(void)state;
	/* B replaced the top of A. */
	expect("1000 100 old_a\n1080 100 new_b\n",
	       "1000 80 old_a\n1080 100 new_b\n");
	/* B replaced the bottom of A. */
	expect("1080 100 old_a\n1000 100 new_b\n",
	       "1000 100 new_b\n1100 80 old_a\n");
	/* Same range, new name. */
	expect("1000 100 old_a\n1000 100 new_b\n", "1000 100 new_b\n");
	/* Adjacent entries touch without overlapping: both stay. */
	expect("1000 10 left\n1010 10 right\n", "1000 10 left\n1010 10 right\n");
	/* Order of the output is by address whatever the input order. */
	expect("3000 10 ccc\n1000 10 aaa\n2000 10 bbb\n",
	       "1000 10 aaa\n2000 10 bbb\n3000 10 ccc\n");
}

static void test_nested(void **state)
{
	struct perfmap_table_stats st;
	char *out;
	const char *in = "1000 100 outer\n1040 10 inner\n";

	(void)state;
	/* A later inner entry splits the outer one around it. */
	out = compact(in, strlen(in), &st);
	assert_string_equal(out, "1000 40 outer\n1040 10 inner\n1050 b0 outer\n");
	assert_int_equal(st.overlapping, 2);
	assert_int_equal(st.nested, 1);
	assert_int_equal(st.trimmed, 1);
	assert_int_equal(st.hidden, 0);
	assert_int_equal(st.lines_out, 3);
	free(out);

	/* A later outer entry hides the inner one entirely. */
	in = "1040 10 inner\n1000 100 outer\n";
	out = compact(in, strlen(in), &st);
	assert_string_equal(out, "1000 100 outer\n");
	assert_int_equal(st.hidden, 1);
	free(out);

	/* Three deep, each later one inside the last. */
	expect("1000 100 l1_\n1010 80 l2_\n1020 10 l3_\n",
	       "1000 10 l1_\n1010 10 l2_\n1020 10 l3_\n1030 60 l2_\n1090 70 l1_\n");
}

static void test_duplicates(void **state)
{
	struct perfmap_table_stats st;
	const char *in = "1000 10 twice\n2000 10 other\n1000 10 twice\n1000 10 twice\n";
	char *out;

	(void)state;
	out = compact(in, strlen(in), &st);
	assert_string_equal(out, "1000 10 twice\n2000 10 other\n");
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.duplicates, 2);
	assert_int_equal(st.overlapping, 0);
	assert_int_equal(st.hidden, 0);
	free(out);
}

static void test_short_names_and_cleanup(void **state)
{
	struct perfmap_table_stats st;
	const char *in =
		"1000 100 long_old_name\n"
		"1000 100 ab\n"              /* later, too short for perf: unnamed */
		"2000 10 ctl\x01name\n"      /* control byte replaced */
		"0x3000\t0X20  UPPER_AND_0x\r\n"
		"garbage\n"
		"4000 10 torn";
	char *out;

	(void)state;
	out = compact(in, strlen(in), &st);
	/* The stale older name must not come back where "ab" replaced it. */
	assert_string_equal(out, "2000 10 ctl?name\n3000 20 UPPER_AND_0x\n");
	assert_int_equal(st.short_names, 1);
	assert_int_equal(st.hidden, 1);
	free(out);
}

/* A small deterministic PRNG: the model check must replay the same on every run. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

struct model_entry {
	uint64_t start, end;
	char name[16];
};

/* The model: the last line covering @addr names it. */
static const char *model_lookup(const struct model_entry *e, size_t n, uint64_t addr)
{
	size_t i = n;

	while (i--)
		if (e[i].start <= addr && addr < e[i].end)
			return strlen(e[i].name) >= 3 ? e[i].name : NULL;
	return NULL;
}

static const char *out_lookup(struct perfmap_table *t, uint64_t addr, char *buf)
{
	const char *name;
	ssize_t len = perfmap_table__lookup(t, addr, &name);

	if (len < 0)
		return NULL;
	memcpy(buf, name, (size_t)len);
	buf[len] = '\0';
	return buf;
}

/*
 * Random maps, dense with overlaps: the canonical form answers every address
 * as the model does, is sorted and disjoint, reads without a single quirk or
 * reject, and compacting it again changes nothing.
 */
static void test_model_check(void **state)
{
	enum { ROUNDS = 300, MAX_N = 60 };
	struct model_entry e[MAX_N];
	char in[MAX_N * 64], *out, *again, a[32];
	const char *want, *got;
	struct perfmap_table *t;
	struct perfmap_reader *r;
	struct perfmap_record rec;
	uint64_t prev_end, addr;
	size_t n, i, off;
	int round;
	unsigned int q;

	(void)state;
	rng_state = 0x9e3779b97f4a7c15ull;
	for (round = 0; round < ROUNDS; round++) {
		n = 1 + rng() % MAX_N;
		off = 0;
		for (i = 0; i < n; i++) {
			e[i].start = 0x1000 + (rng() % 64) * 8;
			e[i].end = e[i].start + 1 + rng() % 200;
			snprintf(e[i].name, sizeof(e[i].name), rng() % 8 ? "fn%zu" : "%zu", i);
			off += (size_t)sprintf(in + off, "%lx %lx %s\n", (unsigned long)e[i].start,
					       (unsigned long)(e[i].end - e[i].start), e[i].name);
		}
		out = compact(in, off, NULL);

		/* Same answers as the model, at and around every boundary. */
		r = perfmap_reader__from_mem(out, strlen(out), NULL);
		t = perfmap_table__new();
		assert_int_equal(perfmap_table__load(t, r), 0);
		perfmap_reader__free(r);
		for (addr = 0x1000 - 2; addr < 0x1000 + 64 * 8 + 210; addr++) {
			want = model_lookup(e, n, addr);
			got = out_lookup(t, addr, a);
			if (!want || !got) {
				assert_ptr_equal(want, got);
				continue;
			}
			assert_string_equal(got, want);
		}
		perfmap_table__free(t);

		/* Canonical: sorted, disjoint, nothing a consumer could trip on. */
		r = perfmap_reader__from_mem(out, strlen(out), NULL);
		prev_end = 0;
		while (perfmap_reader__next(r, &rec) > 0) {
			assert_true(rec.start >= prev_end);
			assert_int_equal(rec.quirks, 0);
			prev_end = rec.start + rec.size;
		}
		for (q = 0; q < PERFMAP_QUIRK_COUNT; q++)
			assert_int_equal(perfmap_reader__stats(r)->quirks[q], 0);
		assert_int_equal(perfmap_reader__stats(r)->lines,
				 perfmap_reader__stats(r)->entries);
		perfmap_reader__free(r);

		again = compact(out, strlen(out), NULL);
		assert_string_equal(again, out);
		free(again);
		free(out);
	}
}

static void test_table_api_errors(void **state)
{
	struct perfmap_table *t = perfmap_table__new();
	struct perfmap_record rec = { .start = 0x1000, .size = 0, .name = "x", .name_len = 1 };
	const char *name;

	(void)state;
	assert_int_equal(perfmap_table__add(t, &rec), -EINVAL);
	rec.size = 0x10;
	rec.start = 0;
	assert_int_equal(perfmap_table__add(t, &rec), -EINVAL);
	rec.start = UINT64_MAX - 4;
	assert_int_equal(perfmap_table__add(t, &rec), -EINVAL);
	assert_int_equal(perfmap_table__count(t), 0);
	assert_int_equal(perfmap_table__lookup(t, 0x1000, &name), -ENOENT);
	perfmap_table__free(t);
	perfmap_table__free(NULL);
}

/* perfmap__compact_fill() on @in with a bound on the table; the output in @out (caller frees). */
static int fill(const char *in, uint64_t max_table, struct perfmap_compact_job *job, char **out)
{
	int src = memfd_create("src", MFD_CLOEXEC), dst = memfd_create("dst", MFD_CLOEXEC);
	off_t end;
	int err;

	assert_true(src >= 0 && dst >= 0);
	assert_int_equal(write(src, in, strlen(in)), (ssize_t)strlen(in));
	assert_int_equal(lseek(src, 0, SEEK_SET), 0);
	memset(job, 0, sizeof(*job));
	job->max_table_bytes = max_table;
	err = perfmap__compact_fill(src, dst, job);
	end = lseek(dst, 0, SEEK_END);
	*out = calloc(1, (size_t)end + 1);
	assert_int_equal(pread(dst, *out, (size_t)end, 0), end);
	close(src);
	close(dst);
	return err;
}

static void test_a_table_over_its_bound_is_streamed_as_it_is(void **state)
{
	const char *in = "2000 10 second\n1000 10 first\n1000 10 first\n";
	struct perfmap_compact_job job;
	char *out;

	(void)state;
	/* Unbounded: sorted, the twin dropped. */
	assert_int_equal(fill(in, 0, &job, &out), 0);
	assert_false(job.uncompacted);
	assert_string_equal(out, "1000 10 first\n2000 10 second\n");
	free(out);
	/* Bounded below one entry's room: every line as it was, whole, from the start. */
	assert_int_equal(fill(in, 16, &job, &out), 0);
	assert_true(job.uncompacted);
	assert_string_equal(out, in);
	assert_int_equal(job.table.entries, 3);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_later_line_wins),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_short_names_and_cleanup),
		cmocka_unit_test(test_model_check),
		cmocka_unit_test(test_table_api_errors),
		cmocka_unit_test(test_a_table_over_its_bound_is_streamed_as_it_is),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

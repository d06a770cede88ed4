/*
 * pprof: what a profile store takes from perfmapctl's profile, decoded back
 * with pprof's own message: functions named as people read them with the
 * mangled symbol their system_name; native code's mappings with the file's
 * build id and range in its own terms, its locations one per address, and
 * those not named here left for the store to name (no Line; the mapping
 * says it has not all functions); JIT code as before; long names whole.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "profile_pprof.h"
#include "testutil.h"

#define BID "5f3a0c1e9b7d2468ace013579bdf2468ace01357"

/* shapes::Grid::lrem at two addresses of /usr/bin/app (a PIE: its text at 0x1000 in the file). */
static const struct prof_frame lrem1 = {
	.name = "shapes::Grid::lrem(long, long)", .module = "/usr/bin/app", .offset = 0x10,
	.file = "/src/grid.cc", .line = 7, .state = 'C', .system_name = "_ZN6shapes4Grid4lremEll",
	.build_id = BID, .in_file = true, .address = 0x1150, .map_start = 0x1000, .map_limit = 0x2000,
	.map_offset = 0x1000,
};
static const struct prof_frame lrem2 = {
	.name = "shapes::Grid::lrem(long, long)", .module = "/usr/bin/app", .offset = 0x18,
	.file = "/src/grid.cc", .line = 7, .state = 'C', .system_name = "_ZN6shapes4Grid4lremEll",
	.build_id = BID, .in_file = true, .address = 0x1158, .map_start = 0x1000, .map_limit = 0x2000,
	.map_offset = 0x1000,
};
/* main, a C name: its own system_name. */
static const struct prof_frame mainf = {
	.name = "main", .module = "/usr/bin/app", .offset = 0x20, .state = 'C', .system_name = "main",
	.build_id = BID, .in_file = true, .address = 0x1020, .map_start = 0x1000, .map_limit = 0x2000,
	.map_offset = 0x1000,
};
/* No symbol here, a build id: the store's to name. */
static const struct prof_frame stripped = {
	.module = "/usr/lib/libx.so", .offset = 0x4321, .state = 'C', .build_id = "0123abcd",
	.in_file = true, .address = 0x5321, .map_start = 0x5000, .map_limit = 0x9000, .map_offset = 0x4000,
};
/* No symbol, no build id: no store can name it either, so "module+0xoff" does. */
static const struct prof_frame nobid = {
	.module = "/usr/lib/liby.so", .offset = 0x77, .state = 'C', .in_file = true, .address = 0x1077,
	.map_start = 0x1000, .map_limit = 0x2000, .map_offset = 0x1000,
};
static const struct prof_frame jit = { .name = "jit_hot", .module = "/tmp/perf-1.map", .state = 'J',
				       .system_name = "jit_hot" };

static Perftools__Profiles__Profile *encode(const struct prof_sample *s, size_t n)
{
	const struct prof_pprof_info info = { .interval_ns = 10000000, .time_ns = 1700000000000000000ull,
					      .duration_ns = 1000000000 };
	Perftools__Profiles__Profile *p;
	static uint8_t out[1 << 20];
	z_stream z = { 0 };
	uint8_t *gz;
	size_t len;

	assert_int_equal(prof_pprof_encode(s, n, &info, &gz, &len), 0);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = sizeof(out);
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	inflateEnd(&z);
	free(gz);
	p = perftools__profiles__profile__unpack(NULL, z.total_out, out);
	assert_non_null(p);
	assert_string_equal(p->string_table[0], "");
	/* Ids 1..n, as Parca's and Pyroscope's validation wants. */
	for (size_t i = 0; i < p->n_mapping; i++)
		assert_int_equal(p->mapping[i]->id, i + 1);
	for (size_t i = 0; i < p->n_location; i++)
		assert_int_equal(p->location[i]->id, i + 1);
	for (size_t i = 0; i < p->n_function; i++)
		assert_int_equal(p->function[i]->id, i + 1);
	return p;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static const Perftools__Profiles__Location *loc(const Perftools__Profiles__Profile *p, uint64_t id)
{
	assert_true(id >= 1 && id <= p->n_location);
	return p->location[id - 1];
}

static const Perftools__Profiles__Function *fn(const Perftools__Profiles__Profile *p,
					       const Perftools__Profiles__Location *l)
{
	assert_int_equal(l->n_line, 1);
	assert_true(l->line[0]->function_id >= 1 && l->line[0]->function_id <= p->n_function);
	return p->function[l->line[0]->function_id - 1];
}

static const Perftools__Profiles__Mapping *map(const Perftools__Profiles__Profile *p,
					       const Perftools__Profiles__Location *l)
{
	assert_true(l->mapping_id >= 1 && l->mapping_id <= p->n_mapping);
	return p->mapping[l->mapping_id - 1];
}

static void test_native_for_stores(void **state)
{
	const struct prof_frame a[] = { lrem1, mainf }, b[] = { lrem2, mainf };
	const struct prof_sample s[] = { { .frames = a, .n = 2, .count = 3 },
					 { .frames = b, .n = 2, .count = 1 } };
	const Perftools__Profiles__Location *l1, *l2, *lm;
	const Perftools__Profiles__Mapping *m;
	Perftools__Profiles__Profile *p;

	(void)state;
	p = encode(s, 2);
	assert_int_equal(p->n_sample, 2);
	l1 = loc(p, p->sample[0]->location_id[0]);
	l2 = loc(p, p->sample[1]->location_id[0]);
	lm = loc(p, p->sample[0]->location_id[1]);
	/* One location an address, one function for both. */
	assert_int_not_equal(l1->id, l2->id);
	assert_int_equal(l1->address, 0x1150);
	assert_int_equal(l2->address, 0x1158);
	assert_ptr_equal(fn(p, l1), fn(p, l2));
	assert_int_equal(p->n_function, 2);
	assert_string_equal(str(p, fn(p, l1)->name), "shapes::Grid::lrem(long, long)");
	assert_string_equal(str(p, fn(p, l1)->system_name), "_ZN6shapes4Grid4lremEll");
	assert_string_equal(str(p, fn(p, l1)->filename), "/src/grid.cc");
	assert_int_equal(l1->line[0]->line, 7);
	assert_string_equal(str(p, fn(p, lm)->name), "main");
	assert_string_equal(str(p, fn(p, lm)->system_name), "main");
	/* One mapping for the file, its build id, its range in the file's terms, its functions all named. */
	assert_int_equal(p->n_mapping, 1);
	m = map(p, l1);
	assert_ptr_equal(m, map(p, lm));
	assert_string_equal(str(p, m->filename), "/usr/bin/app");
	assert_string_equal(str(p, m->build_id), BID);
	assert_int_equal(m->memory_start, 0x1000);
	assert_int_equal(m->memory_limit, 0x2000);
	assert_int_equal(m->file_offset, 0x1000);
	assert_true(m->has_functions);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

static void test_unnamed_and_jit(void **state)
{
	const struct prof_frame a[] = { stripped, nobid, jit, mainf };
	const struct prof_sample s[] = { { .frames = a, .n = 4, .count = 2 } };
	const Perftools__Profiles__Location *ls, *ln, *lj, *lm;
	const Perftools__Profiles__Mapping *m;
	Perftools__Profiles__Profile *p;

	(void)state;
	p = encode(s, 1);
	ls = loc(p, p->sample[0]->location_id[0]);
	ln = loc(p, p->sample[0]->location_id[1]);
	lj = loc(p, p->sample[0]->location_id[2]);
	lm = loc(p, p->sample[0]->location_id[3]);
	/* Left to the store: its address, no Line, and its mapping says so. */
	assert_int_equal(ls->n_line, 0);
	assert_int_equal(ls->address, 0x5321);
	m = map(p, ls);
	assert_string_equal(str(p, m->filename), "/usr/lib/libx.so");
	assert_string_equal(str(p, m->build_id), "0123abcd");
	assert_int_equal(m->memory_start, 0x5000);
	assert_int_equal(m->memory_limit, 0x9000);
	assert_int_equal(m->file_offset, 0x4000);
	assert_false(m->has_functions);
	/* No build id: named "module+0xoff" here, its address still given. */
	assert_string_equal(str(p, fn(p, ln)->name), "/usr/lib/liby.so+0x77");
	assert_int_equal(ln->address, 0x1077);
	assert_int_equal(map(p, ln)->build_id, 0);
	assert_true(map(p, ln)->has_functions);
	/* JIT code: its name, its map as the mapping, no address, no range, no build id. */
	assert_string_equal(str(p, fn(p, lj)->name), "jit_hot");
	assert_int_equal(lj->address, 0);
	m = map(p, lj);
	assert_string_equal(str(p, m->filename), "/tmp/perf-1.map");
	assert_int_equal(m->build_id, 0);
	assert_int_equal(m->memory_start, 0);
	assert_int_equal(m->memory_limit, 0);
	assert_true(m->has_functions);
	assert_true(map(p, lm)->has_functions);
	assert_int_equal(p->n_mapping, 4);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* Names past the old 8 KiB keys: two that differ at their ends are two functions, each whole. */
static void test_long_names_whole(void **state)
{
	struct prof_frame a = jit, b = jit;
	const struct prof_sample s[] = { { .frames = &a, .n = 1, .count = 1 },
					 { .frames = &b, .n = 1, .count = 1 } };
	char *na = malloc(10001), *nb = malloc(10001);
	const Perftools__Profiles__Function *f1, *f2;
	Perftools__Profiles__Profile *p;

	(void)state;
	assert_non_null(na);
	assert_non_null(nb);
	memset(na, 'x', 10000);
	memcpy(nb, na, 10000);
	na[10000] = nb[10000] = '\0';
	na[9999] = 'a';
	nb[9999] = 'b';
	a.name = a.system_name = na;
	b.name = b.system_name = nb;
	p = encode(s, 2);
	assert_int_equal(p->n_function, 2);
	f1 = fn(p, loc(p, p->sample[0]->location_id[0]));
	f2 = fn(p, loc(p, p->sample[1]->location_id[0]));
	assert_string_equal(str(p, f1->name), na);
	assert_string_equal(str(p, f2->name), nb);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(na);
	free(nb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_native_for_stores),
		cmocka_unit_test(test_unnamed_and_jit),
		cmocka_unit_test(test_long_names_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

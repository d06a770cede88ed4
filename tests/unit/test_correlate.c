/* correlate: a map's entries against a process's mappings, counted exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "perfmap_tools.h"
#include "testutil.h"

static const char maps[] =
	"10000-12000 r-xp 00000000 00:00 0 \n"                               /* named, in part */
	"14000-15000 r-xp 00000000 00:00 0 \n"                               /* unnamed */
	"16000-17000 rw-p 00000000 00:00 0 \n"                               /* data: not code */
	"20000-21000 r-xs 00000000 00:01 5        /memfd:doublemapper (deleted)\n"
	"30000-31000 r-xp 00001000 fe:00 77       /usr/bin/node\n";

static const char map[] =
	"10000 800 jit::a\n"
	"10800 100 jit::b\n"
	"10000 800 jit::a\n"         /* duplicate */
	"10400 800 jit::over\n"      /* overlaps a and b */
	"16000 10 jit::in_data\n"    /* stale: no exec mapping */
	"50000 10 jit::gone\n"       /* stale: no mapping at all */
	"20000 40 jit::memfd\n"
	"30000 40 Builtin:x\n";

static void correlate(struct perfmap_corr *c)
{
	struct perfmap_vmas vs = { 0 };
	struct perfmap_reader *r;

	assert_int_equal(perfmap__vmas_parse_buf(&vs, maps, strlen(maps)), (long)strlen(maps));
	r = perfmap_reader__from_mem(map, strlen(map), NULL);
	assert_non_null(r);
	assert_int_equal(perfmap__correlate(r, &vs, c), 0);
	perfmap_reader__free(r);
	perfmap__vmas_release(&vs);
}

static void test_regions(void **state)
{
	struct perfmap_corr c;

	(void)state;
	correlate(&c);
	assert_int_equal(c.exec_anon_regions, 2);
	assert_int_equal(c.exec_anon_bytes, 0x3000);
	/* [0x10000, 0x10c00) is covered: a, b and over merge. */
	assert_int_equal(c.named_bytes, 0xc00);
	assert_int_equal(c.used_bytes, 0xc00);
	assert_int_equal(c.unnamed.count, 1);
	assert_int_equal(c.unnamed.v[0].start, 0x14000);
	assert_int_equal(c.unnamed.v[0].size, 0x1000);
	assert_int_equal(c.exec_memfd_regions, 1);
	assert_int_equal(c.exec_memfd_bytes, 0x1000);
}

static void test_entries(void **state)
{
	struct perfmap_corr c;

	(void)state;
	correlate(&c);
	assert_int_equal(c.table.entries, 8);
	assert_int_equal(c.table.duplicates, 1);
	assert_int_equal(c.table.overlapping, 3);
	assert_int_equal(c.in_anon, 4);
	assert_int_equal(c.stale.count, 2);
	assert_int_equal(c.stale.kept, 2);
	assert_int_equal(c.stale.v[0].start, 0x16000);
	assert_string_equal(c.stale.v[0].name, "jit::in_data");
	assert_int_equal(c.stale.v[1].start, 0x50000);
	assert_int_equal(c.in_memfd.count, 1);
	assert_int_equal(c.in_memfd.v[0].start, 0x20000);
	assert_int_equal(c.in_file.count, 1);
	assert_string_equal(c.in_file.v[0].name, "Builtin:x");
}

/* No entries: nothing named, every region unnamed; no mappings: every entry stale. */
static void test_empty_sides(void **state)
{
	struct perfmap_vmas vs = { 0 };
	struct perfmap_corr c;
	struct perfmap_reader *r;

	(void)state;
	assert_int_equal(perfmap__vmas_parse_buf(&vs, maps, strlen(maps)), (long)strlen(maps));
	r = perfmap_reader__from_mem("", 0, NULL);
	assert_int_equal(perfmap__correlate(r, &vs, &c), 0);
	perfmap_reader__free(r);
	assert_int_equal(c.named_bytes, 0);
	assert_int_equal(c.used_bytes, 0);
	assert_int_equal(c.unnamed.count, 2);
	perfmap__vmas_release(&vs);

	r = perfmap_reader__from_mem(map, strlen(map), NULL);
	assert_int_equal(perfmap__correlate(r, &vs, &c), 0);
	perfmap_reader__free(r);
	assert_int_equal(c.stale.count, 8);
	assert_int_equal(c.stale.kept, PERFMAP_CORR_KEEP);
	assert_int_equal(c.exec_anon_bytes, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regions),
		cmocka_unit_test(test_entries),
		cmocka_unit_test(test_empty_sides),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

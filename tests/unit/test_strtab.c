/* strtab: the string table the profiler's symbolizer and perfmapctl profile intern names in. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfmap_tools.h"
#include "testutil.h"

#define MANY 20000

/* One copy per content, not the caller's buffer: it may be reused at once. */
static void test_once_per_content(void **state)
{
	struct perfmap_strtab t = { 0 };
	char buf[32];
	const char *a, *b, *c, *e;

	(void)state;
	snprintf(buf, sizeof(buf), "py::f:/app/x.py");
	a = perfmap__strtab_intern(&t, buf);
	assert_non_null(a);
	assert_ptr_not_equal(a, buf);
	snprintf(buf, sizeof(buf), "other");
	assert_string_equal(a, "py::f:/app/x.py");
	b = perfmap__strtab_intern(&t, "py::f:/app/x.py");
	c = perfmap__strtab_intern(&t, buf);
	e = perfmap__strtab_intern(&t, "");
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, c);
	assert_string_equal(c, "other");
	assert_non_null(e);
	assert_string_equal(e, "");
	assert_ptr_equal(perfmap__strtab_intern(&t, ""), e);
	assert_int_equal(t.count, 3);
	perfmap__strtab_release(&t);
	assert_int_equal(t.count, 0);
	assert_null(t.slot);
	perfmap__strtab_release(NULL);
}

/* Through every growth the copies stay where they were; released, the table serves again. */
static void test_growth_keeps_copies(void **state)
{
	struct perfmap_strtab t = { 0 };
	const char **first = calloc(MANY, sizeof(*first));
	char buf[32];

	(void)state;
	assert_non_null(first);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < MANY; i++) {
			snprintf(buf, sizeof(buf), "sym%d", i);
			first[i] = perfmap__strtab_intern(&t, buf);
			assert_non_null(first[i]);
		}
		for (int i = MANY - 1; i >= 0; i--) {
			snprintf(buf, sizeof(buf), "sym%d", i);
			assert_ptr_equal(perfmap__strtab_intern(&t, buf), first[i]);
			assert_string_equal(first[i], buf);
		}
		assert_int_equal(t.count, MANY);
		/* Never more than half full: a probe finds an empty slot soon. */
		assert_true(2 * t.count <= t.cap);
		perfmap__strtab_release(&t);
	}
	free(first);
}

/* A name inside a larger text, as a perf map's: its bytes alone, the same copy as the whole string's. */
static void test_counted(void **state)
{
	static const char text[] = "7f00 10 py::f:/app/x.py\n7f10 10 py::g:/app/x.py\n";
	struct perfmap_strtab t = { 0 };
	const char *f, *g, *pre, *nul;

	(void)state;
	f = perfmap__strtab_intern_n(&t, text + 8, 15);
	g = perfmap__strtab_intern_n(&t, text + 32, 15);
	assert_string_equal(f, "py::f:/app/x.py");
	assert_string_equal(g, "py::g:/app/x.py");
	assert_ptr_equal(perfmap__strtab_intern(&t, "py::f:/app/x.py"), f);
	/* A prefix is another string, and so is a longer one that begins with it. */
	pre = perfmap__strtab_intern_n(&t, text + 8, 5);
	assert_string_equal(pre, "py::f");
	assert_ptr_not_equal(pre, f);
	assert_ptr_equal(perfmap__strtab_intern(&t, "py::f"), pre);
	/* A NUL ends it before @len. */
	nul = perfmap__strtab_intern_n(&t, "py::f\0junk", 10);
	assert_ptr_equal(nul, pre);
	assert_int_equal(t.count, 3);
	perfmap__strtab_release(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_once_per_content),
		cmocka_unit_test(test_growth_keeps_copies),
		cmocka_unit_test(test_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

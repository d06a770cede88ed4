/*
 * symindex: the index's symbol for an address is libdwfl's own
 * (dwfl_module_addrinfo()), name and offset, on real files: this test
 * program, the C library, libdw, and the compiler's cc1 where it is
 * installed (29,000 symbols); at each symbol's start, middle, last byte
 * and end, and at a stride over the whole range. The index must decide
 * most of them itself (else it saves nothing), and say so where it cannot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symindex.h"
#include "testutil.h"

/* Addresses tried in a file at most: libdwfl's answer scans the whole table each time. */
#define PROBES_MAX 6000

static char *debuginfo_path;

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

struct probe_stats {
	size_t probes, decided, named;
};

static void probe(struct symindex *x, Dwfl_Module *mod, GElf_Addr a, struct probe_stats *st,
		  const char *path)
{
	GElf_Off off_d = 0, off_x = 0;
	GElf_Sym sym_d, sym_x;
	const char *name_d, *name_x = NULL;

	st->probes++;
	name_d = dwfl_module_addrinfo(mod, a, &off_d, &sym_d, NULL, NULL, NULL);
	if (!perfmap_prof__symindex_lookup(x, mod, a, &name_x, &off_x, &sym_x))
		return;
	st->decided++;
	if (!name_d != !name_x || (name_d && (strcmp(name_d, name_x) || off_d != off_x)))
		fail_msg("%s at %#llx: libdwfl says %s+%#llx, the index %s+%#llx", path,
			 (unsigned long long)a, name_d ? name_d : "(none)", (unsigned long long)off_d,
			 name_x ? name_x : "(none)", (unsigned long long)off_x);
	st->named++;
}

/* @path's module compared at its symbols and across its range; how many it decided. */
static struct probe_stats compare_file(const char *path)
{
	struct probe_stats st = { 0 };
	GElf_Addr value, lo = UINT64_MAX, hi = 0, ends[4];
	Dwfl_Module *mod;
	struct symindex *x;
	GElf_Sym sym;
	Dwarf_Addr bias;
	Dwfl *dwfl;
	int fd, n;
	size_t step;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	dwfl = dwfl_begin(&callbacks);
	assert_non_null(dwfl);
	dwfl_report_begin(dwfl);
	mod = dwfl_report_elf(dwfl, path, path, fd, 0, false);
	dwfl_report_end(dwfl, NULL, NULL);
	assert_non_null(mod);
	assert_non_null(dwfl_module_getelf(mod, &bias));
	x = perfmap_prof__symindex_build(mod);
	assert_non_null(x);
	n = dwfl_module_getsymtab(mod);
	assert_true(n > 1);
	step = (size_t)n * 5 / (PROBES_MAX / 2) + 1;
	for (int i = 1; i < n; i++) {
		if (!dwfl_module_getsym_info(mod, i, &sym, &value, NULL, NULL, NULL) || !sym.st_size ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		lo = value < lo ? value : lo;
		hi = value + sym.st_size > hi ? value + sym.st_size : hi;
		if ((size_t)i % step)
			continue;
		ends[0] = value;
		ends[1] = value + sym.st_size / 2;
		ends[2] = value + sym.st_size - 1;
		ends[3] = value + sym.st_size;
		for (int k = 0; k < 4; k++)
			probe(x, mod, ends[k], &st, path);
	}
	for (GElf_Addr a = lo; hi > lo && a < hi; a += (hi - lo) / (PROBES_MAX / 4) + 1)
		probe(x, mod, a, &st, path);
	print_message("    %s: %zu symbols, %zu addresses: the index decided %zu, each as libdwfl\n", path,
		      (size_t)n, st.probes, st.decided);
	perfmap_prof__symindex_free(x);
	dwfl_end(dwfl);
	return st;
}

static void assert_mostly_decided(struct probe_stats st)
{
	assert_true(st.probes >= 100);
	/* Addresses in no sized symbol (PLT stubs, padding, labels) are libdwfl's: a few in ten at most. */
	assert_true(st.decided * 10 >= st.probes * 7);
	assert_int_equal(st.named, st.decided);
}

static void test_self(void **state)
{
	(void)state;
	assert_mostly_decided(compare_file("/proc/self/exe"));
}

static int find_lib(struct dl_phdr_info *info, size_t size, void *data)
{
	char **want = data;

	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, want[0])) {
		want[1] = strdup(info->dlpi_name);
		return 1;
	}
	return 0;
}

/* A library this test is linked with, by the loader's path for it. */
static void compare_lib(const char *stem)
{
	char *want[2] = { (char *)stem, NULL };

	dl_iterate_phdr(find_lib, want);
	assert_non_null(want[1]);
	assert_mostly_decided(compare_file(want[1]));
	free(want[1]);
}

static void test_libc(void **state)
{
	(void)state;
	compare_lib("/libc.so");
}

static void test_libdw(void **state)
{
	(void)state;
	compare_lib("/libdw");
}

/* The compiler proper: the large symbol table that made the index worth having. */
static void test_cc1(void **state)
{
	glob_t g;

	(void)state;
	if (glob("/usr/lib/gcc/*/*/cc1", 0, NULL, &g) || !g.gl_pathc) {
		print_message("    SKIPPED: no /usr/lib/gcc/*/*/cc1 here\n");
		skip();
	}
	assert_mostly_decided(compare_file(g.gl_pathv[g.gl_pathc - 1]));
	globfree(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_libdw),
		cmocka_unit_test(test_cc1),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

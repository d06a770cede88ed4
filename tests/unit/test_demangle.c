/*
 * demangle: C++ and Rust symbols of real programs (HotSpot, asmjit,
 * libstdc++, rustc 1.95's legacy and v0 output) as perf shows them; C names,
 * JIT names and malformed symbols left as they are; and names whose
 * demangling grows exponentially cut at the bound, at once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "testutil.h"

static char buf[DEMANGLED_MAX + 1];

static const char *dm(const char *name)
{
	return perfmap_prof__demangle(name, buf, sizeof(buf));
}

static void want(const char *mangled, const char *demangled)
{
	const char *d = dm(mangled);

	if (!d)
		fail_msg("%s: not demangled, want %s", mangled, demangled);
	assert_string_equal(d, demangled);
}

static void test_cxx(void **state)
{
	(void)state;
	/* The names the issue saw mangled in a JVM's profile. */
	want("_ZN13SharedRuntime4lremEll", "SharedRuntime::lrem(long, long)");
	want("_ZN6asmjit8_abi_1_910CodeHolder9bindLabelERKNS0_5LabelE",
	     "asmjit::_abi_1_9::CodeHolder::bindLabel(asmjit::_abi_1_9::Label const&)");
	/* libstdc++.so.6's own, substitutions and templates. */
	want("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
	     "std::thread::_M_start_thread(std::unique_ptr<std::thread::_State, "
	     "std::default_delete<std::thread::_State> >, void (*)())");
	want("_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE7compareEPKc",
	     "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
	     "::compare(char const*) const");
	/* gcc's outlined cold part, and a static function. */
	want("_ZN6shapes4Grid4lremEll.cold", "shapes::Grid::lrem(long, long) [clone .cold]");
	want("_ZL8spin_hotv", "spin_hot()");
}

static void test_rust(void **state)
{
	(void)state;
	/* Legacy: the ::h<hash> goes, as perf's Rust demangling drops it; $LT$ and $GT$ are < and >. */
	want("_ZN3hot8spin_hot17h132de80132c44b3bE", "hot::spin_hot");
	want("_ZN3hot13Grid$LT$T$GT$4walk17h74a97b47b507aeaaE", "hot::Grid<T>::walk");
	want("_ZN3hot8spin_hot17h132de80132c44b3bE.llvm.12345", "hot::spin_hot");
	/* v0 (-C symbol-mangling-version=v0, and rustc 1.95's std). */
	want("_RNvCs81nRMqtTsfS_3hot8spin_hot", "hot::spin_hot");
	want("_RNvMCs81nRMqtTsfS_3hotINtB2_4GridmE4walkB2_", "<hot::Grid<u32>>::walk");
	want("_RINvNtCsgEmfK2I1SDS_4core9panicking13assert_failedllECsjrHSEGnQ3l9_3std",
	     "core::panicking::assert_failed::<i32, i32>");
}

static void test_left_as_they_are(void **state)
{
	static const char *const plain[] = {
		/* C, the runtimes' own, JIT names. */
		"main", "_start", "lj_BC_FUNCC", "_PyEval_EvalFrameDefault", "py::hot:/app/x.py",
		"LazyCompile:*f /app/x.js:3", "Interpreter",
		/* Malformed: cut short, trailing bytes, bad characters, prefixes alone. */
		"_Z", "_R", "_ZN", "_ZN3foo", "_ZN13SharedRuntime4lremEl!", "_RNvC", "_RNvCs81nRMqtTsfS_3hot8spin_h",
		"_ZZZZ", "_R\xc3\xa9",
	};
	char big[DEMANGLE_IN_MAX + 64];

	(void)state;
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (dm(plain[i]))
			fail_msg("%s: demangled as \"%s\", want it left as it is", plain[i], buf);
	assert_null(perfmap_prof__demangle(NULL, buf, sizeof(buf)));
	/* No room for a name and the marker of a cut: nothing written. */
	assert_null(perfmap_prof__demangle("_ZN13SharedRuntime4lremEll", buf, 6));
	/* Past DEMANGLE_IN_MAX, a valid name too stays as it is (the demangler's stack). */
	strcpy(big, "_ZN");
	while (strlen(big) <= DEMANGLE_IN_MAX)
		strcat(big, "3abc");
	strcat(big, "Ev");
	assert_null(dm(big));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void assert_cut(const char *d, const char *begins)
{
	size_t n;

	assert_non_null(d);
	n = strlen(d);
	assert_true(n <= DEMANGLED_MAX);
	assert_true(n > DEMANGLED_MAX - 16);
	assert_memory_equal(d, begins, strlen(begins));
	assert_string_equal(d + n - 5, "[...]");
}

/*
 * f(A, B<A, A>, B<B<A, A>, B<A, A> >, ...): each parameter the last one
 * twice, by substitution: 333 bytes that print 2^30 names (the whole would
 * take libiberty minutes and gigabytes).
 */
static void test_cxx_blowup_cut(void **state)
{
	char sym[1024];
	double t;

	(void)state;
	strcpy(sym, "_Z1f1A1BIS_S_E");
	for (int k = 1; k < 30; k++)
		snprintf(sym + strlen(sym), sizeof(sym) - strlen(sym), "S0_IS%c_S%c_E",
			 "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k], "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k]);
	t = now();
	assert_cut(dm(sym), "f(A, B<A, A>, B<B<A, A>, B<A, A> >, ");
	assert_true(now() - t < 0.5);
}

static void b62(char *out, size_t n, size_t v)
{
	static const char d[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	char tmp[16];
	size_t i = 0;

	if (!v) {
		snprintf(out, n, "_");
		return;
	}
	for (v--; ; v /= 62) {
		tmp[i++] = d[v % 62];
		if (v < 62)
			break;
	}
	for (size_t k = 0; k < i; k++)
		out[k] = tmp[i - 1 - k];
	snprintf(out + i, n - i, "_");
}

/* a::f::<((), ()), (((), ()), ((), ())), ...>: Rust v0's backrefs double each tuple. */
static void test_rust_blowup_cut(void **state)
{
	char sym[2048], ref[16];
	size_t prev, at;
	double t;

	(void)state;
	strcpy(sym, "_RINvCs_1a1fTuuE");
	prev = strlen("INvCs_1a1f");
	for (int k = 1; k < 40; k++) {
		at = strlen(sym) - 2;
		b62(ref, sizeof(ref), prev);
		snprintf(sym + strlen(sym), sizeof(sym) - strlen(sym), "TB%sB%sE", ref, ref);
		prev = at;
	}
	strcat(sym, "E");
	t = now();
	assert_cut(dm(sym), "a::f::<((), ()), (((), ()), ((), ())), ");
	assert_true(now() - t < 0.5);
}

static bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int more = 0;

	for (; *p; p++) {
		if (more) {
			if ((*p & 0xc0) != 0x80)
				return false;
			more--;
		} else if (*p >= 0xf0) {
			more = 3;
		} else if (*p >= 0xe0) {
			more = 2;
		} else if (*p >= 0xc0) {
			more = 1;
		} else if (*p >= 0x80) {
			return false;
		}
	}
	return !more;
}

/*
 * v0 identifiers in punycode ("été" sixty times, twenty of them): the
 * demangler prints each from a buffer it allocates, so the bound passes
 * inside one and the demangler is left at the next piece; the cut keeps
 * whole characters. ASan's leak check (make unit-asan) sees no buffer lost.
 */
static void test_rust_punycode_cut(void **state)
{
	static const char ete[] =
		"u183tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt_"
		"9hfbababababababababababababababababababababababababababababababab"
		"abababababababababababababababababababababababababababab";
	char sym[8192];
	const char *d;

	(void)state;
	strcpy(sym, "_R");
	for (int i = 0; i < 20; i++)
		strcat(sym, "Nv");
	strcat(sym, "Cs_4root");
	for (int i = 0; i < 20; i++)
		strcat(sym, ete);
	d = dm(sym);
	assert_cut(d, "root::\xc3\xa9t\xc3\xa9\xc3\xa9t\xc3\xa9");
	assert_true(utf8_valid(d));
	/* One of them whole. */
	strcpy(sym, "_RNvCs_4root");
	strcat(sym, ete);
	d = dm(sym);
	assert_non_null(d);
	assert_int_equal(strlen(d), strlen("root::") + 60 * 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cxx),
		cmocka_unit_test(test_rust),
		cmocka_unit_test(test_left_as_they_are),
		cmocka_unit_test(test_cxx_blowup_cut),
		cmocka_unit_test(test_rust_blowup_cut),
		cmocka_unit_test(test_rust_punycode_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

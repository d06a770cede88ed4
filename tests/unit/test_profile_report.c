/*
 * profile_report: every letter of perfmapctl profile -j on one fixed set of
 * samples, against the output LuaJIT's -jp gives for the same counts: the
 * keys, their order, the percentages, the second levels and their indents,
 * folded stacks, raw counts, the minimum, annotation, and bad letters.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "profile_report.h"
#include "testutil.h"

/* main() at app.c:10 and :12; the JIT's two functions; the kernel under write(); unnamed JIT code. */
static const struct prof_frame hot = { "jit_hot", "/tmp/perf-1.map", 0, NULL, 0, 'J' };
static const struct prof_frame cold = { "jit_cold", "/tmp/perf-1.map", 0, NULL, 0, 'J' };
static const struct prof_frame main10 = { "main", "/usr/bin/app", 0x20, "/src/app.c", 10, 'C' };
static const struct prof_frame main12 = { "main", "/usr/bin/app", 0x28, "/src/app.c", 12, 'C' };
static const struct prof_frame start = { "__libc_start_call_main", "/usr/lib/libc.so.6", 0x7a, NULL, 0, 'C' };
static const struct prof_frame sysc = { "do_syscall_64", "[kernel]", 0x5d, NULL, 0, 'K' };
static const struct prof_frame entry = { "entry_SYSCALL_64", "[kernel]", 0x76, NULL, 0, 'K' };
static const struct prof_frame wr = { "write", "/usr/lib/libc.so.6", 0x10, NULL, 0, 'C' };
static const struct prof_frame anon = { NULL, "[anon]", 0x40, NULL, 0, 'U' };

static const struct prof_frame s1[] = { hot, main10, start };
static const struct prof_frame s2[] = { cold, main10, start };
static const struct prof_frame s3[] = { sysc, entry, wr, main12, start };
static const struct prof_frame s4[] = { anon, main12, start };

static const struct prof_sample set[] = {
	{ s1, 3, "container:aaaaaaaaaaaa", 60 },
	{ s2, 3, "container:aaaaaaaaaaaa", 20 },
	{ s3, 5, "/user.slice", 15 },
	{ s4, 3, "/user.slice", 5 },
};

static char out[16384];

/* The report of the set for @letters, in @out. */
static void report(const char *letters)
{
	struct prof_view v;
	char err[128];
	FILE *f = fmemopen(out, sizeof(out), "w");

	assert_non_null(f);
	assert_int_equal(prof_view_parse(letters, &v, err, sizeof(err)), 0);
	assert_int_equal(prof_report(set, 4, &v, f), 0);
	fclose(f);
}

static void test_f_is_the_default_leaf_function_view(void **state)
{
	(void)state;
	report(NULL);
	assert_string_equal(out, "60%  jit_hot\n20%  jit_cold\n15%  do_syscall_64\n 5%  [anon]+0x40\n");
	report("f");
	assert_string_equal(out, "60%  jit_hot\n20%  jit_cold\n15%  do_syscall_64\n 5%  [anon]+0x40\n");
}

static void test_F_prefixes_the_module_and_p_keeps_its_path(void **state)
{
	(void)state;
	report("F");
	assert_string_equal(out, "60%  perf-1.map:jit_hot\n20%  perf-1.map:jit_cold\n"
				 "15%  [kernel]:do_syscall_64\n 5%  [anon]+0x40\n");
	report("pF");
	assert_string_equal(out, "60%  /tmp/perf-1.map:jit_hot\n20%  /tmp/perf-1.map:jit_cold\n"
				 "15%  [kernel]:do_syscall_64\n 5%  [anon]+0x40\n");
}

static void test_l_gives_file_and_line_where_known(void **state)
{
	(void)state;
	report("2l");
	assert_string_equal(out, "60%  jit_hot < app.c:10\n20%  jit_cold < app.c:10\n"
				 "15%  do_syscall_64 < entry_SYSCALL_64\n 5%  [anon]+0x40 < app.c:12\n");
}

static void test_depth_and_inverse_depth(void **state)
{
	(void)state;
	report("2");
	assert_string_equal(out, "60%  jit_hot < main\n20%  jit_cold < main\n"
				 "15%  do_syscall_64 < entry_SYSCALL_64\n 5%  [anon]+0x40 < main\n");
	report("-2");
	assert_string_equal(out, "60%  main > jit_hot\n20%  main > jit_cold\n"
				 "15%  entry_SYSCALL_64 > do_syscall_64\n 5%  main > [anon]+0x40\n");
}

static void test_s_splits_after_the_first_level(void **state)
{
	(void)state;
	/* s alone: depth 2, the callers under each function. */
	report("s");
	assert_string_equal(out, "60%  jit_hot\n  <- 100%  main\n20%  jit_cold\n  <- 100%  main\n"
				 "15%  do_syscall_64\n  <- 100%  entry_SYSCALL_64\n"
				 " 5%  [anon]+0x40\n  <- 100%  main\n");
	/* 3s: the two callers below, as one key. */
	report("3s");
	assert_string_equal(out, "60%  jit_hot\n  <- 100%  main < __libc_start_call_main\n"
				 "20%  jit_cold\n  <- 100%  main < __libc_start_call_main\n"
				 "15%  do_syscall_64\n  <- 100%  entry_SYSCALL_64 < write\n"
				 " 5%  [anon]+0x40\n  <- 100%  main < __libc_start_call_main\n");
	/* -2s: the outermost of two first, its callees under it. */
	report("-2s");
	assert_string_equal(out, "85%  main\n  -> 71%  jit_hot\n  -> 24%  jit_cold\n  ->  6%  [anon]+0x40\n"
				 "15%  entry_SYSCALL_64\n  -> 100%  do_syscall_64\n");
}

static void test_v_states_alone_first_and_second(void **state)
{
	(void)state;
	report("v");
	assert_string_equal(out, "80%  JIT code\n15%  Kernel\n 5%  Unnamed JIT code\n");
	report("vf");
	assert_string_equal(out, "80%  JIT code\n  -- 75%  jit_hot\n  -- 25%  jit_cold\n"
				 "15%  Kernel\n  -- 100%  do_syscall_64\n"
				 " 5%  Unnamed JIT code\n  -- 100%  [anon]+0x40\n");
	report("fv");
	assert_string_equal(out, "60%  jit_hot\n  <- 100%  JIT code\n20%  jit_cold\n  <- 100%  JIT code\n"
				 "15%  do_syscall_64\n  <- 100%  Kernel\n"
				 " 5%  [anon]+0x40\n  <- 100%  Unnamed JIT code\n");
}

static void test_z_zones(void **state)
{
	(void)state;
	report("z");
	assert_string_equal(out, "80%  container:aaaaaaaaaaaa\n20%  /user.slice\n");
	report("zf");
	assert_string_equal(out, "80%  container:aaaaaaaaaaaa\n  -- 75%  jit_hot\n  -- 25%  jit_cold\n"
				 "20%  /user.slice\n  -- 75%  do_syscall_64\n  -- 25%  [anon]+0x40\n");
}

static void test_r_raw_counts_and_m_minimum(void **state)
{
	(void)state;
	report("r");
	assert_string_equal(out, "   60  jit_hot\n   20  jit_cold\n   15  do_syscall_64\n    5  [anon]+0x40\n");
	report("m20");
	assert_string_equal(out, "60%  jit_hot\n20%  jit_cold\n");
	report("m0");
	assert_string_equal(out, "60%  jit_hot\n20%  jit_cold\n15%  do_syscall_64\n 5%  [anon]+0x40\n");
}

static void test_fl_functions_then_their_lines(void **state)
{
	(void)state;
	report("fl");
	assert_string_equal(out, "60%  jit_hot\n  -- 100%  jit_hot\n20%  jit_cold\n  -- 100%  jit_cold\n"
				 "15%  do_syscall_64\n  -- 100%  do_syscall_64\n"
				 " 5%  [anon]+0x40\n  -- 100%  [anon]+0x40\n");
}

/* G: every stack caller first, frames joined by ';', a space and its count: what flamegraph.pl reads. */
static void test_G_folded_stacks(void **state)
{
	(void)state;
	report("G");
	assert_string_equal(out,
		"__libc_start_call_main;main;jit_hot 60\n"
		"__libc_start_call_main;main;jit_cold 20\n"
		"__libc_start_call_main;main;write;entry_SYSCALL_64;do_syscall_64 15\n"
		"__libc_start_call_main;main;[anon]+0x40 5\n");
	/* The minimum does not apply: every stack is there. */
	report("Gm50");
	assert_non_null(strstr(out, "[anon]+0x40 5\n"));
}

static void test_combinations_parse_as_jp_does(void **state)
{
	struct prof_view v;
	char err[128];

	(void)state;
	assert_int_equal(prof_view_parse("3si4m1", &v, err, sizeof(err)), 0);
	assert_int_equal(v.depth, 3);
	assert_int_equal(v.split, 2);
	assert_int_equal(v.interval_ms, 4);
	assert_int_equal(v.min_pct, 1);
	assert_int_equal(v.scope, 'f');
	assert_int_equal(prof_view_parse("vf", &v, err, sizeof(err)), 0);
	assert_int_equal(v.split, 1);
	assert_int_equal(prof_view_parse("fv", &v, err, sizeof(err)), 0);
	assert_int_equal(v.split, 0);
	assert_int_equal(v.states, 'v');
	assert_int_equal(prof_view_parse("Fl", &v, err, sizeof(err)), 0);
	assert_int_equal(v.split, 3);
	assert_int_equal(v.scope, 'F');
}

static void test_bad_letters_are_named(void **state)
{
	struct prof_view v;
	char err[128];

	(void)state;
	assert_int_equal(prof_view_parse("fq", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'q' is not a letter of -j");
	assert_int_equal(prof_view_parse("i0", &v, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "interval"));
	assert_int_equal(prof_view_parse("m", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'m' is not a letter of -j");
	assert_int_equal(prof_view_parse("f\x1b", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "byte 0x1b is not a letter of -j");
	assert_int_equal(prof_view_parse("0", &v, err, sizeof(err)), -EINVAL);
}

static void test_no_samples(void **state)
{
	struct prof_view v;
	char err[128];
	FILE *f = fmemopen(out, sizeof(out), "w");

	(void)state;
	assert_int_equal(prof_view_parse("f", &v, err, sizeof(err)), 0);
	assert_int_equal(prof_report(set, 0, &v, f), 0);
	fclose(f);
	assert_string_equal(out, "[No samples collected]\n");
	/* Folded stacks of nothing: no line at all, as p.lua. */
	memset(out, 0, sizeof(out));
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_view_parse("G", &v, err, sizeof(err)), 0);
	assert_int_equal(prof_report(set, 0, &v, f), 0);
	fclose(f);
	assert_string_equal(out, "");
}

/* F wins over f and l (p.lua): "lF" is module:name; G keeps the scope's letter. */
static void test_F_wins_and_G_keeps_its_scope(void **state)
{
	(void)state;
	report("lF");
	assert_string_equal(out, "60%  perf-1.map:jit_hot\n20%  perf-1.map:jit_cold\n"
				 "15%  [kernel]:do_syscall_64\n 5%  [anon]+0x40\n");
	report("GF");
	assert_non_null(strstr(out, "libc.so.6:__libc_start_call_main;app:main;perf-1.map:jit_hot 60\n"));
	/* Without a line, the name: a frame of a file without DWARF, JIT code, the kernel. */
	report("Gl");
	assert_non_null(strstr(out, "__libc_start_call_main;app.c:10;jit_hot 60\n"));
	assert_non_null(strstr(out, "__libc_start_call_main;app.c:12;write;entry_SYSCALL_64;do_syscall_64 15\n"));
}

/* a: excerpts of the source with each sampled line's share; A: the whole file. */
static void test_a_and_A_annotate_the_source(void **state)
{
	char *dir = tu_mkdtemp(), path[1024], lines[2048] = "";
	struct prof_frame f10, f12;
	struct prof_sample ss[2];
	struct prof_view v;
	char err[128];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/app.c", dir);
	for (int i = 1; i <= 20; i++)
		snprintf(lines + strlen(lines), sizeof(lines) - strlen(lines), "line %d\n", i);
	tu_write(path, lines, strlen(lines));
	chmod(path, 0644);
	f10 = (struct prof_frame){ "main", "/usr/bin/app", 0, path, 10, 'C' };
	f12 = (struct prof_frame){ "main", "/usr/bin/app", 0, path, 12, 'C' };
	ss[0] = (struct prof_sample){ &f10, 1, NULL, 75 };
	ss[1] = (struct prof_sample){ &f12, 1, NULL, 25 };

	assert_int_equal(prof_view_parse("a", &v, err, sizeof(err)), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 2, &v, f), 0);
	fclose(f);
	snprintf(lines, sizeof(lines),
		 "\n====== %s ======\n@@ 7 @@\n      | line 7\n      | line 8\n      | line 9\n"
		 "  75%% | line 10\n      | line 11\n  25%% | line 12\n      | line 13\n      | line 14\n"
		 "      | line 15\n", path);
	assert_string_equal(out, lines);

	assert_int_equal(prof_view_parse("A", &v, err, sizeof(err)), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 2, &v, f), 0);
	fclose(f);
	assert_non_null(strstr(out, "      | line 1\n"));
	assert_non_null(strstr(out, "  75% | line 10\n"));
	assert_non_null(strstr(out, "      | line 20\n"));

	/* A file only its owner may read is never shown: root would show a user's secret to another. */
	chmod(path, 0600);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 2, &v, f), 0);
	fclose(f);
	assert_non_null(strstr(out, "not readable by everyone: not shown"));
	assert_null(strstr(out, "line 10"));
	/* Nor a FIFO (it would block), nor what a symlink points at. */
	unlink(path);
	assert_int_equal(mkfifo(path, 0644), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 2, &v, f), 0);
	fclose(f);
	assert_non_null(strstr(out, "not a regular file"));
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 2, &v, f), 0);
	fclose(f);
	assert_null(strstr(out, "root:"));
	assert_non_null(strstr(out, "====== ERROR: "));
	unlink(path);
	tu_rmdir(dir);
}

/* Names come from other processes: no byte of theirs reaches a terminal as a control, nor forges a frame. */
static void test_names_are_escaped(void **state)
{
	static const struct prof_frame evil = { "a\x1b[2J;b\xff\\c", "/tmp/perf-1.map", 0, NULL, 0, 'J' };
	static const struct prof_frame caller = { "main", "/usr/bin/app", 0, NULL, 0, 'C' };
	struct prof_frame fr[2] = { evil, caller };
	struct prof_sample ss = { fr, 2, "zone\n100%  forged", 1 };
	struct prof_view v;
	char err[128];
	FILE *f;

	(void)state;
	assert_int_equal(prof_view_parse("f", &v, err, sizeof(err)), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(&ss, 1, &v, f), 0);
	fclose(f);
	assert_string_equal(out, "100%  a\\x1b[2J;b\\xff\\x5cc\n");
	assert_int_equal(prof_view_parse("G", &v, err, sizeof(err)), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(&ss, 1, &v, f), 0);
	fclose(f);
	assert_string_equal(out, "main;a\\x1b[2J\\x3bb\\xff\\x5cc 1\n");
	assert_int_equal(prof_view_parse("z", &v, err, sizeof(err)), 0);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(&ss, 1, &v, f), 0);
	fclose(f);
	assert_string_equal(out, "100%  zone\\x0a100%  forged\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f_is_the_default_leaf_function_view),
		cmocka_unit_test(test_F_prefixes_the_module_and_p_keeps_its_path),
		cmocka_unit_test(test_l_gives_file_and_line_where_known),
		cmocka_unit_test(test_depth_and_inverse_depth),
		cmocka_unit_test(test_s_splits_after_the_first_level),
		cmocka_unit_test(test_v_states_alone_first_and_second),
		cmocka_unit_test(test_z_zones),
		cmocka_unit_test(test_r_raw_counts_and_m_minimum),
		cmocka_unit_test(test_fl_functions_then_their_lines),
		cmocka_unit_test(test_G_folded_stacks),
		cmocka_unit_test(test_combinations_parse_as_jp_does),
		cmocka_unit_test(test_bad_letters_are_named),
		cmocka_unit_test(test_no_samples),
		cmocka_unit_test(test_F_wins_and_G_keeps_its_scope),
		cmocka_unit_test(test_a_and_A_annotate_the_source),
		cmocka_unit_test(test_names_are_escaped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

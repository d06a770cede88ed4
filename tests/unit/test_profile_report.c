/*
 * profile_report: every letter of perfmapctl profile -j on one fixed set of
 * samples, against the output LuaJIT's -jp gives for the same counts: the
 * keys, their order, the percentages, the second levels and their indents,
 * folded stacks, raw counts, the minimum, annotation, and bad letters;
 * and which source files annotation may open, as which process.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "profile_annotate.h"
#include "profile_report.h"
#include "testutil.h"

/* A frame as the views see it: name, module, offset, source file and line, state. */
#define FRAME(n, m, o, f, l, s) { .name = (n), .module = (m), .offset = (o), .file = (f), .line = (l), .state = (s) }

/* main() at app.c:10 and :12; the JIT's two functions; the kernel under write(); unnamed JIT code. */
static const struct prof_frame hot = FRAME("jit_hot", "/tmp/perf-1.map", 0, NULL, 0, 'J');
static const struct prof_frame cold = FRAME("jit_cold", "/tmp/perf-1.map", 0, NULL, 0, 'J');
static const struct prof_frame main10 = FRAME("main", "/usr/bin/app", 0x20, "/src/app.c", 10, 'C');
static const struct prof_frame main12 = FRAME("main", "/usr/bin/app", 0x28, "/src/app.c", 12, 'C');
static const struct prof_frame start = FRAME("__libc_start_call_main", "/usr/lib/libc.so.6", 0x7a, NULL, 0, 'C');
static const struct prof_frame sysc = FRAME("do_syscall_64", "[kernel]", 0x5d, NULL, 0, 'K');
static const struct prof_frame entry = FRAME("entry_SYSCALL_64", "[kernel]", 0x76, NULL, 0, 'K');
static const struct prof_frame wr = FRAME("write", "/usr/lib/libc.so.6", 0x10, NULL, 0, 'C');
static const struct prof_frame anon = FRAME(NULL, "[anon]", 0x40, NULL, 0, 'U');

static const struct prof_frame s1[] = { hot, main10, start };
static const struct prof_frame s2[] = { cold, main10, start };
static const struct prof_frame s3[] = { sysc, entry, wr, main12, start };
static const struct prof_frame s4[] = { anon, main12, start };

static const struct prof_sample set[] = {
	{ s1, 3, "container:aaaaaaaaaaaa", 60, NULL },
	{ s2, 3, "container:aaaaaaaaaaaa", 20, NULL },
	{ s3, 5, "/user.slice", 15, NULL },
	{ s4, 3, "/user.slice", 5, NULL },
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

/* The test's own credentials: a process of ours could read what the test makes. */
static struct prof_cred self;
static gid_t self_groups[256];

static const struct prof_cred *our_cred(void)
{
	int n = getgroups(256, self_groups);

	assert_true(n >= 0);
	self = (struct prof_cred){ geteuid(), getegid(), (size_t)n, self_groups, true };
	return &self;
}

/* a: excerpts of the source with each sampled line's share; A: the whole file. */
static void test_a_and_A_annotate_the_source(void **state)
{
	char *dir = tu_mkdtemp(), path[1024], lines[2048] = "";
	const struct prof_cred *me = our_cred();
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
	f10 = (struct prof_frame)FRAME("main", "/usr/bin/app", 0, path, 10, 'C');
	f12 = (struct prof_frame)FRAME("main", "/usr/bin/app", 0, path, 12, 'C');
	ss[0] = (struct prof_sample){ &f10, 1, NULL, 75, me };
	ss[1] = (struct prof_sample){ &f12, 1, NULL, 25, me };

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
	unlink(path);
	tu_rmdir(dir);
}

static const gid_t no_groups[1];
static const gid_t group_4242[] = { 4242 };
static const struct prof_cred nobody = { 65534, 65534, 0, no_groups, true };
static const struct prof_cred nobody_4242 = { 65534, 65534, 1, group_4242, true };
static const struct prof_cred root_cred = { 0, 0, 0, no_groups, true };
static const struct prof_cred ctr_root = { 0, 0, 0, no_groups, false };

/* A new directory uid 65534 can reach (run-unit.sh's TMPDIR is root's alone), mode 0755. */
static char *reachable_dir(void)
{
	const char *tmpdir = getenv("TMPDIR");
	char *saved = tmpdir ? strdup(tmpdir) : NULL, *dir;

	setenv("TMPDIR", "/var/tmp", 1);
	dir = tu_mkdtemp();
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	assert_non_null(dir);
	assert_int_equal(chmod(dir, 0755), 0);
	return dir;
}

/* prof_source_open(@path) as @c: 0 (the fd closed), or -errno with the reason in @why. */
static int try_open(const char *path, const struct prof_cred *c, char *why, size_t len)
{
	int fd, err;

	why[0] = '\0';
	err = prof_source_open(path, c, &fd, why, len);
	if (!err) {
		assert_true(fd >= 0);
		close(fd);
	} else {
		assert_int_equal(fd, -1);
		assert_true(why[0] != '\0');
	}
	return err;
}

/*
 * The decision: a source file is opened only as the process that names it
 * could have (uid 65534 here), through every directory on its path and
 * every symlink, never on /proc, /sys or /dev however it is reached, never
 * a FIFO, a device or a huge file. Root: it takes another uid's ids.
 */
static void test_sources_open_as_the_process_could(void **state)
{
	char *dir, p[1024], q[1024], why[256];
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip();  /* only root can act as another uid */
	dir = reachable_dir();

	/* The control: world-readable in searchable directories. */
	snprintf(p, sizeof(p), "%s/ok.txt", dir);
	tu_write(p, "ok\n", 3);
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), 0);
	/* ... and through a symlink the uid may follow. */
	snprintf(q, sizeof(q), "%s/ok-link", dir);
	assert_int_equal(symlink(p, q), 0);
	assert_int_equal(try_open(q, &nobody, why, sizeof(why)), 0);

	/* 0644, in a directory only root may search: what the issue found printed. */
	snprintf(p, sizeof(p), "%s/secretdir", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/secretdir/notes.txt", dir);
	tu_write(p, "line1\nTOP-SECRET line2\n", 23);
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "uid 65534 cannot reach it"));
	/* Root's own process may: its uid owns the directory (no capability needed). */
	assert_int_equal(try_open(p, &root_cred, why, sizeof(why)), 0);
	/* A symlink to it is no way around the directory. */
	snprintf(q, sizeof(q), "%s/secret-link", dir);
	assert_int_equal(symlink(p, q), 0);
	assert_int_equal(try_open(q, &nobody, why, sizeof(why)), -EACCES);

	/* The file's own bits: owner, group (supplementary groups too), others. */
	snprintf(p, sizeof(p), "%s/mode.txt", dir);
	tu_write(p, "x\n", 2);
	assert_int_equal(chmod(p, 0600), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "uid 65534 may not read it"));
	assert_int_equal(chown(p, 65534, 0), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), 0);
	assert_int_equal(chown(p, 0, 4242), 0);
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EACCES);
	assert_int_equal(try_open(p, &nobody_4242, why, sizeof(why)), 0);
	/* Root without root's capabilities: another's 0600 file is not root's process's to read. */
	assert_int_equal(chown(p, 65534, 65534), 0);
	assert_int_equal(chmod(p, 0600), 0);
	assert_int_equal(try_open(p, &root_cred, why, sizeof(why)), -EACCES);

	/* /proc, however it is reached: by name, by "..", by a symlink, by a magic link. */
	assert_int_equal(try_open("/proc/kallsyms", &nobody, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "on /proc, /sys or /dev"));
	assert_int_equal(try_open("/proc/kallsyms", &root_cred, why, sizeof(why)), -EPERM);
	snprintf(p, sizeof(p), "%s/../../../../../../../proc/kallsyms", dir);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EPERM);
	snprintf(q, sizeof(q), "%s/proc-link", dir);
	assert_int_equal(symlink("/proc", q), 0);
	snprintf(p, sizeof(p), "%s/proc-link/kallsyms", dir);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EPERM);
	snprintf(p, sizeof(p), "%s/proc-link/self/root%s/ok.txt", dir, dir);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -ELOOP);
	snprintf(p, sizeof(p), "%s/proc-link/1/root%s/ok.txt", dir, dir);
	assert_true(try_open(p, &nobody, why, sizeof(why)) < 0);
	if (!access("/sys/kernel/notes", F_OK))
		assert_int_equal(try_open("/sys/kernel/notes", &nobody, why, sizeof(why)), -EPERM);
	assert_true(try_open("/dev/null", &nobody, why, sizeof(why)) < 0);

	/* A FIFO is refused at once, never waited on; so is a file past 64 MiB. */
	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(mkfifo(p, 0666), 0);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not a regular file"));
	snprintf(p, sizeof(p), "%s/big", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (65 << 20)), 0);
	close(fd);
	assert_int_equal(try_open(p, &nobody, why, sizeof(why)), -EFBIG);

	/* A process whose credentials were never read opens nothing. */
	snprintf(p, sizeof(p), "%s/ok.txt", dir);
	assert_int_equal(try_open(p, NULL, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "never read"));
	/*
	 * Nor one in another mount namespace (a container): its paths are in its
	 * own root; as uid 0 there it would read the host's root-owned files.
	 */
	assert_int_equal(try_open(p, &ctr_root, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "another mount namespace"));
	snprintf(p, sizeof(p), "%s/secretdir/notes.txt", dir);
	assert_int_equal(try_open(p, &ctr_root, why, sizeof(why)), -EACCES);

	/* The thread acted as 65534; the test is root again. */
	assert_int_equal(setfsuid((uid_t)-1), 0);
	tu_rmdir(dir);
}

/*
 * In the report: a file refused shows its lines' shares and no text, and
 * says why once on the notes however many lines it has; a file named by
 * two processes is shown only if both may read it.
 */
static void test_a_shows_what_the_process_could_read(void **state)
{
	char *dir, secret[1024], ok[1024], notes[4096], want[2048];
	struct prof_frame fs2, fs3, fo2;
	struct prof_sample ss[3];
	struct prof_view v;
	char err[128];
	FILE *f;

	(void)state;
	if (geteuid() != 0)
		skip();  /* only root can act as another uid */
	dir = reachable_dir();
	snprintf(secret, sizeof(secret), "%s/secretdir", dir);
	assert_int_equal(mkdir(secret, 0700), 0);
	snprintf(secret, sizeof(secret), "%s/secretdir/notes.txt", dir);
	tu_write(secret, "line1\nTOP-SECRET line2\nTOP-SECRET line3\n", 40);
	assert_int_equal(chmod(secret, 0644), 0);
	snprintf(ok, sizeof(ok), "%s/ok.txt", dir);
	tu_write(ok, "first\nCONTROL line2\n", 20);
	assert_int_equal(chmod(ok, 0644), 0);
	fs2 = (struct prof_frame)FRAME("JS:*a", "/tmp/perf-1.map", 0, secret, 2, 'J');
	fs3 = (struct prof_frame)FRAME("JS:*b", "/tmp/perf-1.map", 0, secret, 3, 'J');
	fo2 = (struct prof_frame)FRAME("JS:*c", "/tmp/perf-1.map", 0, ok, 2, 'J');
	ss[0] = (struct prof_sample){ &fs2, 1, NULL, 40, &nobody };
	ss[1] = (struct prof_sample){ &fs3, 1, NULL, 20, &nobody };
	ss[2] = (struct prof_sample){ &fo2, 1, NULL, 40, &nobody };

	assert_int_equal(prof_view_parse("a", &v, err, sizeof(err)), 0);
	memset(notes, 0, sizeof(notes));
	v.notes = fmemopen(notes, sizeof(notes), "w");
	assert_non_null(v.notes);
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 3, &v, f), 0);
	fclose(f);
	fclose(v.notes);
	assert_null(strstr(out, "TOP-SECRET"));
	snprintf(want, sizeof(want), "\n====== %s ======\n[Source not shown]\n@@ 2 @@\n  40%% |\n@@ 3 @@\n  20%% |\n",
		 secret);
	assert_non_null(strstr(out, want));
	/* The control is shown. */
	assert_non_null(strstr(out, "  40% | CONTROL line2\n"));
	/* Why, once for the file, not once per line. */
	snprintf(want, sizeof(want), "perfmapctl: profile: annotate: %s: not shown: uid 65534 cannot reach it: Permission denied\n",
		 secret);
	assert_string_equal(notes, want);

	/* Root's process may read the secret; a sample of 65534's at one of its lines keeps it hidden. */
	ss[0].cred = &root_cred;
	ss[1].cred = &nobody;
	memset(notes, 0, sizeof(notes));
	v.notes = fmemopen(notes, sizeof(notes), "w");
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 3, &v, f), 0);
	fclose(f);
	fclose(v.notes);
	assert_null(strstr(out, "TOP-SECRET"));
	assert_non_null(strstr(notes, "uid 65534 cannot reach it"));
	/* Root's alone: shown. */
	ss[1].cred = &root_cred;
	memset(notes, 0, sizeof(notes));
	v.notes = fmemopen(notes, sizeof(notes), "w");
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 3, &v, f), 0);
	fclose(f);
	fclose(v.notes);
	assert_non_null(strstr(out, "  40% | TOP-SECRET line2\n"));
	assert_string_equal(notes, "");
	/* With r: counts, and still no text. A process never read: nothing shown. */
	ss[0].cred = NULL;
	assert_int_equal(prof_view_parse("ar", &v, err, sizeof(err)), 0);
	memset(notes, 0, sizeof(notes));
	v.notes = fmemopen(notes, sizeof(notes), "w");
	f = fmemopen(out, sizeof(out), "w");
	assert_int_equal(prof_report(ss, 3, &v, f), 0);
	fclose(f);
	fclose(v.notes);
	assert_null(strstr(out, "TOP-SECRET"));
	assert_non_null(strstr(out, "@@ 2 @@\n   40 |\n"));
	assert_non_null(strstr(notes, "never read"));
	tu_rmdir(dir);
}

/* Names come from other processes: no byte of theirs reaches a terminal as a control, nor forges a frame. */
static void test_names_are_escaped(void **state)
{
	static const struct prof_frame evil = FRAME("a\x1b[2J;b\xff\\c", "/tmp/perf-1.map", 0, NULL, 0, 'J');
	static const struct prof_frame caller = FRAME("main", "/usr/bin/app", 0, NULL, 0, 'C');
	struct prof_frame fr[2] = { evil, caller };
	struct prof_sample ss = { fr, 2, "zone\n100%  forged", 1, NULL };
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
		cmocka_unit_test(test_sources_open_as_the_process_could),
		cmocka_unit_test(test_a_shows_what_the_process_could_read),
		cmocka_unit_test(test_names_are_escaped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

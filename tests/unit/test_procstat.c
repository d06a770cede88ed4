/* procstat: libperfmap's one /proc/<pid>/stat parser, on lines as the kernel writes them and on live processes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "testutil.h"

/* Fields 1 to 24 of a stat line, around @comm. */
static void stat_line(char *buf, size_t len, const char *comm, char state)
{
	snprintf(buf, len, "4242 (%s) %c 17 4242 4242 0 -1 4194368 103 0 0 0 1 2 0 0 20 0 1 0 "
		 "987654321 5738496 397 18446744073709551615\n", comm, state);
}

static void test_fields_whatever_the_comm(void **state)
{
	static const char *const comms[] = { "python3", "a b", "x) (y", ") S 1 2", "(", "" };
	struct perfmap_proc_stat st;
	char line[512];

	(void)state;
	for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
		stat_line(line, sizeof(line), comms[i], 'S');
		memset(&st, 0xa5, sizeof(st));
		assert_int_equal(perfmap__proc_stat_parse(line, &st), 0);
		assert_string_equal(st.comm, comms[i]);
		assert_int_equal(st.state, 'S');
		assert_int_equal(st.ppid, 17);
		assert_int_equal(st.flags, 4194368);
		assert_true(st.utime_ticks == 1 && st.stime_ticks == 2);
		assert_true(st.start_ticks == 987654321);
		assert_true(st.vsize_bytes == 5738496);
		assert_true(st.rss_pages == 397);
	}
	/* A comm longer than the kernel's 15 bytes (a kernel thread's) is cut, NUL-terminated. */
	stat_line(line, sizeof(line), "kworker/u8:1-events_unbound", 'I');
	assert_int_equal(perfmap__proc_stat_parse(line, &st), 0);
	assert_string_equal(st.comm, "kworker/u8:1-ev");
	assert_int_equal(st.state, 'I');
}

/* Cut before field 24 (rss), or no comm: -EINVAL, and nothing written. */
static void test_short_lines_refused(void **state)
{
	static const char *const bad[] = {
		"", "4242", "4242 (a)", "4242 (a) ", "4242 (a)S 1", "4242 a) S 1",
		"4242 (a) S 17 4242 4242 0 -1 4194368 103 0 0 0 1 2 0 0 20 0 1 0",
		"4242 (a) S 17 4242 4242 0 -1 4194368 103 0 0 0 1 2 0 0 20 0 1 0 987654321",
		"4242 (a) S 17 4242 4242 0 -1 4194368 103 0 0 0 1 2 0 0 20 0 1 0 987654321 5738496",
	};
	struct perfmap_proc_stat st, before;

	(void)state;
	/* Both set byte by byte: an assignment need not copy the padding memcmp compares. */
	memset(&before, 0x5a, sizeof(before));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&st, 0x5a, sizeof(st));
		assert_int_equal(perfmap__proc_stat_parse(bad[i], &st), -EINVAL);
		assert_memory_equal(&st, &before, sizeof(st));
	}
}

/*
 * A child named as no comm should be: its stat read by its parent names it,
 * its parent, and its state through its end; once reaped, -ESRCH.
 */
static void test_live_child(void **state)
{
	struct perfmap_proc_stat st, self;
	int go[2], done[2];
	pid_t pid;
	char c;

	(void)state;
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		prctl(PR_SET_NAME, "x) S 1 (y");
		if (write(go[1], "g", 1) != 1)
			_exit(1);
		_exit(read(done[0], &c, 1) == 1 ? 0 : 2);
	}
	assert_int_equal(read(go[0], &c, 1), 1);
	assert_int_equal(perfmap__proc_stat_read(getpid(), &self), 0);
	assert_int_equal(self.ppid, getppid());
	assert_true(self.vsize_bytes > 0 && self.rss_pages > 0);
	assert_int_equal(perfmap__proc_stat_read(pid, &st), 0);
	assert_string_equal(st.comm, "x) S 1 (y");
	assert_int_equal(st.ppid, getpid());
	assert_true(st.state == 'S' || st.state == 'R');
	/* Started after its parent: a later tick, or the same one. */
	assert_true(st.start_ticks >= self.start_ticks);
	assert_int_equal(write(done[1], "d", 1), 1);
	/* Exited, not reaped: still there, a zombie. */
	assert_int_equal(waitid(P_PID, (id_t)pid, NULL, WEXITED | WNOWAIT), 0);
	assert_int_equal(perfmap__proc_stat_read(pid, &st), 0);
	assert_int_equal(st.state, 'Z');
	assert_int_equal(tu_wait(pid), 0);
	assert_int_equal(perfmap__proc_stat_read(pid, &st), -ESRCH);
	assert_int_equal(perfmap__proc_stat_read(INT_MAX, &st), -ESRCH);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
}

/* Our own stat through /proc/self: the same process as at our pid, its counters only grown. */
static void test_self(void **state)
{
	struct perfmap_proc_stat by_pid, self;
	volatile unsigned long spin = 0;
	struct timespec t0, t;

	(void)state;
	assert_int_equal(perfmap__proc_stat_read(getpid(), &by_pid), 0);
	/* Some CPU time of our own between the two reads: a tick or more, some 10 ms. */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		spin++;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 30000000L);
	assert_int_equal(perfmap__proc_stat_read_self(&self), 0);
	assert_string_equal(self.comm, by_pid.comm);
	assert_int_equal(self.ppid, getppid());
	assert_true(self.start_ticks == by_pid.start_ticks);
	assert_true(self.utime_ticks + self.stime_ticks > by_pid.utime_ticks + by_pid.stime_ticks);
	assert_true(self.vsize_bytes > 0 && self.rss_pages > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields_whatever_the_comm),
		cmocka_unit_test(test_short_lines_refused),
		cmocka_unit_test(test_live_child),
		cmocka_unit_test(test_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* mapwatch: the index of which pids have a map follows the directory, and says "absent" only when it knows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "events.h"
#include "mapwatch.h"
#include "testutil.h"

/* What the index mirrors into BPF, and the agent's clock: stubs here. */
static int bpf_pid = -1;
static bool bpf_mapped;

void events__set_mapped(struct events *ev, int pid, bool mapped)
{
	(void)ev;
	bpf_pid = pid;
	bpf_mapped = mapped;
}

bool retain_has(struct agent *a, pid_t pid)
{
	(void)a;
	(void)pid;
	return false;
}

uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static char *dir;
static struct agent agent;

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	memset(&agent, 0, sizeof(agent));
	agent.cfg.map_dir = dir;
	if (!dir || proctab_init(&agent.procs))
		return -1;
	agent.watch = mapwatch__open(&agent);
	return agent.watch ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	mapwatch__free(agent.watch);
	proctab_fini(&agent.procs);
	tu_rmdir(dir);
	return 0;
}

static void make_map(pid_t pid)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	tu_write(path, "1000 10 f\n", 10);
}

static void test_unknown_until_listed(void **state)
{
	(void)state;
	/* Before a listing the index knows nothing: everything may exist. */
	assert_string_equal(mapwatch__state(agent.watch), "listing");
	assert_true(mapwatch__may_exist(agent.watch, 4242, 1));
	assert_true(mapwatch__has(agent.watch, 4242));
	mapwatch__synced(agent.watch, boot_ns());
	assert_string_equal(mapwatch__state(agent.watch), "exact");
	assert_false(mapwatch__has(agent.watch, 4242));
}

static void test_follows_create_and_delete(void **state)
{
	char path[4096];
	uint64_t before;

	(void)state;
	mapwatch__synced(agent.watch, boot_ns());
	before = boot_ns();
	make_map(4242);
	/* A change not read yet: an event after the last read must go to disk. */
	assert_true(mapwatch__may_exist(agent.watch, 4242, boot_ns()));
	mapwatch__drain(&agent);
	assert_true(mapwatch__has(agent.watch, 4242));
	assert_true(mapwatch__may_exist(agent.watch, 4242, before));
	assert_int_equal(bpf_pid, 4242);
	assert_true(bpf_mapped);
	assert_false(mapwatch__may_exist(agent.watch, 4243, before));

	snprintf(path, sizeof(path), "%s/perf-4242.map", dir);
	assert_int_equal(unlink(path), 0);
	mapwatch__drain(&agent);
	assert_false(mapwatch__has(agent.watch, 4242));
	assert_false(bpf_mapped);
}

static void test_event_after_read_goes_to_disk(void **state)
{
	uint64_t ts;

	(void)state;
	mapwatch__synced(agent.watch, boot_ns());
	mapwatch__drain(&agent);
	/* An event stamped after the last read: its map may not be read yet. */
	ts = boot_ns();
	assert_true(mapwatch__may_exist(agent.watch, 777, ts));
	/* Unknown time (from a /proc scan): always the disk. */
	assert_true(mapwatch__may_exist(agent.watch, 777, 0));
	mapwatch__drain(&agent);
	assert_false(mapwatch__may_exist(agent.watch, 777, ts));
}

static void test_other_names_ignored(void **state)
{
	char path[4096];

	(void)state;
	mapwatch__synced(agent.watch, boot_ns());
	snprintf(path, sizeof(path), "%s/perf-12.map.tmp", dir);
	tu_write(path, "x\n", 2);
	snprintf(path, sizeof(path), "%s/perf-x.map", dir);
	tu_write(path, "x\n", 2);
	bpf_pid = -1;
	mapwatch__drain(&agent);
	assert_int_equal(bpf_pid, -1);
	assert_false(mapwatch__has(agent.watch, 12));
}

static void test_orphan_asks_for_a_listing(void **state)
{
	(void)state;
	mapwatch__synced(agent.watch, boot_ns());
	/* A map for a pid the agent does not track, and that is not retained. */
	make_map(31000);
	assert_true(mapwatch__drain(&agent));
	/* Nothing new: no listing. */
	assert_false(mapwatch__drain(&agent));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unknown_until_listed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follows_create_and_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_after_read_goes_to_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_names_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_asks_for_a_listing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * creds: a process's credentials as /proc shows them to the host, and its
 * user namespace's id maps: what the agent acts with in a container's
 * directory, and what decides whether a directory or a file is the
 * namespace's own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/creds.h"
#include "testutil.h"

/* As fs/proc/array.c writes it: real, effective, saved, fs. */
static const char status_text[] =
	"Name:\tforkjit\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
	"Uid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\n"
	"FDSize:\t64\nGroups:\t4 24 27 1000 \nNStgid:\t4242\t1\n"
	"CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t00000000a80425fb\n";

static void test_status_gives_fs_ids_groups_and_caps(void **state)
{
	struct proc_creds c;

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	assert_int_equal(creds_parse_status(status_text, &c), 0);
	/* The file-system ids: what the kernel checks a file operation with. */
	assert_int_equal(c.fsuid, 1003);
	assert_int_equal(c.fsgid, 2003);
	assert_int_equal(c.ngroups, 4);
	assert_int_equal(c.groups[0], 4);
	assert_int_equal(c.groups[3], 1000);
	assert_true(c.cap_eff == 0xa80425fbull);
}

static void test_status_without_ids_is_refused(void **state)
{
	struct proc_creds c;

	(void)state;
	assert_int_equal(creds_parse_status("Name:\tx\nGid:\t1\t1\t1\t1\n", &c), -EINVAL);
	/* Three ids where four are: not the kernel's line. */
	assert_int_equal(creds_parse_status("Uid:\t1\t1\t1\nGid:\t1\t1\t1\t1\n", &c), -EINVAL);
	assert_int_equal(creds_parse_status("Uid:\t1\t1\t1\t99999999999\nGid:\t1\t1\t1\t1\n", &c),
			 -EINVAL);
}

/* An empty groups line: no groups, known; no line at all: not known. */
static void test_no_groups_is_none(void **state)
{
	struct proc_creds c;

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	assert_int_equal(creds_parse_status("Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t\n", &c), 0);
	assert_int_equal(c.ngroups, 0);
	assert_true(c.groups_known);
	assert_true(c.cap_eff == 0);
	assert_int_equal(creds_parse_status("Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\n", &c), 0);
	assert_false(c.groups_known);
}

/*
 * More groups than are taken, or a line the read cut: not known, so nothing
 * is done as the process (a group left out could allow more); never a
 * write past the array.
 */
static void test_groups_all_or_none(void **state)
{
	char text[8192] = "Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t";
	struct proc_creds c;
	int i;

	(void)state;
	for (i = 0; i < CREDS_GROUPS_MAX; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%d ", 100 + i);
	/* Cut short by the read: no newline after the last group. */
	assert_int_equal(creds_parse_status(text, &c), 0);
	assert_false(c.groups_known);
	strcat(text, "\n");
	assert_int_equal(creds_parse_status(text, &c), 0);
	assert_true(c.groups_known);
	assert_int_equal(c.ngroups, CREDS_GROUPS_MAX);
	assert_int_equal(c.groups[CREDS_GROUPS_MAX - 1], 100 + CREDS_GROUPS_MAX - 1);
	text[strlen(text) - 1] = '\0';
	strcat(text, "99999 \n");
	assert_int_equal(creds_parse_status(text, &c), 0);
	assert_false(c.groups_known);
	assert_int_equal(c.ngroups, CREDS_GROUPS_MAX);
}

static void test_host_user_namespace_maps_everything(void **state)
{
	struct idmap m;

	(void)state;
	assert_int_equal(idmap_parse("         0          0 4294967295\n", &m), 0);
	assert_int_equal(m.n, 1);
	assert_true(idmap_has(&m, 0));
	assert_true(idmap_has(&m, 65534));
	assert_true(idmap_has(&m, 4294967294u));
	assert_true(idmap_root_is_host_root(&m));
}

/* unshare -Ur as uid 65534: its root is that user, and the host's root is nobody there. */
static void test_a_users_namespace_maps_only_its_ids(void **state)
{
	struct idmap m;

	(void)state;
	assert_int_equal(idmap_parse("         0      65534          1\n", &m), 0);
	assert_true(idmap_has(&m, 65534));
	assert_false(idmap_has(&m, 0));
	assert_false(idmap_has(&m, 65533));
	assert_false(idmap_has(&m, 65535));
	assert_false(idmap_root_is_host_root(&m));
}

/* A subordinate range (rootless podman): the user and its 65536 subuids, nothing else. */
static void test_subuid_ranges(void **state)
{
	struct idmap m;

	(void)state;
	assert_int_equal(idmap_parse("0 1000 1\n1 100000 65536\n", &m), 0);
	assert_int_equal(m.n, 2);
	assert_true(idmap_has(&m, 1000));
	assert_true(idmap_has(&m, 100000));
	assert_true(idmap_has(&m, 165535));
	assert_false(idmap_has(&m, 165536));
	assert_false(idmap_has(&m, 0));
	assert_false(idmap_root_is_host_root(&m));
	/* Root mapped to root by root's own namespace (unshare -U as root, "0 0 1"). */
	assert_int_equal(idmap_parse("0 0 1\n", &m), 0);
	assert_true(idmap_root_is_host_root(&m));
}

/* No map written yet (unshare -U without -r): nothing has a name inside. */
static void test_an_empty_map_maps_nothing(void **state)
{
	struct idmap m;

	(void)state;
	assert_int_equal(idmap_parse("", &m), 0);
	assert_int_equal(m.n, 0);
	assert_false(idmap_has(&m, 0));
	assert_false(idmap_root_is_host_root(&m));
	assert_int_equal(idmap_parse("0 x 1\n", &m), -EINVAL);
	assert_int_equal(idmap_parse("0 0\n", &m), -EINVAL);
}

/* Our own: a live process read whole, and a pid that is not the process asked for. */
static void test_read_ourselves(void **state)
{
	struct proc_creds c;

	(void)state;
	assert_int_equal(creds_read(getpid(), 0, &c), -ESRCH);  /* start time 0: not us */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_gives_fs_ids_groups_and_caps),
		cmocka_unit_test(test_status_without_ids_is_refused),
		cmocka_unit_test(test_no_groups_is_none),
		cmocka_unit_test(test_groups_all_or_none),
		cmocka_unit_test(test_host_user_namespace_maps_everything),
		cmocka_unit_test(test_a_users_namespace_maps_only_its_ids),
		cmocka_unit_test(test_subuid_ranges),
		cmocka_unit_test(test_an_empty_map_maps_nothing),
		cmocka_unit_test(test_read_ourselves),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

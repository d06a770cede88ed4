/*
 * subids: the user a subordinate uid belongs to, from /etc/subuid's lines,
 * and the per-uid budgets keyed by that user: a user's 65,536 subordinate
 * uids share one budget, not 65,536.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive_quota.h"
#include "lib/budget.h"
#include "policy/retention.h"
#include "lib/subids.h"
#include "testutil.h"

static int names(const char *name, uid_t *uid)
{
	if (!strcmp(name, "alice")) {
		*uid = 1000;
		return 0;
	}
	if (!strcmp(name, "containers")) {
		*uid = 999;
		return 0;
	}
	if (!strcmp(name, "root")) {
		*uid = 0;
		return 0;
	}
	return -ENOENT;
}

static void test_ranges_belong_to_their_users(void **state)
{
	static const char text[] = "alice:100000:65536\n"
				   "1001:165536:65536\n"
				   "containers:231072:1000000\n"
				   "root:2000000:1000000\n";
	struct subids t;

	(void)state;
	assert_int_equal(subids_parse(text, strlen(text), names, &t), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(subids_owner_in(&t, 100000), 1000);
	assert_int_equal(subids_owner_in(&t, 165535), 1000);
	assert_int_equal(subids_owner_in(&t, 165536), 1001);
	/*
	 * A system user's and root's ranges hold many users' containers (an
	 * engine's, LXD's): each uid its own, never root's share.
	 */
	assert_int_equal(subids_owner_in(&t, 1231071), 1231071);
	assert_int_equal(subids_owner_in(&t, 2000000), 2000000);
	/* Not in a range: its own user. */
	assert_int_equal(subids_owner_in(&t, 99999), 99999);
	assert_int_equal(subids_owner_in(&t, 1231072), 1231072);
	assert_int_equal(subids_owner_in(&t, 0), 0);
	subids_release(&t);
}

/* What is not a line of the file is skipped; the rest is kept. */
static void test_bad_lines_are_skipped(void **state)
{
	static const char text[] = "# comment\n"
				   "\n"
				   "nobody-known:300000:10\n"      /* a name that is no user */
				   "alice:300000\n"                /* no count */
				   "alice:300000:0\n"              /* an empty range */
				   "alice:4294967295:2\n"          /* past the last uid */
				   "alice:x:10\n"
				   ":400000:10\n"
				   "alice:400000:10";              /* no newline at the end: still a line */
	struct subids t;

	(void)state;
	assert_int_equal(subids_parse(text, strlen(text), names, &t), 0);
	assert_int_equal(t.n, 1);
	assert_int_equal(subids_owner_in(&t, 400009), 1000);
	assert_int_equal(subids_owner_in(&t, 300000), 300000);
	subids_release(&t);
}

/* Overlapping ranges: the one that starts first keeps its ids. */
static void test_overlaps_keep_the_first(void **state)
{
	static const char text[] = "1001:100050:100\nalice:100000:100\n";
	struct subids t;

	(void)state;
	assert_int_equal(subids_parse(text, strlen(text), names, &t), 0);
	assert_int_equal(t.n, 1);
	assert_int_equal(subids_owner_in(&t, 100060), 1000);
	assert_int_equal(subids_owner_in(&t, 100120), 100120);
	subids_release(&t);
}

/* No file: every uid is its own. */
static void test_no_file_is_an_empty_table(void **state)
{
	(void)state;
	assert_int_equal(subids_load("/nonexistent/subuid"), 0);
	assert_int_equal(subids_count(), 0);
	assert_int_equal(subids_owner(100000), 100000);
}

/* Load a table of one range, 100000-165535 of uid 1000, from a file in @dir. */
static void load_range(const char *dir)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/subuid", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("1000:100000:65536\n", f);
	fclose(f);
	assert_int_equal(subids_load(path), 0);
}

/* The budgets: a user's subordinate uids draw on the user's one bucket. */
static void test_subordinate_uids_share_their_users_budget(void **state)
{
	char *dir = tu_mkdtemp();
	struct budget *b;

	(void)state;
	assert_non_null(dir);
	load_range(dir);
	assert_int_equal(subids_count(), 1);
	b = budget__new(1000, 1000);
	assert_non_null(b);
	assert_true(budget__take(b, 100000, 1000, 0));
	/* Another of the range, and the user itself: the same bucket, spent. */
	assert_false(budget__take(b, 165535, 1, 0));
	assert_false(budget__take(b, 1000, 1, 0));
	/* A uid outside the range has its own. */
	assert_true(budget__take(b, 165536, 1000, 0));
	budget__free(b);
	subids_unload();
	assert_int_equal(subids_owner(100000), 100000);
	tu_rmdir(dir);
}

/* Maps retained per uid: a user's subordinate uids' count as the user's. */
static void test_subordinate_uids_share_their_users_retention(void **state)
{
	struct retention *r = retention__new();
	char *dir = tu_mkdtemp();
	struct retained e = { .kind = RETAIN_EXITED, .deadline_ns = 1 };
	pid_t pid;

	(void)state;
	assert_non_null(r);
	load_range(dir);
	for (pid = 10; pid < 20; pid++) {
		e.pid = pid;
		e.uid = 100000 + (uid_t)pid;  /* ten different uids of the range */
		assert_int_equal(retention__add(r, &e), 0);
	}
	assert_int_equal(retention__exited(r, 1000), 10);
	assert_int_equal(retention__exited(r, 165535), 10);
	assert_int_equal(retention__exited(r, 165536), 0);
	retention__free(r);
	subids_unload();
	tu_rmdir(dir);
}

/*
 * The archive's quota evicts the largest share first: 20 small maps of 20
 * subordinate uids are one user's share, larger than root's one map, so
 * theirs go first, not root's.
 */
static void test_subordinate_uids_are_one_share_of_the_quota(void **state)
{
	struct archive_quota *q = archive_quota__new();
	char *dir = tu_mkdtemp(), name[32];
	const struct archived_file *f;
	struct timespec at = { 0 };
	int i;

	(void)state;
	assert_non_null(q);
	load_range(dir);
	at.tv_sec = 100;
	assert_int_equal(archive_quota__add(q, "perf-1-1.map", 10000, at, 0), 0);
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "perf-%d-1.map", 100 + i);
		at.tv_sec = 200 + i;
		assert_int_equal(archive_quota__add(q, name, 1000, at, 100000 + (uid_t)i), 0);
	}
	f = archive_quota__victim(q, 20000, 0);
	assert_non_null(f);
	assert_true(f->uid >= 100000 && f->uid < 165536);
	archive_quota__free(q);
	subids_unload();
	tu_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges_belong_to_their_users),
		cmocka_unit_test(test_bad_lines_are_skipped),
		cmocka_unit_test(test_overlaps_keep_the_first),
		cmocka_unit_test(test_no_file_is_an_empty_table),
		cmocka_unit_test(test_subordinate_uids_share_their_users_budget),
		cmocka_unit_test(test_subordinate_uids_share_their_users_retention),
		cmocka_unit_test(test_subordinate_uids_are_one_share_of_the_quota),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

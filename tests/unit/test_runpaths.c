/* runpaths: the agent of each map directory has its own lock and socket, and perfmapctl finds them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "perfmap_tools.h"
#include "testutil.h"

/* mkdir -p */
static int mkdirs(const char *path)
{
	char buf[PATH_MAX], *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(buf, 0700);
		*p = '/';
	}
	return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

static void paths(const char *map_dir, char *lock, char *sock)
{
	assert_int_equal(perfmap__run_paths("/run/perfmapd", map_dir, lock, sock, PATH_MAX), 0);
}

static void test_tmp_is_tmp(void **state)
{
	char lock[PATH_MAX], sock[PATH_MAX];

	(void)state;
	paths("/tmp", lock, sock);
	assert_string_equal(lock, "/run/perfmapd/tmp.lock");
	assert_string_equal(sock, "/run/perfmapd/tmp.sock");
	paths("/", lock, sock);
	assert_string_equal(lock, "/run/perfmapd/root.lock");
	assert_int_equal(perfmap__hold_path("/run/perfmapd", "/tmp", sock, PATH_MAX), 0);
	assert_string_equal(sock, "/run/perfmapd/tmp.hold");
	/* Too long for a socket's name: refused, as the status socket's is. */
	assert_int_equal(perfmap__hold_path("/run/perfmapd/a-run-directory-whose-name-is-far-too-long-for-any-unix-socket-to-be-named-in-it-even-a-short-one",
					    "/tmp", sock, PATH_MAX), -ENAMETOOLONG);
}

/* Names that escape alike must still differ: "/x/a-b" against "/x/a/b", short and long. */
static void test_distinct_directories_distinct_names(void **state)
{
	static const char *const pairs[][2] = {
		{ "x/a-b", "x/a/b" },
		{ "x/a.b", "x/a/b" },
		{ "x/a b", "x/a-b" },
		{ "long-directory-name-to-pass-the-cut/a-b", "long-directory-name-to-pass-the-cut/a/b" },
		{ "long-directory-name-to-pass-the-cut-x/ab", "long-directory-name-to-pass-the-cut-x-ab" },
	};
	char *top = tu_mkdtemp(), a[PATH_MAX], b[PATH_MAX];
	char la[PATH_MAX], lb[PATH_MAX], sa[PATH_MAX], sb[PATH_MAX];
	size_t i;

	(void)state;
	assert_non_null(top);
	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		snprintf(a, sizeof(a), "%s/%s", top, pairs[i][0]);
		snprintf(b, sizeof(b), "%s/%s", top, pairs[i][1]);
		assert_int_equal(mkdirs(a), 0);
		assert_int_equal(mkdirs(b), 0);
		paths(a, la, sa);
		paths(b, lb, sb);
		if (!strcmp(la, lb) || !strcmp(sa, sb))
			fail_msg("%s and %s share %s", a, b, la);
	}
	tu_rmdir(top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tmp_is_tmp),
		cmocka_unit_test(test_distinct_directories_distinct_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

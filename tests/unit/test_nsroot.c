/*
 * nsroot and container: a process's map found inside its root without
 * following anything planted there, and its container named from its
 * cgroup. The root here is our own (/proc/self/root), the traps real files.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mirror/container.h"
#include "lib/mapname.h"
#include "lib/nsroot.h"
#include "perfmap_tools.h"
#include "testutil.h"

static char *dir;
static char paths[2][4096];
static int which;

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	return dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmdir(dir);
	return 0;
}

/* "<dir>/<name>"; two in use at a time (symlink(at(a), at(b))). */
static const char *at(const char *name)
{
	char *p = paths[which++ & 1];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

/* The map directory @name under the test's, as our own root resolves it. */
static int open_dir(const char *name, enum ns_refusal *why)
{
	struct stat st;

	return nsroot_open_dir(getpid(), at(name), &st, why);
}

static void test_a_plain_map_is_opened(void **state)
{
	enum ns_refusal why;
	struct stat st;
	char buf[32];
	int dfd, fd;

	(void)state;
	assert_int_equal(mkdir(at("tmp"), 0755), 0);
	tu_write(at("tmp/perf-7.map"), "1000 10 f\n", 10);
	dfd = open_dir("tmp", &why);
	assert_true(dfd >= 0);
	fd = nsroot_open_map(dfd, 7, 1 << 20, &st, &why);
	assert_true(fd >= 0);
	assert_int_equal(why, NSR_NONE);
	assert_int_equal(read(fd, buf, sizeof(buf)), 10);
	close(fd);
	assert_int_equal(nsroot_open_map(dfd, 8, 1 << 20, &st, &why), -ENOENT);
	assert_int_equal(why, NSR_NONE);
	close(dfd);
}

static void test_planted_files_are_refused(void **state)
{
	enum ns_refusal why;
	struct stat st;
	int dfd, fd;

	(void)state;
	assert_int_equal(mkdir(at("tmp"), 0755), 0);
	tu_write(at("canary"), "secret\n", 7);
	assert_int_equal(symlink(at("canary"), at("tmp/perf-1.map")), 0);
	assert_int_equal(mkfifo(at("tmp/perf-2.map"), 0644), 0);
	assert_int_equal(mkdir(at("tmp/perf-3.map"), 0755), 0);
	assert_int_equal(link(at("canary"), at("tmp/perf-4.map")), 0);
	/* 1 GiB of nothing but a hole and one line. */
	fd = open(at("tmp/perf-5.map"), O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "1 1 x\n", 6, 1 << 30), 6);
	close(fd);
	tu_write(at("tmp/perf-6.map"), "1000 10 a_rather_long_symbol_name\n", 34);
	dfd = open_dir("tmp", &why);
	assert_true(dfd >= 0);
	fd = nsroot_open_map(dfd, 1, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_SYMLINK);
	/* A FIFO: refused at once, never opened (which would hang). */
	fd = nsroot_open_map(dfd, 2, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_NOT_REGULAR);
	fd = nsroot_open_map(dfd, 3, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_NOT_REGULAR);
	fd = nsroot_open_map(dfd, 4, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_HARD_LINKED);
	fd = nsroot_open_map(dfd, 5, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_SPARSE);
	fd = nsroot_open_map(dfd, 6, 16, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, NSR_TOO_LARGE);
	close(dfd);
}

static void test_a_map_directory_behind_a_symlink_is_refused(void **state)
{
	enum ns_refusal why;
	int dfd;

	(void)state;
	assert_int_equal(mkdir(at("real"), 0755), 0);
	/* /tmp itself a symlink, and a symlink on the way to it. */
	assert_int_equal(symlink(at("real"), at("tmp")), 0);
	dfd = open_dir("tmp", &why);
	assert_true(dfd < 0);
	assert_int_equal(why, NSR_DIR);
	assert_int_equal(symlink(dir, at("up")), 0);
	dfd = open_dir("up/real", &why);
	assert_true(dfd < 0);
	assert_int_equal(why, NSR_DIR);
	/* A file where the directory should be. */
	tu_write(at("file"), "x", 1);
	dfd = open_dir("file", &why);
	assert_true(dfd < 0);
	assert_int_equal(why, NSR_DIR);
	/* Nothing there: not a refusal, only nothing to watch. */
	dfd = open_dir("none", &why);
	assert_int_equal(dfd, -ENOENT);
	assert_int_equal(why, NSR_NONE);
}

static void test_a_copy_is_made_only_where_nothing_is(void **state)
{
	enum ns_refusal why;
	struct stat st;
	int dfd, fd;

	(void)state;
	assert_int_equal(mkdir(at("tmp"), 01777), 0);
	dfd = open_dir("tmp", &why);
	assert_true(dfd >= 0);
	fd = nsroot_create_map(dfd, 9, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "1 1 a\n", 6), 6);
	close(fd);
	assert_int_equal(stat(at("tmp/perf-9.map"), &st), 0);
	assert_int_equal(st.st_size, 6);
	assert_int_equal(st.st_uid, getuid());
	/* The parent's permissions, not the agent's umask's. */
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(nsroot_create_map(dfd, 9, 0600), -EEXIST);
	/* Never through a planted symlink, even to a name that does not exist yet. */
	assert_int_equal(symlink(at("elsewhere"), at("tmp/perf-10.map")), 0);
	assert_true(nsroot_create_map(dfd, 10, 0600) < 0);
	assert_int_equal(access(at("elsewhere"), F_OK), -1);
	close(dfd);
}

static int fuse_in(const char *table, uint64_t id)
{
	FILE *f = fmemopen((void *)table, strlen(table), "r");
	int fuse;

	assert_non_null(f);
	fuse = nsroot_mountinfo_fuse(f, id);
	fclose(f);
	return fuse;
}

static void test_fuse_mounts_from_the_mount_table(void **state)
{
	char table[16384], opts[9000];

	(void)state;
	/* A long overlay line (lowerdirs), then the mounts asked about. */
	memset(opts, 'x', sizeof(opts) - 1);
	opts[sizeof(opts) - 1] = '\0';
	snprintf(table, sizeof(table),
		 "700 1 0:90 / / rw - overlay overlay rw,lowerdir=%s\n"
		 "701 700 0:91 / /tmp rw,nosuid - fuse.fuse-overlayfs fuse-overlayfs rw\n"
		 "702 700 0:92 / /proc rw - proc proc rw\n"
		 "703 700 0:93 / /data rw - fuseblk /dev/sdb1 rw\n", opts);
	assert_int_equal(fuse_in(table, 700), 0);
	assert_int_equal(fuse_in(table, 701), 1);
	assert_int_equal(fuse_in(table, 702), 0);
	assert_int_equal(fuse_in(table, 703), 1);
	/* Not in the table (the caller takes that as FUSE); a number inside a long line is no mount. */
	assert_int_equal(fuse_in(table, 704), -ENOENT);
	/* 36 bytes, then x's to fill fgets()'s 4095: the piece after starts "701 - fuse". */
	snprintf(table, sizeof(table), "1 0 0:1 / / rw - ext4 /dev/vda rw,x=%.4059s701 - fuse\n", opts);
	assert_int_equal(fuse_in(table, 701), -ENOENT);
}

static void test_container_ids_from_cgroup_paths(void **state)
{
	const char *id = "0edc69e0cbf2e00f21191fa7bf0d9e7d163a5552457ee15a0ff4ae0eed46737e";
	struct container_id c;
	char buf[1024];

	(void)state;
	/* podman with cgroupfs on a hybrid layout: only the v1 lines name it. */
	snprintf(buf, sizeof(buf), "9:name=systemd:/\n4:memory:/libpod_parent/libpod-%s\n0::/\n", id);
	assert_int_equal(container_parse_cgroup(buf, &c), 0);
	assert_string_equal(c.id, id);
	assert_non_null(strstr(c.cgroup, "libpod-"));
	/* docker and containerd under systemd, cgroup v2. */
	snprintf(buf, sizeof(buf), "0::/system.slice/docker-%s.scope\n", id);
	assert_int_equal(container_parse_cgroup(buf, &c), 0);
	assert_string_equal(c.id, id);
	snprintf(buf, sizeof(buf), "0::/kubepods/burstable/pod1/cri-containerd-%s.scope\n", id);
	assert_int_equal(container_parse_cgroup(buf, &c), 0);
	assert_string_equal(c.id, id);
	/* No container: the v2 path, no id; a 65-digit run is no id either. */
	assert_int_equal(container_parse_cgroup("1:cpu:/\n0::/user.slice/session-3.scope\n", &c), 0);
	assert_string_equal(c.id, "");
	assert_string_equal(c.cgroup, "/user.slice/session-3.scope");
	snprintf(buf, sizeof(buf), "0::/x-%sa\n", id);
	assert_int_equal(container_parse_cgroup(buf, &c), 0);
	assert_string_equal(c.id, "");
	assert_int_equal(container_parse_cgroup("garbage", &c), -EINVAL);
}

static pid_t jd_pid(const char *path)
{
	return perfmap__jitdump_name_pid(path, strlen(path));
}

/* A jitdump's marker by its name alone, as perf's inject finds it; a container's pid 1 too. */
static void test_jitdump_names(void **state)
{
	(void)state;
	assert_int_equal(jd_pid("/tmp/jit-1.dump"), 1);
	assert_int_equal(jd_pid("jit-1.dump"), 1);
	assert_int_equal(jd_pid("/home/u/app/jit-4194303.dump"), 4194303);
	assert_int_equal(jd_pid("/tmp/jit-2147483647.dump"), 2147483647);
	assert_int_equal(jd_pid("/tmp/jit-2147483648.dump"), 0);
	assert_int_equal(jd_pid("/tmp/jit-0.dump"), 0);
	assert_int_equal(jd_pid("/tmp/jit-01.dump"), 0);
	assert_int_equal(jd_pid("/tmp/jit-.dump"), 0);
	assert_int_equal(jd_pid("/tmp/jit-12a.dump"), 0);
	assert_int_equal(jd_pid("/tmp/xjit-12.dump"), 0);
	assert_int_equal(jd_pid("/tmp/jit-12.dump.x"), 0);
	assert_int_equal(jd_pid("/tmp/jit-12.dum"), 0);
	assert_int_equal(jd_pid("/tmp/perf-12.map"), 0);
	assert_int_equal(jd_pid(""), 0);
}

/* A dump opened as the mirrors open maps: a plain file only. */
static void test_a_dump_is_opened_as_a_map_is(void **state)
{
	enum ns_refusal why;
	struct stat st;
	const char *path;
	int dfd, fd;

	(void)state;
	assert_int_equal(mkdir(at("cwd"), 0755), 0);
	dfd = open_dir("cwd", &why);
	assert_true(dfd >= 0);
	path = at("cwd/jit-7.dump");
	tu_write(path, "JiTD", 4);
	fd = nsroot_open_file(dfd, "jit-7.dump", 0, &st, &why);
	assert_true(fd >= 0);
	assert_int_equal(why, NSR_NONE);
	close(fd);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(nsroot_open_file(dfd, "jit-7.dump", 0, &st, &why), -EPERM);
	assert_int_equal(why, NSR_NOT_REGULAR);
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(nsroot_open_file(dfd, "jit-7.dump", 0, &st, &why) < 0);
	assert_int_equal(why, NSR_SYMLINK);
	unlink(path);
	close(dfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_plain_map_is_opened, setup, teardown),
		cmocka_unit_test_setup_teardown(test_planted_files_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_map_directory_behind_a_symlink_is_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_copy_is_made_only_where_nothing_is, setup,
						teardown),
		cmocka_unit_test(test_fuse_mounts_from_the_mount_table),
		cmocka_unit_test(test_jitdump_names),
		cmocka_unit_test_setup_teardown(test_a_dump_is_opened_as_a_map_is, setup, teardown),
		cmocka_unit_test(test_container_ids_from_cgroup_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

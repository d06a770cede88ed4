/*
 * config: the config file's lines go through the options' own table and
 * checks; a bad line names its file and line and changes nothing; the
 * command line wins; only a file root alone can write is read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/options.h"
#include "testutil.h"

static char err[512];

/* @text parsed into @cfg; its return, and what went wrong in err. */
static int parse(struct daemon_config *cfg, const char *text)
{
	static char buf[4096];
	int ret;

	snprintf(buf, sizeof(buf), "%s", text);
	err[0] = '\0';
	ret = config__parse(cfg, "/etc/perfmapd.conf", buf, err, sizeof(err));
	if (ret)
		print_message("config__parse: %s\n", err);
	return ret;
}

static void test_keys_are_the_long_options(void **state)
{
	struct daemon_config cfg;

	(void)state;
	daemon_config__defaults(&cfg);
	assert_int_equal(parse(&cfg,
		"# a comment\n"
		"\n"
		"retention = 10m\n"
		"  archive-max-bytes=4K  \n"
		"\tmap-dir = /var/tmp/maps\n"
		"no-mirrors = yes\n"
		"dry-run = no\n"
		"log-level = debug\n"
		"copy-budget = 512M\n"
		"bpf-programs = raw_tp\n"
		"exec-maps = procfs\n"
		"ringbuf-size = 64K\n"
		"metrics-listen = 127.0.0.1:9848"), 0);
	assert_int_equal(cfg.retention_s, 600);
	assert_int_equal(cfg.archive_max_bytes, 4096);
	assert_string_equal(cfg.map_dir, "/var/tmp/maps");
	assert_true(cfg.no_mirrors);
	assert_false(cfg.dry_run);
	assert_int_equal(cfg.log_level, LOG_DEBUG);
	assert_int_equal(cfg.copy_budget, 512u << 20);
	assert_int_equal(cfg.events.programs, BPF_PROGS_RAW_TP);
	assert_int_equal(cfg.exec_maps, EXECMAP_SRC_PROCFS);
	assert_int_equal(cfg.events.ringbuf_bytes, 65536);
	assert_string_equal(cfg.metrics_listen, "127.0.0.1:9848");
	/* 0 is "no bound" for the copy budget, as documented. */
	assert_int_equal(apply_option(&cfg, OPT_COPY_BUDGET, "0"), 0);
	assert_int_equal(cfg.copy_budget, 0);
}

static void test_every_file_option_is_a_key(void **state)
{
	int id;

	(void)state;
	for (id = 0; id < OPT__COUNT; id++)
		assert_int_equal(opt_lookup(opt_defs[id].name), id);
	assert_int_equal(opt_lookup("retentoin"), -ENOENT);
	assert_false(opt_defs[OPT_CONFIG].in_file);
}

/* An error, its message, and @cfg as it was. */
static void assert_refused(const char *text, const char *msg)
{
	struct daemon_config cfg, before;

	daemon_config__defaults(&cfg);
	before = cfg;
	assert_int_equal(parse(&cfg, text), -EINVAL);
	assert_string_equal(err, msg);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void test_errors_name_file_and_line(void **state)
{
	(void)state;
	assert_refused("retention = 1h\n# x\nretentoin = 10m\n",
		       "/etc/perfmapd.conf:3: unknown key \"retentoin\"");
	assert_refused("retention = soon\n",
		       "/etc/perfmapd.conf:1: retention = \"soon\": not a valid value; see perfmapd --help");
	assert_refused("\n\nno-mirrors = maybe\n",
		       "/etc/perfmapd.conf:3: no-mirrors = \"maybe\": not a valid value (yes or no); see perfmapd --help");
	assert_refused("retention = 1h\nlog-level = info\nretention = 2h\n",
		       "/etc/perfmapd.conf:3: duplicate key \"retention\" (first on line 1)");
	assert_refused("retention 1h\n", "/etc/perfmapd.conf:1: not KEY = VALUE");
	assert_refused("map-dir =\n",
		       "/etc/perfmapd.conf:1: map-dir = \"\": not a valid value; see perfmapd --help");
	assert_refused("config = /etc/other.conf\n",
		       "/etc/perfmapd.conf:1: unknown key \"config\" (--config is for the command line)");
	assert_refused("help = yes\n", "/etc/perfmapd.conf:1: unknown key \"help\"");
	assert_refused("archive-dir = relative\n",
		       "/etc/perfmapd.conf:1: archive-dir = \"relative\": not a valid value; see perfmapd --help");
	assert_refused("ringbuf-size = 3000\n",
		       "/etc/perfmapd.conf:1: ringbuf-size = \"3000\": not a valid value; see perfmapd --help");
	/* A bad line after good ones: none of them applied. */
	assert_refused("retention = 1h\nlog-level = loud\n",
		       "/etc/perfmapd.conf:2: log-level = \"loud\": not a valid value; see perfmapd --help");
}

static void test_command_line_wins(void **state)
{
	char *argv[] = { "perfmapd", "--retention", "30s", "--no-mirrors", NULL };
	struct daemon_config cfg;

	(void)state;
	daemon_config__defaults(&cfg);
	assert_int_equal(daemon_config__parse_args(4, argv, &cfg), 0);
	assert_int_equal(parse(&cfg, "retention = 1h\nno-mirrors = no\nlog-level = warn\n"), 0);
	assert_int_equal(cfg.retention_s, 30);
	assert_true(cfg.no_mirrors);
	assert_int_equal(cfg.log_level, LOG_WARN);
	/* ...but a bad value is an error even where the command line wins. */
	assert_int_equal(parse(&cfg, "retention = never\n"), -EINVAL);
}

static void test_format_reads_back(void **state)
{
	struct daemon_config cfg, again;
	char buf[256], *vals[OPT__COUNT] = { 0 };
	int id;

	(void)state;
	daemon_config__defaults(&cfg);
	assert_int_equal(parse(&cfg, "retention = 1h\narchive-max-bytes = 3M\nlog-level = warn\n"), 0);
	option_format(&cfg, OPT_RETENTION, buf, sizeof(buf));
	assert_string_equal(buf, "3600s");
	option_format(&cfg, OPT_ARCHIVE_MAX, buf, sizeof(buf));
	assert_string_equal(buf, "3M");
	option_format(&cfg, OPT_COPY_BUDGET, buf, sizeof(buf));
	assert_string_equal(buf, "1G");
	/* What option_format() writes, apply_option() takes, to the same value. */
	daemon_config__defaults(&again);
	for (id = 0; id < OPT__COUNT; id++) {
		/* No group to name by default; no endpoint is no value. */
		if (!opt_defs[id].in_file || id == OPT_STATUS_GROUP || id == OPT_METRICS_LISTEN)
			continue;
		option_format(&cfg, (enum opt_id)id, buf, sizeof(buf));
		vals[id] = strdup(buf);  /* kept: @again points into it */
		assert_int_equal(apply_option(&again, (enum opt_id)id, vals[id]), 0);
	}
	assert_int_equal(again.retention_s, 3600);
	assert_int_equal(again.archive_max_bytes, 3u << 20);
	assert_int_equal(again.log_level, LOG_WARN);
	assert_int_equal(again.events.ringbuf_bytes, cfg.events.ringbuf_bytes);
	for (id = 0; id < OPT__COUNT; id++)
		free(vals[id]);
}

/* config__load: the file's owner and mode, and whether it must exist. */
static void test_load_checks_the_file(void **state)
{
	char *dir = tu_mkdtemp(), path[4096];
	struct daemon_config cfg;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/perfmapd.conf", dir);
	daemon_config__defaults(&cfg);
	cfg.config_path = path;
	assert_int_equal(config__load(&cfg, err, sizeof(err)), 0);  /* the default may be missing */
	cfg.config_explicit = true;
	assert_int_equal(config__load(&cfg, err, sizeof(err)), -ENOENT);
	tu_write(path, "retention = 2s\n", 15);
	if (geteuid() == 0) {
		assert_int_equal(chmod(path, 0644), 0);
		assert_int_equal(config__load(&cfg, err, sizeof(err)), 0);
		assert_int_equal(cfg.retention_s, 2);
		assert_int_equal(chmod(path, 0664), 0);
		assert_int_equal(config__load(&cfg, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "writable by its group (mode 0664); refused: the agent runs as root"));
		assert_int_equal(chmod(path, 0646), 0);
		assert_int_equal(config__load(&cfg, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "writable by others"));
		assert_int_equal(chmod(path, 0644), 0);
		assert_int_equal(chown(path, 65534, 0), 0);
		assert_int_equal(config__load(&cfg, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "owned by uid 65534, not root"));
	} else {
		/* Not root: the file is ours, not root's, and refused. */
		assert_int_equal(config__load(&cfg, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "not root"));
	}
	cfg.config_path = dir;
	assert_int_equal(config__load(&cfg, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "not a regular file"));
	config__free(&cfg);
	tu_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_are_the_long_options),
		cmocka_unit_test(test_every_file_option_is_a_key),
		cmocka_unit_test(test_errors_name_file_and_line),
		cmocka_unit_test(test_command_line_wins),
		cmocka_unit_test(test_format_reads_back),
		cmocka_unit_test(test_load_checks_the_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

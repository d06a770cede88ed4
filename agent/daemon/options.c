/* perfmapd's options: their table, their usage text, the command line, and each one checked and applied. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_config.h"
#include "lib/log.h"
#include "daemon/options.h"
#include "report/report.h"
#include "perfmap_tools.h"

static const char usage[] =
	"Usage: perfmapd [OPTIONS]\n"
	"\n"
	"Traces process fork, exec and exit with BPF and keeps perf maps\n"
	"(/tmp/perf-<pid>.map) right: forked children get their parent's\n"
	"entries, exec'd and reused pids lose stale ones, and exited processes'\n"
	"maps are archived after a retention period. Runs in the foreground.\n"
	"\n"
	"  --map-dir DIR            where runtimes write perf maps (/tmp)\n"
	"  --retention DURATION     keep an exited process's map in place this\n"
	"                           long: 90, 90s, 10m, 2h (10m)\n"
	"  --archive-dir DIR        compacted maps of exited processes\n"
	"                           (/var/lib/perfmapd/archive)\n"
	"  --archive-max-bytes N    archive quota; the oldest go first (256M)\n"
	"  --max-map-bytes N        maps larger than this are not copied or\n"
	"                           archived (256M); mirrors stop there\n"
	"  --ns-map-dir DIR         where runtimes in other mount or pid\n"
	"                           namespaces (containers) write their maps,\n"
	"                           as they see it (/tmp); mirrored to --map-dir\n"
	"  --no-mirrors             leave processes in other namespaces alone\n"
	"  --copy-budget N          bytes of data each uid may have copied to\n"
	"                           its children a second (1G; 0: no bound)\n"
	"  --copy-burst N           ...and saved up at most (2G)\n"
	"  --log-level LEVEL        error, warn, info or debug (info)\n"
	"  --dry-run                log what would be done; change no file\n"
	"  --run-dir DIR            lock and status socket (/run/perfmapd)\n"
	"  --status-group GROUP     this group may read the status too (root only)\n"
	"  --ringbuf-size N         BPF ring buffer bytes, a power of 2 (1M)\n"
	"  --bpf-programs KIND      auto, tp_btf or raw_tp: which tracepoint\n"
	"                           programs to load (auto: tp_btf, else raw_tp)\n"
	"  --exec-maps SOURCE       how executable mappings are learned: auto,\n"
	"                           perf (PERF_RECORD_MMAP2), procfs\n"
	"                           (/proc/<pid>/maps only) or off (auto: perf,\n"
	"                           else procfs); see docs/architecture.md\n"
	"  --host-namespaces PID    processes in PID's mount and pid namespaces are\n"
	"                           the host's, their maps in --map-dir (default:\n"
	"                           the agent's own; 1 in a container run with the\n"
	"                           host's pid namespace and /tmp)\n"
	"  --metrics-listen HOST:PORT  serve Prometheus metrics at\n"
	"                           http://HOST:PORT/metrics (off); bind to\n"
	"                           localhost, a port >= 1024: 127.0.0.1:9848\n"
	"  --config FILE            options from FILE, as KEY = VALUE lines with\n"
	"                           these names as keys; the command line wins;\n"
	"                           SIGHUP reads it again (/etc/perfmapd.conf)\n"
	"  -h, --help, --version\n"
	"\n"
	"N takes a K, M or G suffix. `perfmapctl status` shows what it tracks.\n";

#define PERFMAPD_CONFIG "/etc/perfmapd.conf"
#define ARRAY_SIZE(a) ((int)(sizeof(a) / sizeof((a)[0])))

const struct opt_def opt_defs[OPT__COUNT] = {
	[OPT_MAP_DIR] = { "map-dir", false, true, false },
	[OPT_RETENTION] = { "retention", false, true, true },
	[OPT_ARCHIVE_DIR] = { "archive-dir", false, true, false },
	[OPT_ARCHIVE_MAX] = { "archive-max-bytes", false, true, true },
	[OPT_MAX_MAP] = { "max-map-bytes", false, true, false },
	[OPT_NS_MAP_DIR] = { "ns-map-dir", false, true, false },
	[OPT_NO_MIRRORS] = { "no-mirrors", true, true, false },
	[OPT_COPY_BUDGET] = { "copy-budget", false, true, true },
	[OPT_COPY_BURST] = { "copy-burst", false, true, true },
	[OPT_LOG_LEVEL] = { "log-level", false, true, true },
	[OPT_DRY_RUN] = { "dry-run", true, true, false },
	[OPT_RUN_DIR] = { "run-dir", false, true, false },
	[OPT_STATUS_GROUP] = { "status-group", false, true, false },
	[OPT_RINGBUF] = { "ringbuf-size", false, true, false },
	[OPT_BPF_PROGRAMS] = { "bpf-programs", false, true, false },
	[OPT_EXEC_MAPS] = { "exec-maps", false, true, false },
	[OPT_HOST_NS] = { "host-namespaces", false, true, false },
	[OPT_METRICS_LISTEN] = { "metrics-listen", false, true, false },
	[OPT_CONFIG] = { "config", false, false, false },
	[OPT_HELP] = { "help", true, false, false },
	[OPT_VERSION] = { "version", true, false, false },
};

static const char *const bpf_program_names[] = {
	[BPF_PROGS_AUTO] = "auto", [BPF_PROGS_TP_BTF] = "tp_btf", [BPF_PROGS_RAW_TP] = "raw_tp",
};
static const char *const exec_map_names[] = {
	[EXECMAP_SRC_AUTO] = "auto", [EXECMAP_SRC_PERF] = "perf",
	[EXECMAP_SRC_PROCFS] = "procfs", [EXECMAP_SRC_OFF] = "off",
};
static const char *const level_names[] = {
	[LOG_ERROR] = "error", [LOG_WARN] = "warn", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* @s among @names (@n of them): its index, or -1. */
static int name_index(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (names[i] && !strcmp(s, names[i]))
			return i;
	return -1;
}

/* A flag: on from the command line (NULL); yes or no, true or false, 1 or 0 in the file. */
static int parse_flag(const char *value, bool *out)
{
	if (!value || !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1"))
		*out = true;
	else if (!strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "0"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

int opt_lookup(const char *name)
{
	int i;

	for (i = 0; i < OPT__COUNT; i++)
		if (!strcmp(name, opt_defs[i].name))
			return i;
	return -ENOENT;
}

void daemon_config__defaults(struct daemon_config *cfg)
{
	*cfg = (struct daemon_config){
		.map_dir = "/tmp",
		.archive_dir = "/var/lib/perfmapd/archive",
		.run_dir = PERFMAPD_RUN_DIR,
		.ns_map_dir = "/tmp",
		.status_gid = STATUS_NO_GROUP,
		.retention_s = 600,
		.archive_max_bytes = 256ull << 20,
		.max_map_bytes = 256ull << 20,
		/* A 10 MB map forked 100 times a second is 1000 MB/s: within both. */
		.copy_budget = 1ull << 30,
		.copy_burst = 2ull << 30,
		.events = { .ringbuf_bytes = 1u << 20, .programs = BPF_PROGS_AUTO },
		.log_level = LOG_INFO,
		.config_path = PERFMAPD_CONFIG,
	};
}

int apply_option(struct daemon_config *cfg, enum opt_id id, const char *value)
{
	struct sockaddr_storage addr;
	struct group *gr;
	uint64_t v;
	char *end;
	int i;

	if (!opt_defs[id].flag && (!value || !*value))
		return -EINVAL;
	switch (id) {
	case OPT_MAP_DIR:
		cfg->map_dir = value;
		return 0;
	case OPT_RETENTION:
		/* Ten years at most: in nanoseconds it must fit 64 bits. */
		if (perfmap__parse_duration(value, &v) || v > 10ull * 366 * 86400)
			return -EINVAL;
		cfg->retention_s = v;
		return 0;
	case OPT_ARCHIVE_DIR:
		if (value[0] != '/')
			return -EINVAL;
		cfg->archive_dir = value;
		return 0;
	case OPT_ARCHIVE_MAX:
		return perfmap__parse_bytes(value, &cfg->archive_max_bytes) ? -EINVAL : 0;
	case OPT_MAX_MAP:
		return perfmap__parse_bytes(value, &cfg->max_map_bytes) ? -EINVAL : 0;
	case OPT_COPY_BUDGET:
		/* 0: no bound, as documented; a size is never 0 elsewhere. */
		if (!strcmp(value, "0")) {
			cfg->copy_budget = 0;
			return 0;
		}
		return perfmap__parse_bytes(value, &cfg->copy_budget) ? -EINVAL : 0;
	case OPT_COPY_BURST:
		return perfmap__parse_bytes(value, &cfg->copy_burst) ? -EINVAL : 0;
	case OPT_LOG_LEVEL:
		return log_parse_level(value, &cfg->log_level) ? -EINVAL : 0;
	case OPT_DRY_RUN:
		return parse_flag(value, &cfg->dry_run);
	case OPT_RUN_DIR:
		cfg->run_dir = value;
		return 0;
	case OPT_RINGBUF:
		if (perfmap__parse_bytes(value, &v) || !is_pow2(v) || v < 4096 || v > (1u << 30))
			return -EINVAL;
		cfg->events.ringbuf_bytes = (unsigned int)v;
		return 0;
	case OPT_BPF_PROGRAMS:
		i = name_index(value, bpf_program_names, ARRAY_SIZE(bpf_program_names));
		if (i < 0)
			return -EINVAL;
		cfg->events.programs = (enum bpf_programs)i;
		return 0;
	case OPT_STATUS_GROUP:
		gr = getgrnam(value);
		if (!gr)
			return -EINVAL;
		cfg->status_gid = gr->gr_gid;
		return 0;
	case OPT_NS_MAP_DIR:
		/* As the processes see it, resolved inside each one's root. */
		if (value[0] != '/')
			return -EINVAL;
		cfg->ns_map_dir = value;
		return 0;
	case OPT_NO_MIRRORS:
		return parse_flag(value, &cfg->no_mirrors);
	case OPT_EXEC_MAPS:
		i = name_index(value, exec_map_names, ARRAY_SIZE(exec_map_names));
		if (i < 0)
			return -EINVAL;
		cfg->exec_maps = (enum execmap_source)i;
		return 0;
	case OPT_HOST_NS:
		/* 0: the agent's own (the default). */
		v = strtoull(value, &end, 10);
		if (!*value || *end || v > (1u << 22))
			return -EINVAL;
		cfg->events.host_ns_pid = (pid_t)v;
		return 0;
	case OPT_METRICS_LISTEN:
		/* Checked now: a typo fails at the command line, not after BPF loads. */
		if (metrics_parse_listen(value, &addr))
			return -EINVAL;
		cfg->metrics_listen = value;
		return 0;
	case OPT_CONFIG:
		cfg->config_path = value;
		cfg->config_explicit = true;
		return 0;
	case OPT_HELP:
	case OPT_VERSION:
	case OPT__COUNT:
		break;
	}
	return -EINVAL;
}

/* @v bytes with the largest suffix that divides it, as --help writes them. */
static void format_bytes(uint64_t v, char *buf, size_t len)
{
	static const char suffix[] = "KMG";
	int i = -1;

	while (i < 2 && v && !(v & 1023)) {
		v >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, suffix[i]);
}

void option_format(const struct daemon_config *cfg, enum opt_id id, char *buf, size_t len)
{
	const struct group *gr;

	switch (id) {
	case OPT_MAP_DIR: snprintf(buf, len, "%s", cfg->map_dir); return;
	case OPT_RETENTION: snprintf(buf, len, "%llus", (unsigned long long)cfg->retention_s); return;
	case OPT_ARCHIVE_DIR: snprintf(buf, len, "%s", cfg->archive_dir); return;
	case OPT_ARCHIVE_MAX: format_bytes(cfg->archive_max_bytes, buf, len); return;
	case OPT_MAX_MAP: format_bytes(cfg->max_map_bytes, buf, len); return;
	case OPT_NS_MAP_DIR: snprintf(buf, len, "%s", cfg->ns_map_dir); return;
	case OPT_NO_MIRRORS: snprintf(buf, len, "%s", cfg->no_mirrors ? "yes" : "no"); return;
	case OPT_COPY_BUDGET: format_bytes(cfg->copy_budget, buf, len); return;
	case OPT_COPY_BURST: format_bytes(cfg->copy_burst, buf, len); return;
	case OPT_LOG_LEVEL: snprintf(buf, len, "%s", level_names[cfg->log_level]); return;
	case OPT_DRY_RUN: snprintf(buf, len, "%s", cfg->dry_run ? "yes" : "no"); return;
	case OPT_RUN_DIR: snprintf(buf, len, "%s", cfg->run_dir); return;
	case OPT_STATUS_GROUP:
		if (cfg->status_gid == STATUS_NO_GROUP) {
			snprintf(buf, len, "none");
			return;
		}
		gr = getgrgid(cfg->status_gid);
		if (gr)
			snprintf(buf, len, "%s", gr->gr_name);
		else
			snprintf(buf, len, "%u", (unsigned int)cfg->status_gid);
		return;
	case OPT_RINGBUF: format_bytes(cfg->events.ringbuf_bytes, buf, len); return;
	case OPT_BPF_PROGRAMS: snprintf(buf, len, "%s", bpf_program_names[cfg->events.programs]); return;
	case OPT_EXEC_MAPS: snprintf(buf, len, "%s", exec_map_names[cfg->exec_maps]); return;
	case OPT_HOST_NS: snprintf(buf, len, "%d", (int)cfg->events.host_ns_pid); return;
	case OPT_METRICS_LISTEN: snprintf(buf, len, "%s", cfg->metrics_listen ?: "off"); return;
	case OPT_CONFIG: snprintf(buf, len, "%s", cfg->config_path); return;
	case OPT_HELP:
	case OPT_VERSION:
	case OPT__COUNT:
		break;
	}
	snprintf(buf, len, "-");
}

int daemon_config__parse_args(int argc, char **argv, struct daemon_config *cfg)
{
	struct option longopts[OPT__COUNT + 1] = { { 0 } };
	int i, opt;

	for (i = 0; i < OPT__COUNT; i++)
		longopts[i] = (struct option){ opt_defs[i].name,
			opt_defs[i].flag ? no_argument : required_argument, NULL, 256 + i };
	/* 0: a fresh scan, for a SIGHUP's second reading of the same command line. */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h' || opt == 256 + OPT_HELP) {
			fputs(usage, stdout);
			exit(0);
		}
		if (opt == 256 + OPT_VERSION) {
			printf("perfmapd %d.%d\n", PERFMAP_VERSION_MAJOR, PERFMAP_VERSION_MINOR);
			exit(0);
		}
		if (opt < 256 || opt >= 256 + OPT__COUNT) {
			fputs(usage, stderr);
			return -EINVAL;
		}
		if (apply_option(cfg, (enum opt_id)(opt - 256), optarg)) {
			fprintf(stderr, "perfmapd: --%s %s: not a valid value; see perfmapd --help\n",
				opt_defs[opt - 256].name, optarg);
			return -EINVAL;
		}
		cfg->cmdline_set |= 1ull << (opt - 256);
	}
	if (optind != argc) {
		fprintf(stderr, "perfmapd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

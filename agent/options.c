/* perfmapd's command line: its usage text and its options, checked. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
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
	"  --host-namespaces PID    processes in PID's mount and pid namespaces are\n"
	"                           the host's, their maps in --map-dir (default:\n"
	"                           the agent's own; 1 in a container run with the\n"
	"                           host's pid namespace and /tmp)\n"
	"  --exec-maps SOURCE       how executable mappings are learned: auto,\n"
	"                           perf (PERF_RECORD_MMAP2), procfs\n"
	"                           (/proc/<pid>/maps only) or off (auto: perf,\n"
	"                           else procfs); see docs/architecture.md\n"
	"  --metrics-listen HOST:PORT  serve Prometheus metrics at\n"
	"                           http://HOST:PORT/metrics (off); bind to\n"
	"                           localhost, a port >= 1024: 127.0.0.1:9848\n"
	"  -h, --help, --version\n"
	"\n"
	"N takes a K, M or G suffix. `perfmapctl status` shows what it tracks.\n";

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int daemon__parse_args(int argc, char **argv, struct daemon_config *cfg)
{
	enum { OPT_MAP_DIR = 256, OPT_RETENTION, OPT_ARCHIVE_DIR, OPT_ARCHIVE_MAX,
	       OPT_MAX_MAP, OPT_LOG_LEVEL, OPT_DRY_RUN, OPT_RUN_DIR, OPT_RINGBUF,
	       OPT_BPF_PROGRAMS, OPT_COPY_BUDGET, OPT_COPY_BURST, OPT_STATUS_GROUP, OPT_VERSION,
	       OPT_NS_MAP_DIR, OPT_NO_MIRRORS, OPT_EXEC_MAPS, OPT_METRICS_LISTEN, OPT_HOST_NS };
	static const struct option longopts[] = {
		{ "map-dir", required_argument, NULL, OPT_MAP_DIR },
		{ "retention", required_argument, NULL, OPT_RETENTION },
		{ "archive-dir", required_argument, NULL, OPT_ARCHIVE_DIR },
		{ "archive-max-bytes", required_argument, NULL, OPT_ARCHIVE_MAX },
		{ "max-map-bytes", required_argument, NULL, OPT_MAX_MAP },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "run-dir", required_argument, NULL, OPT_RUN_DIR },
		{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },
		{ "bpf-programs", required_argument, NULL, OPT_BPF_PROGRAMS },
		{ "copy-budget", required_argument, NULL, OPT_COPY_BUDGET },
		{ "copy-burst", required_argument, NULL, OPT_COPY_BURST },
		{ "status-group", required_argument, NULL, OPT_STATUS_GROUP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "ns-map-dir", required_argument, NULL, OPT_NS_MAP_DIR },
		{ "no-mirrors", no_argument, NULL, OPT_NO_MIRRORS },
		{ "exec-maps", required_argument, NULL, OPT_EXEC_MAPS },
		{ "host-namespaces", required_argument, NULL, OPT_HOST_NS },
		{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sockaddr_storage addr;
	struct group *gr;
	uint64_t v;
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_MAP_DIR:
			cfg->map_dir = optarg;
			break;
		case OPT_RETENTION:
			/* Ten years at most: in nanoseconds it must fit 64 bits. */
			if (perfmap__parse_duration(optarg, &cfg->retention_s) ||
			    cfg->retention_s > 10ull * 366 * 86400)
				goto bad_value;
			break;
		case OPT_ARCHIVE_DIR:
			if (optarg[0] != '/')
				goto bad_value;
			cfg->archive_dir = optarg;
			break;
		case OPT_ARCHIVE_MAX:
			if (perfmap__parse_bytes(optarg, &cfg->archive_max_bytes))
				goto bad_value;
			break;
		case OPT_MAX_MAP:
			if (perfmap__parse_bytes(optarg, &cfg->max_map_bytes))
				goto bad_value;
			break;
		case OPT_COPY_BUDGET:
			if (perfmap__parse_bytes(optarg, &cfg->copy_budget))
				goto bad_value;
			break;
		case OPT_COPY_BURST:
			if (perfmap__parse_bytes(optarg, &cfg->copy_burst))
				goto bad_value;
			break;
		case OPT_LOG_LEVEL:
			if (log_parse_level(optarg, &log_max_level))
				goto bad_value;
			break;
		case OPT_DRY_RUN:
			cfg->dry_run = true;
			break;
		case OPT_RUN_DIR:
			cfg->run_dir = optarg;
			break;
		case OPT_RINGBUF:
			if (perfmap__parse_bytes(optarg, &v) || !is_pow2(v) || v < 4096 || v > (1u << 30))
				goto bad_value;
			cfg->events.ringbuf_bytes = (unsigned int)v;
			break;
		case OPT_BPF_PROGRAMS:
			if (!strcmp(optarg, "auto"))
				cfg->events.programs = BPF_PROGS_AUTO;
			else if (!strcmp(optarg, "tp_btf"))
				cfg->events.programs = BPF_PROGS_TP_BTF;
			else if (!strcmp(optarg, "raw_tp"))
				cfg->events.programs = BPF_PROGS_RAW_TP;
			else
				goto bad_value;
			break;
		case OPT_STATUS_GROUP:
			gr = getgrnam(optarg);
			if (!gr)
				goto bad_value;
			cfg->status_gid = gr->gr_gid;
			break;
		case OPT_NS_MAP_DIR:
			/* As the processes see it, resolved inside each one's root. */
			if (optarg[0] != '/')
				goto bad_value;
			cfg->ns_map_dir = optarg;
			break;
		case OPT_NO_MIRRORS:
			cfg->no_mirrors = true;
			break;
		case OPT_HOST_NS:
			v = strtoull(optarg, &end, 10);
			if (!*optarg || *end || !v || v > (1u << 22))
				goto bad_value;
			cfg->events.host_ns_pid = (pid_t)v;
			break;
		case OPT_EXEC_MAPS:
			if (!strcmp(optarg, "auto"))
				cfg->exec_maps = EXECMAP_SRC_AUTO;
			else if (!strcmp(optarg, "perf"))
				cfg->exec_maps = EXECMAP_SRC_PERF;
			else if (!strcmp(optarg, "procfs"))
				cfg->exec_maps = EXECMAP_SRC_PROCFS;
			else if (!strcmp(optarg, "off"))
				cfg->exec_maps = EXECMAP_SRC_OFF;
			else
				goto bad_value;
			break;
		case OPT_METRICS_LISTEN:
			/* Checked now: a typo fails at the command line, not after BPF loads. */
			if (metrics_parse_listen(optarg, &addr))
				goto bad_value;
			cfg->metrics_listen = optarg;
			break;
		case OPT_VERSION:
			printf("perfmapd %d.%d\n", PERFMAP_VERSION_MAJOR, PERFMAP_VERSION_MINOR);
			exit(0);
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			fputs(usage, stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "perfmapd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;

bad_value:
	fprintf(stderr, "perfmapd: %s %s: not a valid value; see perfmapd --help\n",
		argv[optind - 1], optarg);
	return -EINVAL;
}

/*
 * The agent's state, shared by perfmapd.c (its pieces wired together),
 * options.c (the command line), config.c (the config file), reload.c
 * (SIGHUP) and loop.c (the event loop).
 */
#ifndef PERFMAPD_DAEMON_H
#define PERFMAPD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "archive/archive.h"
#include "in/events.h"
#include "in/execmap.h"
#include "in/holds.h"
#include "report/instance.h"
#include "in/jitscan.h"
#include "lib/log.h"
#include "in/mapwatch.h"
#include "report/metrics.h"
#include "mirror/mirror.h"
#include "policy/policy.h"
#include "in/scan.h"
#include "store/store.h"

/* Pages of each CPU's mmap-report ring: 1 MiB, some 8,000 records (a few hundred execs). */
#define EXECMAP_RING_PAGES 256

struct daemon_config {
	const char *map_dir;          /* where runtimes write perf-<pid>.map */
	const char *archive_dir;      /* compacted maps of exited processes */
	const char *run_dir;          /* lock and status socket */
	const char *ns_map_dir;       /* where processes in other namespaces write, as they see it */
	bool no_mirrors;              /* leave those alone */
	enum execmap_source exec_maps; /* how executable mappings are learned */
	gid_t status_gid;             /* may read the status besides root; STATUS_NO_GROUP */
	uint64_t retention_s;         /* how long an exited process's map stays */
	uint64_t archive_max_bytes;   /* archive quota; the oldest go first */
	uint64_t max_map_bytes;       /* larger maps are not copied or archived */
	uint64_t copy_budget;         /* bytes of copies per uid a second */
	uint64_t copy_burst;          /* ...saved up at most */
	const char *metrics_listen;   /* HOST:PORT of the metrics endpoint; NULL: none */
	struct events_config events;
	bool dry_run;
	enum log_level log_level;
	const char *config_path;      /* --config, or /etc/perfmapd.conf */
	bool config_explicit;         /* --config given: a missing file is an error */
	uint64_t cmdline_set;         /* 1 << enum opt_id (options.h) of each option given: they win */
	char *config_text;            /* the file's text, which its values point into; config__free() */
};

/* The agent: its pieces, wired together here and nowhere else. */
struct daemon {
	struct daemon_config cfg;
	int map_dir_fd;
	struct instance *inst;
	struct holds *holds;          /* profilers' holds on maps (hold.c) */
	struct archive *ar;
	struct mapwatch *mw;
	struct events *events;
	struct mirrors *mirrors;      /* NULL: --no-mirrors or --dry-run */
	struct execmap *execmap;      /* NULL: executable mappings from /proc only, or not at all */
	enum execmap_source exec_src; /* what was chosen */
	char exec_probe[96];          /* what else this kernel would load (execprobe.c) */
	uint64_t exec_lost_seen;      /* execmap__lost() when last read: a gap since, /proc fills it */
	struct jitscan *jitscan;      /* reads /proc/<pid>/maps for the gaps */
	struct metrics *metrics;      /* NULL: no --metrics-listen */
	struct store *store;
	struct policy *policy;
	uint64_t self_mnt_ns, self_pid_ns;
	uint64_t started_ns;          /* CLOCK_MONOTONIC */
	uint64_t dropped_seen, resyncs;
	bool relist_wanted;           /* the index lost changes: a listing is due */
	uint64_t relisted_ns;         /* CLOCK_BOOTTIME of the last listing after start */
	uint64_t rescans, rescans_deferred;
	bool stop;
	int argc;                     /* the command line, read again on SIGHUP */
	char **argv;
};

/*
 * options.c: the command line into @cfg, each option given marked in
 * cfg->cmdline_set; 0 or -EINVAL (said); --help and --version exit.
 */
int daemon__parse_args(int argc, char **argv, struct daemon_config *cfg);

/* reload.c: SIGHUP: the config file and the command line read again, what may change applied. */
void daemon__reload(struct daemon *d);

/* loop.c: the signals the loop reads, blocked before any thread starts. */
void daemon__block_signals(void);
/* loop.c: the event loop, until SIGTERM or SIGINT; 0 or a negative errno. */
int daemon__run(struct daemon *d);

/* perfmapd.c: what the scans need of the agent. */
struct scan_env daemon__scan_env(struct daemon *d);
/* perfmapd.c: a change the inotify index read. */
void daemon__on_map_change(void *ctx, pid_t pid, bool exists);
/* perfmapd.c: a copy made off the loop is done: to the policy, in the loop's thread. */
void daemon__on_copy_done(void *ctx, pid_t child, uint64_t ticket, int err,
			  const struct copy_result *res);

#endif /* PERFMAPD_DAEMON_H */

/* The agent's configuration: what options.c, config.c and daemon_config.c read and write; the rest of the daemon reads it. */
#ifndef PERFMAPD_DAEMON_CONFIG_H
#define PERFMAPD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "in/in_config.h"
#include "lib/log.h"

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
	int argc;                     /* the command line, read again on SIGHUP */
	char **argv;
};

/*
 * options.c: the command line into @cfg, each option given marked in
 * cfg->cmdline_set; 0 or -EINVAL (said); --help and --version exit.
 */
int daemon_config__parse_args(int argc, char **argv, struct daemon_config *cfg);

/*
 * daemon_config.c: the defaults, the command line, then the config file
 * where the command line is silent, into @cfg; 0, or -EINVAL with the
 * reason said on stderr. daemon_config__fini() frees what it kept.
 */
int daemon_config__init(struct daemon_config *cfg, int argc, char **argv);
void daemon_config__fini(struct daemon_config *cfg);

/*
 * daemon_config.c: SIGHUP: the defaults, @cur's command line, then the config file, into
 * @next, as at start; 0, or a negative errno with the reason logged. The
 * caller applies what may change and frees @next with daemon_config__fini().
 */
int daemon_config__reload(const struct daemon_config *cur, struct daemon_config *next);

#endif /* PERFMAPD_DAEMON_CONFIG_H */

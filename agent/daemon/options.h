/* perfmapd's options: one table for the command line and the config file, applied by one function. */
#ifndef PERFMAPD_OPTIONS_H
#define PERFMAPD_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/daemon_config.h"

/* Every option, in the order --help lists them; a new one is a row here and a case in options.c. */
enum opt_id {
	OPT_MAP_DIR, OPT_RETENTION, OPT_ARCHIVE_DIR, OPT_ARCHIVE_MAX, OPT_MAX_MAP,
	OPT_NS_MAP_DIR, OPT_NO_MIRRORS, OPT_COPY_BUDGET, OPT_COPY_BURST, OPT_LOG_LEVEL,
	OPT_DRY_RUN, OPT_RUN_DIR, OPT_STATUS_GROUP, OPT_RINGBUF, OPT_BPF_PROGRAMS,
	OPT_EXEC_MAPS, OPT_HOST_NS, OPT_METRICS_LISTEN,
	/* Command line only: */
	OPT_CONFIG, OPT_HELP, OPT_VERSION,
	OPT__COUNT
};

struct opt_def {
	const char *name;             /* the long option, and the config file's key */
	bool flag;                    /* takes no value on the command line; yes or no in the file */
	bool in_file;                 /* may be set in the config file */
	bool at_runtime;              /* a SIGHUP changes it in the running agent */
};

extern const struct opt_def opt_defs[OPT__COUNT];

/* The option named @name, or -ENOENT. */
int opt_lookup(const char *name);
/*
 * Set option @id of @cfg from @value (NULL: a flag on the command line);
 * 0 or -EINVAL. @value must outlive @cfg: paths are kept, not copied.
 */
int apply_option(struct daemon_config *cfg, enum opt_id id, const char *value);
/* Option @id of @cfg as a value apply_option() takes, for messages and comparisons. */
void option_format(const struct daemon_config *cfg, enum opt_id id, char *buf, size_t len);
/* The defaults, before the config file and the command line. */
void daemon_config__defaults(struct daemon_config *cfg);

#endif /* PERFMAPD_OPTIONS_H */

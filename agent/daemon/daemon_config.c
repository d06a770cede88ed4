/* The agent's config read: at start, and again at SIGHUP, when what may change without a restart is said. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/daemon_config.h"
#include "daemon/options.h"
#include "lib/log.h"

/* "@name @was -> @now", or that it needs a restart, after a ", " at the end of @buf; cut when full. */
static void append(char *buf, size_t len, const char *name, const char *was, const char *now,
		   bool restart)
{
	size_t n = strlen(buf);

	if (n + 1 >= len)
		return;
	if (restart)
		snprintf(buf + n, len - n, "%s%s needs a restart (kept %s, not %s)",
			 n ? ", " : "", name, was, now);
	else
		snprintf(buf + n, len - n, "%s%s %s -> %s", n ? ", " : "", name, was, now);
}

int daemon_config__init(struct daemon_config *cfg, int argc, char **argv)
{
	char err[512];

	/* The defaults, the command line, then the config file where the command line is silent. */
	daemon_config__defaults(cfg);
	cfg->argc = argc;
	cfg->argv = argv;
	if (daemon_config__parse_args(argc, argv, cfg))
		return -EINVAL;
	if (config__load(cfg, err, sizeof(err))) {
		fprintf(stderr, "perfmapd: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

void daemon_config__fini(struct daemon_config *cfg)
{
	config__free(cfg);
}

int daemon_config__reload(const struct daemon_config *cur, struct daemon_config *next)
{
	char err[512], changed[1024] = "", kept[1024] = "", was[256], now[256];
	int id;

	/* As at start: the defaults, the command line, then the file where the line is silent. */
	daemon_config__defaults(next);
	next->argc = cur->argc;
	next->argv = cur->argv;
	if (daemon_config__parse_args(cur->argc, cur->argv, next)) {
		pr_warn("SIGHUP: the command line no longer reads (said above); nothing changed");
		return -EINVAL;
	}
	if (config__load(next, err, sizeof(err))) {
		pr_warn("SIGHUP: %s; nothing changed", err);
		config__free(next);
		return -EINVAL;
	}
	for (id = 0; id < OPT__COUNT; id++) {
		if (!opt_defs[id].in_file)
			continue;
		option_format(cur, (enum opt_id)id, was, sizeof(was));
		option_format(next, (enum opt_id)id, now, sizeof(now));
		if (!strcmp(was, now))
			continue;
		if (opt_defs[id].at_runtime)
			append(changed, sizeof(changed), opt_defs[id].name, was, now, false);
		else
			append(kept, sizeof(kept), opt_defs[id].name, was, now, true);
	}
	pr_info("SIGHUP: %s: %s", next->config_path, *changed ? changed : "nothing changed");
	if (*kept)
		pr_warn("SIGHUP: %s: %s", next->config_path, kept);
	return 0;
}

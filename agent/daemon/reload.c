/* SIGHUP: the config file and the command line read again; what may change without a restart, changed. */
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "lib/log.h"
#include "daemon/options.h"

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

void daemon__reload(struct daemon *d)
{
	struct daemon_config next;
	char err[512], changed[1024] = "", kept[1024] = "", was[256], now[256];
	int id;

	/* As at start: the defaults, the command line, then the file where the line is silent. */
	daemon__config_defaults(&next);
	if (daemon__parse_args(d->argc, d->argv, &next)) {
		pr_warn("SIGHUP: the command line no longer reads (said above); nothing changed");
		return;
	}
	if (config__load(&next, err, sizeof(err))) {
		pr_warn("SIGHUP: %s; nothing changed", err);
		goto free_next;
	}
	for (id = 0; id < OPT__COUNT; id++) {
		if (!opt_defs[id].in_file)
			continue;
		option_format(&d->cfg, (enum opt_id)id, was, sizeof(was));
		option_format(&next, (enum opt_id)id, now, sizeof(now));
		if (!strcmp(was, now))
			continue;
		if (opt_defs[id].at_runtime)
			append(changed, sizeof(changed), opt_defs[id].name, was, now, false);
		else
			append(kept, sizeof(kept), opt_defs[id].name, was, now, true);
	}
	/* Numbers only: the running config's strings point into the text read at start. */
	d->cfg.retention_s = next.retention_s;
	d->cfg.archive_max_bytes = next.archive_max_bytes;
	d->cfg.copy_budget = next.copy_budget;
	d->cfg.copy_burst = next.copy_burst;
	d->cfg.log_level = next.log_level;
	policy__set_limits(d->policy, d->cfg.retention_s * 1000000000ull, d->cfg.copy_budget,
			   d->cfg.copy_burst);
	if (d->mirrors)
		mirrors__set_budget(d->mirrors, d->cfg.copy_budget, d->cfg.copy_burst);
	archive__set_max_bytes(d->ar, d->cfg.archive_max_bytes);
	log_set_level(d->cfg.log_level);
	pr_info("SIGHUP: %s: %s", next.config_path, *changed ? changed : "nothing changed");
	if (*kept)
		pr_warn("SIGHUP: %s: %s", next.config_path, kept);
free_next:
	config__free(&next);
}

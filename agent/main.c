/* perfmapd: the agent's entry point: its config parsed, its pieces opened, run and closed. */
#include <string.h>

#include "daemon/daemon.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/subids.h"

int main(int argc, char **argv)
{
	struct daemon_config cfg;
	struct daemon d;
	uint64_t started_ns;
	int err;

	if (daemon_config__init(&cfg, argc, argv))
		return 2;
	log_set_level(cfg.log_level);
	/* Before any thread: read-only afterwards. Without it, bounds are per uid as before. */
	err = subids_load(SUBIDS_PATH);
	if (err)
		pr_warn("subids: cannot read %s: %s; a user's subordinate uids are bounded each as a user",
			SUBIDS_PATH, strerror(-err));
	daemon__block_signals();
	/* The agent's uptime counts from here, before the BPF programs load, not from the loop. */
	started_ns = clock_mono_ns();

	err = daemon__open(&d, &cfg);
	if (err)
		goto close_daemon;
	pr_info("managing %s%s: retention %llus, archive %s (max %llu bytes)",
		cfg.map_dir, cfg.dry_run ? " (dry run: no file is changed)" : "",
		(unsigned long long)cfg.retention_s, cfg.archive_dir,
		(unsigned long long)cfg.archive_max_bytes);
	err = daemon__run(&d, started_ns);
close_daemon:
	daemon__close(&d);
	log_flush(true);
	daemon_config__fini(&cfg);
	subids_unload();
	return err ? 1 : 0;
}

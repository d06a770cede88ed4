/* The agent's pieces opened, wired together and closed: the one place that knows them all. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "daemon/daemon.h"
#include "daemon/daemon_internal.h"
#include "in/in.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/privs.h"
#include "lib/procfs.h"
#include "mirror/mirror.h"
#include "perfmap_tools.h"
#include "policy/policy.h"
#include "report/report.h"
#include "store/store.h"

/*
 * Copies of more data than this go to the workers: one takes well under a
 * millisecond in the loop (page cache to page cache). A uid's copies past
 * LOOP_COPY_RATE bytes a second go there too: no uid has more than a few
 * percent of the loop's time for its copies.
 */
#define DEFER_COPY_BYTES (1ull << 20)
#define LOOP_COPY_RATE (32ull << 20)
#define COPY_THREADS 2
#define COPY_QUEUE_MAX 256     /* each holds its parent's map open */
#define COPY_QUEUE_PER_UID 32

static int open_map_dir(struct daemon *d)
{
	struct stat st;

	d->map_dir_fd = open(d->cfg->map_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->map_dir_fd < 0 || fstat(d->map_dir_fd, &st)) {
		pr_err("map directory %s: %s", d->cfg->map_dir, strerror(errno));
		return -errno;
	}
	/* A world-writable directory without the sticky bit lets anyone swap our files. */
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		pr_err("map directory %s: world-writable without the sticky bit; refused",
		       d->cfg->map_dir);
		return -EPERM;
	}
	return 0;
}

/* ---- where the pieces meet ---- */

/* An event from BPF: to the policy, what a jitdump holds so far written first. */
static void on_event(void *ctx, const struct policy_event *ev)
{
	struct daemon *d = ctx;

	/* A child inherits all the code its parent's dump names so far: its map has it first. */
	if (d->jitdumps && ev->type == POLICY_EV_FORK)
		jitdumps__flush(d->jitdumps, ev->ppid);
	if (d->jitdumps && (ev->type == POLICY_EV_EXEC || ev->type == POLICY_EV_EXIT))
		jitdumps__ended(d->jitdumps, ev->pid);
	policy__event(d->policy, ev, clock_boot_ns());
}

void daemon__on_copy_done(void *ctx, pid_t child, uint64_t ticket, int err,
			  const struct copy_result *res)
{
	struct daemon *d = ctx;

	policy__copy_done(d->policy, child, ticket, err, res, clock_boot_ns());
}

static void on_exec_map(void *ctx, const struct execmap_rec *rec)
{
	struct daemon *d = ctx;

	if (rec->kind == EXECMAP_JITDUMP) {
		if (d->jitdumps)
			jitdumps__marker(d->jitdumps, rec->pid, rec->path, rec->ino);
		return;
	}
	policy__exec_mapping(d->policy, rec->pid, rec->addr, rec->len, rec->kind == EXECMAP_MEMFD,
			     clock_boot_ns());
}

static void on_jitdump_marker(void *ctx, pid_t pid, const char *path, uint64_t ino)
{
	struct daemon *d = ctx;

	if (d->jitdumps)
		jitdumps__marker(d->jitdumps, pid, path, ino);
}

/*
 * Executable mappings: from the kernel's mmap reports where perf events
 * open, /proc/<pid>/maps for the gaps; docs/architecture.md has the order.
 */
static int open_exec_maps(struct daemon *d)
{
	enum execmap_source want = d->cfg->exec_maps;
	int perf_err = -ENOENT;

	d->exec_src = EXECMAP_SRC_OFF;
	if (want == EXECMAP_SRC_OFF || d->cfg->dry_run)
		return 0;
	if (want == EXECMAP_SRC_AUTO || want == EXECMAP_SRC_PERF) {
		d->execmap = execmap__open(EXECMAP_RING_PAGES, on_exec_map, d);
		perf_err = d->execmap ? 0 : -errno;
		if (d->execmap) {
			d->exec_src = EXECMAP_SRC_PERF;
		} else if (want == EXECMAP_SRC_PERF) {
			pr_err("exec maps: perf events: %s", strerror(-perf_err));
			return perf_err;
		} else {
			pr_warn("exec maps: perf events cannot be opened (%s): /proc/<pid>/maps is read every %llus instead",
				strerror(-perf_err), JITSCAN_PERIOD_NS / 1000000000ull);
		}
	}
	if (d->exec_src == EXECMAP_SRC_OFF)
		d->exec_src = EXECMAP_SRC_PROCFS;
	execprobe_describe(d->exec_probe, sizeof(d->exec_probe), perf_err);
	pr_info("exec maps: from %s, /proc/<pid>/maps for the gaps (this kernel: %s)",
		execmap_source_name(d->exec_src), d->exec_probe);
	d->jitscan = jitscan__new(d->exec_src == EXECMAP_SRC_PROCFS, on_jitdump_marker, d);
	return d->jitscan ? 0 : -ENOMEM;
}

/* The BPF side wakes the agent at once only for events of pids with a map. */
static void on_listed(void *ctx, pid_t pid, bool exists)
{
	struct daemon *d = ctx;

	events__set_mapped(d->events, pid, exists);
}

void daemon__on_map_change(void *ctx, pid_t pid, bool exists)
{
	struct daemon *d = ctx;

	events__set_mapped(d->events, pid, exists);
	/* A process in another pid namespace sharing the directory may wait for this name. */
	if (exists && d->mirrors)
		mirrors__on_map_dir(d->mirrors, pid, clock_boot_ns());
	/* A map for a pid no known process holds must not pile up. */
	if (exists)
		policy__map_appeared(d->policy, pid, clock_boot_ns());
}

struct scan_env daemon__scan_env(struct daemon *d)
{
	return (struct scan_env){
		.policy = d->policy, .mw = d->mw, .ar = d->ar, .map_dir_fd = d->map_dir_fd,
		.dry_run = d->cfg->dry_run, .self_mnt_ns = d->self_mnt_ns,
		.self_pid_ns = d->self_pid_ns, .on_map = on_listed, .ctx = d,
	};
}

/*
 * Every copy queued or being made holds its parent's map open (256 queued
 * and one per worker at most); archive jobs hold none, but a move, a store
 * and a status answer each take a few for a moment: the soft limit (1024 by
 * default, kept low for select(), which the agent does not use) goes up to
 * the hard one. No capability needed.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur == rl.rlim_max) {
		pr_debug("open files: limit %llu", (unsigned long long)rl.rlim_cur);
		return;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		pr_warn("open files: cannot raise the soft limit to %llu: %s",
			(unsigned long long)rl.rlim_max, strerror(errno));
		return;
	}
	pr_debug("open files: soft limit raised to the hard limit, %llu",
		 (unsigned long long)rl.rlim_max);
}

static int open_pieces(struct daemon *d)
{
	const struct archive_config acfg = {
		.map_dir = d->cfg->map_dir, .map_dir_fd = d->map_dir_fd, .dir = d->cfg->archive_dir,
		.max_bytes = d->cfg->archive_max_bytes, .max_map_bytes = d->cfg->max_map_bytes,
	};
	const struct store_config scfg = {
		.map_dir = d->cfg->map_dir, .map_dir_fd = d->map_dir_fd,
		.max_map_bytes = d->cfg->max_map_bytes, .copy_threads = COPY_THREADS,
		.copy_queue_max = COPY_QUEUE_MAX, .copy_queue_per_uid = COPY_QUEUE_PER_UID,
	};
	const struct policy_config pcfg = {
		.map_dir = d->cfg->map_dir, .archive_dir = d->cfg->archive_dir,
		.retention_ns = d->cfg->retention_s * 1000000000ull,
		.max_map_bytes = d->cfg->max_map_bytes, .dry_run = d->cfg->dry_run,
		.copy_rate = d->cfg->copy_budget, .copy_burst = d->cfg->copy_burst,
		.defer_copy_bytes = DEFER_COPY_BYTES, .loop_copy_rate = LOOP_COPY_RATE,
	};

	char hold_path[PATH_MAX];
	int err;

	d->inst = instance__open(d->cfg->run_dir, d->cfg->map_dir, d->cfg->status_gid);
	if (!d->inst)
		return -EBUSY;
	/* Before any thread: its socket is made under a umask, which is the process's. */
	err = perfmap__hold_path(d->cfg->run_dir, d->cfg->map_dir, hold_path, sizeof(hold_path));
	if (err) {
		pr_err("run directory %s: the hold socket's name for %s: %s", d->cfg->run_dir,
		       d->cfg->map_dir, strerror(-err));
		return err;
	}
	d->holds = holds__open(hold_path);
	if (!d->holds)
		return -errno;
	/* Watched before BPF attaches: a map made before any event is known. */
	d->mw = mapwatch__open(d->cfg->map_dir, d->map_dir_fd);
	if (!d->mw)
		return -errno;
	d->events = events__open(&d->cfg->events, on_event, d);
	if (!d->events)
		return -errno;
	/* System-wide perf events need CAP_PERFMON, which is not kept. */
	err = open_exec_maps(d);
	if (err)
		return err;
	/* Nothing privileged is left to do but what the kept set allows. */
	err = privs_drop();
	if (err)
		return err;
	/* Its worker thread starts after the drop: capabilities are per thread. */
	d->ar = archive__open(&acfg);
	if (!d->ar)
		return -errno;
	if (!d->cfg->no_mirrors && !d->cfg->dry_run) {
		d->mirrors = mirrors__new(&(struct mirror_config){
			.map_dir_fd = d->map_dir_fd, .map_dir = d->cfg->map_dir,
			.ns_map_dir = d->cfg->ns_map_dir, .max_bytes = d->cfg->max_map_bytes,
			.rate = d->cfg->copy_budget, .burst = d->cfg->copy_burst });
		if (!d->mirrors)
			return -errno ?: -ENOMEM;
	}
	d->store = store__new(&scfg, d->mw, d->events, d->ar, d->mirrors);
	if (!d->store)
		return -ENOMEM;
	d->policy = policy__new(&pcfg, store__mapstore(d->store));
	if (!d->policy)
		return -ENOMEM;
	holds__attach(d->holds, d->policy);
	/* Their markers come with the executable mappings; a dry run writes no map. */
	if (d->exec_src != EXECMAP_SRC_OFF && !d->cfg->dry_run) {
		d->jitdumps = jitdumps__new(d->cfg->map_dir, d->map_dir_fd, d->policy);
		if (!d->jitdumps)
			return -ENOMEM;
	}
	/*
	 * After the drop: the HTTP thread needs no capability (a port below
	 * 1024 would need CAP_NET_BIND_SERVICE, which is not kept).
	 */
	if (d->cfg->metrics_listen) {
		d->metrics = metrics__start(d->cfg->metrics_listen);
		if (!d->metrics) {
			err = -errno;
			pr_err("metrics: cannot listen on %s: %s", d->cfg->metrics_listen,
			       strerror(-err));
			return err;
		}
		pr_info("metrics: http://%s/metrics", d->cfg->metrics_listen);
	}
	return 0;
}

int daemon__open(struct daemon *d, struct daemon_config *cfg)
{
	int err;

	*d = (struct daemon){ .cfg = cfg, .map_dir_fd = -1 };
	/* In a container with the host's pid namespace, the host's processes are pid 1's. */
	d->self_mnt_ns = procfs_ns(cfg->events.host_ns_pid, "mnt");
	d->self_pid_ns = procfs_ns(cfg->events.host_ns_pid, "pid");
	if (!d->self_mnt_ns || !d->self_pid_ns) {
		pr_err("--host-namespaces %d: its namespaces cannot be read", (int)cfg->events.host_ns_pid);
		return -ESRCH;
	}
	raise_fd_limit();
	err = open_map_dir(d);
	if (err)
		return err;
	return open_pieces(d);
}

void daemon__reload(struct daemon *d)
{
	struct daemon_config next;

	if (daemon_config__reload(d->cfg, &next))
		return;
	/* Numbers only: the running config's strings point into the text read at start. */
	d->cfg->retention_s = next.retention_s;
	d->cfg->archive_max_bytes = next.archive_max_bytes;
	d->cfg->copy_budget = next.copy_budget;
	d->cfg->copy_burst = next.copy_burst;
	d->cfg->log_level = next.log_level;
	policy__set_limits(d->policy, d->cfg->retention_s * 1000000000ull, d->cfg->copy_budget,
			   d->cfg->copy_burst);
	if (d->mirrors)
		mirrors__set_budget(d->mirrors, d->cfg->copy_budget, d->cfg->copy_burst);
	archive__set_max_bytes(d->ar, d->cfg->archive_max_bytes);
	log_set_level(d->cfg->log_level);
	daemon_config__fini(&next);
}

/* Undoes daemon__open(), whatever part of it was done. */
void daemon__close(struct daemon *d)
{
	/* First: its thread answers no request after this. */
	metrics__free(d->metrics);
	/* Before the policy: closing a holder releases its holds there. */
	holds__free(d->holds);
	jitdumps__free(d->jitdumps);
	policy__free(d->policy);
	jitscan__free(d->jitscan);
	execmap__free(d->execmap);
	store__free(d->store);
	mirrors__free(d->mirrors);
	events__free(d->events);
	mapwatch__free(d->mw);
	/* Stops after the map in hand; queued ones stay staged for the next start. */
	archive__free(d->ar);
	instance__free(d->inst);
	if (d->map_dir_fd >= 0)
		close(d->map_dir_fd);
}


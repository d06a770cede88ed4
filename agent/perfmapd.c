/* perfmapd: the agent's entry point, its options and its one event loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "events.h"
#include "instance.h"
#include "log.h"
#include "mapwatch.h"
#include "perfmap.h"
#include "policy.h"
#include "procfs.h"
#include "scan.h"
#include "units.h"

#define TICK_MS 100   /* drops, copy retries and retention are checked this often */

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
	"                           archived (256M)\n"
	"  --log-level LEVEL        error, warn, info or debug (info)\n"
	"  --dry-run                log what would be done; change no file\n"
	"  --run-dir DIR            lock and status socket (/run/perfmapd)\n"
	"  --ringbuf-size N         BPF ring buffer bytes, a power of 2 (1M)\n"
	"  --bpf-programs KIND      auto, tp_btf or raw_tp: which tracepoint\n"
	"                           programs to load (auto: tp_btf, else raw_tp)\n"
	"  -h, --help, --version\n"
	"\n"
	"N takes a K, M or G suffix. `perfmapctl status` shows what it tracks.\n";

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Realtime minus boottime, read back to back; follows clock steps at each tick. */
static void update_clocks(struct agent *a)
{
	struct timespec rt;
	uint64_t b = boot_ns();

	clock_gettime(CLOCK_REALTIME, &rt);
	a->boot_to_real_ns = ((int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec) - (int64_t)b;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static int parse_args(int argc, char **argv, struct agent_config *cfg)
{
	enum { OPT_MAP_DIR = 256, OPT_RETENTION, OPT_ARCHIVE_DIR, OPT_ARCHIVE_MAX,
	       OPT_MAX_MAP, OPT_LOG_LEVEL, OPT_DRY_RUN, OPT_RUN_DIR, OPT_RINGBUF,
	       OPT_BPF_PROGRAMS, OPT_VERSION };
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
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_MAP_DIR:
			cfg->map_dir = optarg;
			break;
		case OPT_RETENTION:
			if (parse_duration(optarg, &cfg->retention_s))
				goto bad_value;
			break;
		case OPT_ARCHIVE_DIR:
			if (optarg[0] != '/')
				goto bad_value;
			cfg->archive_dir = optarg;
			break;
		case OPT_ARCHIVE_MAX:
			if (parse_bytes(optarg, &cfg->archive_max_bytes))
				goto bad_value;
			break;
		case OPT_MAX_MAP:
			if (parse_bytes(optarg, &cfg->max_map_bytes))
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
			if (parse_bytes(optarg, &v) || !is_pow2(v) || v < 4096 || v > (1u << 30))
				goto bad_value;
			cfg->ringbuf_bytes = (unsigned int)v;
			break;
		case OPT_BPF_PROGRAMS:
			if (!strcmp(optarg, "auto"))
				cfg->bpf_programs = BPF_PROGS_AUTO;
			else if (!strcmp(optarg, "tp_btf"))
				cfg->bpf_programs = BPF_PROGS_TP_BTF;
			else if (!strcmp(optarg, "raw_tp"))
				cfg->bpf_programs = BPF_PROGS_RAW_TP;
			else
				goto bad_value;
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

static int open_map_dir(struct agent *a)
{
	struct stat st;

	a->map_dir_fd = open(a->cfg.map_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a->map_dir_fd < 0 || fstat(a->map_dir_fd, &st)) {
		pr_err("map directory %s: %s", a->cfg.map_dir, strerror(errno));
		return -errno;
	}
	/* A world-writable directory without the sticky bit lets anyone swap our files. */
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		pr_err("map directory %s: world-writable without the sticky bit; refused",
		       a->cfg.map_dir);
		return -EPERM;
	}
	return 0;
}

struct loop {
	int epfd, sigfd, timerfd;
};

static int loop_add(int epfd, int fd, uint32_t id)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = id };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

enum { SRC_EVENTS, SRC_SIGNAL, SRC_TIMER, SRC_INOTIFY, SRC_STATUS };

/*
 * The signals the loop reads from its signalfd. SIGIO announces a lease
 * break (replace.c) and must never kill us. Blocked before any thread
 * starts, so that no thread takes them with the default action.
 */
static void signal_mask(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGHUP);
	sigaddset(mask, SIGIO);
}

static void block_signals(void)
{
	sigset_t mask;

	signal_mask(&mask);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int loop_open(struct agent *a, struct loop *l)
{
	struct itimerspec its = {
		.it_interval = { 0, TICK_MS * 1000000L },
		.it_value = { 0, TICK_MS * 1000000L },
	};
	sigset_t mask;
	int err = 0;

	signal_mask(&mask);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->epfd < 0 || l->sigfd < 0 || l->timerfd < 0)
		return -errno;
	if (timerfd_settime(l->timerfd, 0, &its, NULL))
		return -errno;
	err = err ?: loop_add(l->epfd, events__fd(a->events), SRC_EVENTS);
	err = err ?: loop_add(l->epfd, l->sigfd, SRC_SIGNAL);
	err = err ?: loop_add(l->epfd, l->timerfd, SRC_TIMER);
	err = err ?: loop_add(l->epfd, mapwatch__fd(a->watch), SRC_INOTIFY);
	err = err ?: loop_add(l->epfd, instance__fd(a->inst), SRC_STATUS);
	return err;
}

static void loop_close(struct loop *l)
{
	if (l->timerfd >= 0)
		close(l->timerfd);
	if (l->sigfd >= 0)
		close(l->sigfd);
	if (l->epfd >= 0)
		close(l->epfd);
}

static void on_signal(struct agent *a, struct loop *l)
{
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			pr_info("%s: stopping; maps stay as they are", strsignal(si.ssi_signo));
			a->stop = true;
		}
	}
}

/* Lost events: the table no longer matches the system; /proc is the truth. */
static void resync(struct agent *a)
{
	a->stats.resyncs++;
	scan_procs(a);
	scan_maps(a, false);
}

/*
 * Every read of the ring buffer starts with the map directory's changes:
 * then the index (mapwatch.c) knows of every map made before those events.
 */
static void catch_up(struct agent *a)
{
	bool relist = mapwatch__drain(a);

	events__consume(a->events);
	if (relist)
		scan_maps(a, false);
}

static void on_tick(struct agent *a, struct loop *l)
{
	uint64_t expirations, dropped;

	if (read(l->timerfd, &expirations, sizeof(expirations)) < 0)
		return;
	update_clocks(a);
	/* Events that needed no wake-up (bpf/) are read here at the latest. */
	catch_up(a);
	dropped = events__dropped(a->events);
	if (dropped != a->stats.dropped) {
		pr_warn("bpf: %llu events lost (ring buffer full); resyncing from /proc",
			(unsigned long long)(dropped - a->stats.dropped));
		a->stats.dropped = dropped;
		resync(a);
	}
	policy_retry(a);
	retain_expire(a);
}

static int run(struct agent *a)
{
	struct epoll_event evs[8];
	struct loop l = { -1, -1, -1 };
	int n, i, err;

	err = loop_open(a, &l);
	if (err) {
		pr_err("event loop: %s", strerror(-err));
		goto close_loop;
	}
	/* BPF is attached: what happens from now on is queued while we catch up. */
	scan_procs(a);
	scan_maps(a, true);
	pr_info("tracking %zu processes; %zu exited processes' maps retained",
		a->procs.count, a->retained_count);

	while (!a->stop) {
		n = epoll_wait(l.epfd, evs, 8, -1);
		if (n < 0 && errno != EINTR) {
			err = -errno;
			pr_err("epoll: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case SRC_EVENTS: catch_up(a); break;
			case SRC_SIGNAL: on_signal(a, &l); break;
			case SRC_TIMER: on_tick(a, &l); break;
			case SRC_INOTIFY: catch_up(a); break;
			case SRC_STATUS: instance__serve(a->inst, a); break;
			}
		}
	}
close_loop:
	loop_close(&l);
	return err;
}

int main(int argc, char **argv)
{
	struct agent a = {
		.cfg = {
			.map_dir = "/tmp",
			.archive_dir = "/var/lib/perfmapd/archive",
			.run_dir = PERFMAPD_RUN_DIR,
			.retention_s = 600,
			.archive_max_bytes = 256ull << 20,
			.max_map_bytes = 256ull << 20,
			.ringbuf_bytes = 1u << 20,
		},
		.map_dir_fd = -1,
	};
	int err;

	if (parse_args(argc, argv, &a.cfg))
		return 2;
	block_signals();
	a.start_mono_ns = mono_ns();
	a.ticks_per_sec = (uint64_t)sysconf(_SC_CLK_TCK);
	a.self_mnt_ns = procfs_ns(0, "mnt");
	a.self_pid_ns = procfs_ns(0, "pid");
	update_clocks(&a);

	err = open_map_dir(&a);
	if (err)
		goto out;
	a.inst = instance__open(&a);
	if (!a.inst) {
		err = -EBUSY;
		goto close_map_dir;
	}
	err = archive_init(&a);
	if (err)
		goto free_instance;
	err = proctab_init(&a.procs);
	if (err)
		goto free_instance;
	a.events = events__open(&a);
	if (!a.events) {
		err = -errno;
		goto free_procs;
	}
	a.watch = mapwatch__open(&a);
	if (!a.watch) {
		err = -errno;
		goto free_events;
	}
	pr_info("managing %s%s: retention %llus, archive %s (max %llu bytes)",
		a.cfg.map_dir, a.cfg.dry_run ? " (dry run: no file is changed)" : "",
		(unsigned long long)a.cfg.retention_s, a.cfg.archive_dir,
		(unsigned long long)a.cfg.archive_max_bytes);
	err = run(&a);

	mapwatch__free(a.watch);
free_events:
	events__free(a.events);
free_procs:
	archive_fini();
	proctab_fini(&a.procs);
	free(a.retained);
free_instance:
	instance__free(a.inst);
close_map_dir:
	close(a.map_dir_fd);
out:
	return err ? 1 : 0;
}

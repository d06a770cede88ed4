/* perfmapd: the agent's entry point, its options and its one event loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "archive.h"
#include "clock.h"
#include "events.h"
#include "instance.h"
#include "log.h"
#include "mapwatch.h"
#include "perfmap_tools.h"
#include "policy.h"
#include "privs.h"
#include "procfs.h"
#include "scan.h"
#include "status.h"
#include "store.h"

#define TICK_MS 100   /* drops, copy retries and retention are checked this often */
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

/*
 * A listing of the map directory reads every name in it (30,000 in a busy
 * /tmp), and anyone who can fill the inotify queue asks for one: at most one
 * a second, the requests meanwhile coalesced into it.
 */
#define RELIST_MIN_NS (1000ull * 1000000)

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
	"  -h, --help, --version\n"
	"\n"
	"N takes a K, M or G suffix. `perfmapctl status` shows what it tracks.\n";

struct daemon_config {
	const char *map_dir;          /* where runtimes write perf-<pid>.map */
	const char *archive_dir;      /* compacted maps of exited processes */
	const char *run_dir;          /* lock and status socket */
	gid_t status_gid;             /* may read the status besides root; STATUS_NO_GROUP */
	uint64_t retention_s;         /* how long an exited process's map stays */
	uint64_t archive_max_bytes;   /* archive quota; the oldest go first */
	uint64_t max_map_bytes;       /* larger maps are not copied or archived */
	uint64_t copy_budget;         /* bytes of copies per uid a second */
	uint64_t copy_burst;          /* ...saved up at most */
	struct events_config events;
	bool dry_run;
};

/* The agent: its pieces, wired together here and nowhere else. */
struct daemon {
	struct daemon_config cfg;
	int map_dir_fd;
	struct instance *inst;
	struct archive *ar;
	struct mapwatch *mw;
	struct events *events;
	struct store *store;
	struct policy *policy;
	uint64_t self_mnt_ns, self_pid_ns;
	uint64_t started_ns;          /* CLOCK_MONOTONIC */
	uint64_t dropped_seen, resyncs;
	bool relist_wanted;           /* the index lost changes: a listing is due */
	uint64_t relisted_ns;         /* CLOCK_BOOTTIME of the last listing after start */
	uint64_t rescans, rescans_deferred;
	bool stop;
};

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static int parse_args(int argc, char **argv, struct daemon_config *cfg)
{
	enum { OPT_MAP_DIR = 256, OPT_RETENTION, OPT_ARCHIVE_DIR, OPT_ARCHIVE_MAX,
	       OPT_MAX_MAP, OPT_LOG_LEVEL, OPT_DRY_RUN, OPT_RUN_DIR, OPT_RINGBUF,
	       OPT_BPF_PROGRAMS, OPT_COPY_BUDGET, OPT_COPY_BURST, OPT_STATUS_GROUP, OPT_VERSION };
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct group *gr;
	uint64_t v;
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

static int open_map_dir(struct daemon *d)
{
	struct stat st;

	d->map_dir_fd = open(d->cfg.map_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->map_dir_fd < 0 || fstat(d->map_dir_fd, &st)) {
		pr_err("map directory %s: %s", d->cfg.map_dir, strerror(errno));
		return -errno;
	}
	/* A world-writable directory without the sticky bit lets anyone swap our files. */
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		pr_err("map directory %s: world-writable without the sticky bit; refused",
		       d->cfg.map_dir);
		return -EPERM;
	}
	return 0;
}

/* ---- where the pieces meet ---- */

/* An event from BPF: to the policy. */
static void on_event(void *ctx, const struct policy_event *ev)
{
	struct daemon *d = ctx;

	policy__event(d->policy, ev, clock_boot_ns());
}

/* A copy made off the loop is done: to the policy, in the loop's thread. */
static void on_copy_done(void *ctx, pid_t child, uint64_t ticket, int err,
			 const struct copy_result *res)
{
	struct daemon *d = ctx;

	policy__copy_done(d->policy, child, ticket, err, res, clock_boot_ns());
}

/* The BPF side wakes the agent at once only for events of pids with a map. */
static void on_listed(void *ctx, pid_t pid, bool exists)
{
	struct daemon *d = ctx;

	events__set_mapped(d->events, pid, exists);
}

/* A change the inotify index read. */
static void on_map_change(void *ctx, pid_t pid, bool exists)
{
	struct daemon *d = ctx;

	events__set_mapped(d->events, pid, exists);
	/* A map for a pid no known process holds must not pile up. */
	if (exists)
		policy__map_appeared(d->policy, pid, clock_boot_ns());
}

static struct scan_env scan_env_of(struct daemon *d)
{
	return (struct scan_env){
		.policy = d->policy, .mw = d->mw, .ar = d->ar, .map_dir_fd = d->map_dir_fd,
		.dry_run = d->cfg.dry_run, .self_mnt_ns = d->self_mnt_ns,
		.self_pid_ns = d->self_pid_ns, .on_map = on_listed, .ctx = d,
	};
}

/* ---- the loop ---- */

struct loop {
	int epfd, sigfd, timerfd;
	int retryfd;                  /* one-shot, CLOCK_BOOTTIME: a busy move's next try */
	uint64_t retry_at;
	bool status_paused;           /* this second's answers are spent: not watched */
};

static int loop_add(int epfd, int fd, uint32_t id)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = id };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

enum { SRC_EVENTS, SRC_SIGNAL, SRC_TIMER, SRC_RETRY, SRC_INOTIFY, SRC_STATUS, SRC_COPIES };

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

static int loop_open(struct daemon *d, struct loop *l)
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
	l->retryfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->epfd < 0 || l->sigfd < 0 || l->timerfd < 0 || l->retryfd < 0)
		return -errno;
	if (timerfd_settime(l->timerfd, 0, &its, NULL))
		return -errno;
	err = err ?: loop_add(l->epfd, events__fd(d->events), SRC_EVENTS);
	err = err ?: loop_add(l->epfd, l->sigfd, SRC_SIGNAL);
	err = err ?: loop_add(l->epfd, l->timerfd, SRC_TIMER);
	err = err ?: loop_add(l->epfd, l->retryfd, SRC_RETRY);
	err = err ?: loop_add(l->epfd, mapwatch__fd(d->mw), SRC_INOTIFY);
	err = err ?: loop_add(l->epfd, instance__fd(d->inst), SRC_STATUS);
	err = err ?: loop_add(l->epfd, store__copy_fd(d->store), SRC_COPIES);
	return err;
}

static void loop_close(struct loop *l)
{
	if (l->retryfd >= 0)
		close(l->retryfd);
	if (l->timerfd >= 0)
		close(l->timerfd);
	if (l->sigfd >= 0)
		close(l->sigfd);
	if (l->epfd >= 0)
		close(l->epfd);
}

static void on_signal(struct daemon *d, struct loop *l)
{
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			pr_info("%s: stopping; maps stay as they are", strsignal(si.ssi_signo));
			d->stop = true;
		}
	}
}

/*
 * List the map directory when one is wanted and the last is a second old.
 * Until then the index is not exact, and every event looks on disk: slower,
 * never wrong.
 */
static void relist(struct daemon *d, bool asked)
{
	struct scan_env env = scan_env_of(d);
	uint64_t now = clock_boot_ns();
	bool too_soon = d->relisted_ns && now - d->relisted_ns < RELIST_MIN_NS;

	if (asked) {
		/* Coalesced into one already due, or waiting for its turn. */
		if (d->relist_wanted || too_soon)
			d->rescans_deferred++;
		d->relist_wanted = true;
	}
	if (!d->relist_wanted || too_soon)
		return;
	d->relist_wanted = false;
	d->relisted_ns = now;
	d->rescans++;
	if (scan_maps(&env, false))
		d->relist_wanted = true;  /* again in a second */
}

/*
 * Every read of the ring buffer starts with the map directory's changes:
 * then the index (mapwatch.c) knows of every map made before those events.
 */
static void catch_up(struct daemon *d)
{
	bool lost = mapwatch__drain(d->mw, on_map_change, d);

	events__consume(d->events);
	if (lost)
		relist(d, true);
}

/*
 * Lost process events: the table no longer matches the system; /proc is the
 * truth. The maps are the index's to tell while it is exact: a listing only
 * when it is not.
 */
static void resync(struct daemon *d)
{
	struct scan_env env = scan_env_of(d);

	d->resyncs++;
	scan_procs(&env);
	if (strcmp(mapwatch__state(d->mw), "exact") || scan_index(&env))
		relist(d, true);
}

/* Watch the status socket again, or not until the next second's budget. */
static void watch_status(struct daemon *d, struct loop *l, bool on)
{
	struct epoll_event e = { .events = on ? EPOLLIN : 0, .data.u32 = SRC_STATUS };

	if (!epoll_ctl(l->epfd, EPOLL_CTL_MOD, instance__fd(d->inst), &e))
		l->status_paused = !on;
}

static void on_tick(struct daemon *d, struct loop *l)
{
	uint64_t expirations, dropped;

	if (read(l->timerfd, &expirations, sizeof(expirations)) < 0)
		return;
	/* Events that needed no wake-up (bpf/) are read here at the latest. */
	mapwatch__check(d->mw);
	catch_up(d);
	dropped = events__dropped(d->events);
	if (dropped != d->dropped_seen) {
		pr_warn("bpf: %llu events lost (ring buffer full); resyncing from /proc",
			(unsigned long long)(dropped - d->dropped_seen));
		d->dropped_seen = dropped;
		resync(d);
	}
	relist(d, false);
	if (l->status_paused && instance__budget(d->inst, clock_mono_ns()))
		watch_status(d, l, true);
	policy__tick(d->policy, clock_boot_ns());
	/* Lines held back by the flood bound are summed up within a second or so. */
	log_flush(false);
}

/* A busy move is retried within milliseconds: sooner than the tick, when one waits. */
static void arm_retry(struct daemon *d, struct loop *l)
{
	uint64_t next = policy__next_deadline(d->policy);
	struct itimerspec its = { 0 };

	if (next == l->retry_at)
		return;
	l->retry_at = next;
	if (next != UINT64_MAX) {
		its.it_value.tv_sec = next / 1000000000;
		its.it_value.tv_nsec = next % 1000000000;
	}
	timerfd_settime(l->retryfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_retry(struct daemon *d, struct loop *l)
{
	uint64_t expirations;

	if (read(l->retryfd, &expirations, sizeof(expirations)) < 0)
		return;
	l->retry_at = UINT64_MAX;
	/* What happened meanwhile first: an exit or a new write changes what a retry may do. */
	catch_up(d);
	policy__tick(d->policy, clock_boot_ns());
}

static void on_status(struct daemon *d, struct loop *l)
{
	struct status_sources src = {
		.map_dir = d->cfg.map_dir, .map_dir_fd = d->map_dir_fd,
		.archive_dir = d->cfg.archive_dir, .archive_max_bytes = d->cfg.archive_max_bytes,
		.retention_s = d->cfg.retention_s, .dry_run = d->cfg.dry_run,
		.started_ns = d->started_ns, .resyncs = d->resyncs, .rescans = d->rescans,
		.rescans_deferred = d->rescans_deferred, .policy = d->policy,
		.events = d->events, .mw = d->mw, .ar = d->ar,
	};
	unsigned int max = instance__budget(d->inst, clock_mono_ns());
	char text[8192];
	size_t n;

	if (!max) {
		watch_status(d, l, false);
		return;
	}
	instance__stats(d->inst, &src.status_served, &src.status_throttled);
	n = status_text(&src, text, sizeof(text));
	instance__serve(d->inst, text, n, max);
}

static int run(struct daemon *d)
{
	struct scan_env env = scan_env_of(d);
	struct loop l = { -1, -1, -1, -1, UINT64_MAX, false };
	struct epoll_event evs[8];
	int n, i, err;

	err = loop_open(d, &l);
	if (err) {
		pr_err("event loop: %s", strerror(-err));
		goto close_loop;
	}
	/* BPF is attached and the directory watched: what happens now is queued while we catch up. */
	scan_procs(&env);
	scan_maps(&env, true);
	pr_info("tracking %zu processes; %zu exited processes' maps retained",
		policy__processes(d->policy), policy__retained(d->policy));

	while (!d->stop) {
		n = epoll_wait(l.epfd, evs, 8, -1);
		if (n < 0 && errno != EINTR) {
			err = -errno;
			pr_err("epoll: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case SRC_EVENTS: catch_up(d); break;
			case SRC_SIGNAL: on_signal(d, &l); break;
			case SRC_TIMER: on_tick(d, &l); break;
			case SRC_RETRY: on_retry(d, &l); break;
			case SRC_INOTIFY: catch_up(d); break;
			case SRC_STATUS: on_status(d, &l); break;
			case SRC_COPIES: store__drain_copies(d->store, on_copy_done, d); break;
			}
		}
		arm_retry(d, &l);
	}
close_loop:
	loop_close(&l);
	return err;
}

/* ---- start and stop ---- */

/*
 * Every queued archive job and every copy holds an fd, and a busy host has
 * many maps: the soft limit (1024 by default, kept low for select(), which
 * the agent does not use) goes up to the hard one. No capability needed.
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

static int daemon_open(struct daemon *d)
{
	const struct archive_config acfg = {
		.map_dir = d->cfg.map_dir, .map_dir_fd = d->map_dir_fd, .dir = d->cfg.archive_dir,
		.max_bytes = d->cfg.archive_max_bytes, .max_map_bytes = d->cfg.max_map_bytes,
	};
	const struct store_config scfg = {
		.map_dir = d->cfg.map_dir, .map_dir_fd = d->map_dir_fd,
		.max_map_bytes = d->cfg.max_map_bytes, .copy_threads = COPY_THREADS,
		.copy_queue_max = COPY_QUEUE_MAX, .copy_queue_per_uid = COPY_QUEUE_PER_UID,
	};
	const struct policy_config pcfg = {
		.map_dir = d->cfg.map_dir, .archive_dir = d->cfg.archive_dir,
		.retention_ns = d->cfg.retention_s * 1000000000ull,
		.max_map_bytes = d->cfg.max_map_bytes, .dry_run = d->cfg.dry_run,
		.copy_rate = d->cfg.copy_budget, .copy_burst = d->cfg.copy_burst,
		.defer_copy_bytes = DEFER_COPY_BYTES, .loop_copy_rate = LOOP_COPY_RATE,
	};

	int err;

	d->inst = instance__open(d->cfg.run_dir, d->cfg.map_dir, d->cfg.status_gid);
	if (!d->inst)
		return -EBUSY;
	/* Watched before BPF attaches: a map made before any event is known. */
	d->mw = mapwatch__open(d->cfg.map_dir, d->map_dir_fd);
	if (!d->mw)
		return -errno;
	d->events = events__open(&d->cfg.events, on_event, d);
	if (!d->events)
		return -errno;
	/* Nothing privileged is left to do but what the kept set allows. */
	err = privs_drop();
	if (err)
		return err;
	/* Its worker thread starts after the drop: capabilities are per thread. */
	d->ar = archive__open(&acfg);
	if (!d->ar)
		return -errno;
	d->store = store__new(&scfg, d->mw, d->events, d->ar);
	if (!d->store)
		return -ENOMEM;
	d->policy = policy__new(&pcfg, store__mapstore(d->store));
	if (!d->policy)
		return -ENOMEM;
	return 0;
}

/* Undo daemon_open(), whatever part of it was done. */
static void daemon_close(struct daemon *d)
{
	policy__free(d->policy);
	store__free(d->store);
	events__free(d->events);
	mapwatch__free(d->mw);
	/* Stops after the map in hand; queued ones stay staged for the next start. */
	archive__free(d->ar);
	instance__free(d->inst);
	if (d->map_dir_fd >= 0)
		close(d->map_dir_fd);
}

int main(int argc, char **argv)
{
	struct daemon d = {
		.cfg = {
			.map_dir = "/tmp",
			.archive_dir = "/var/lib/perfmapd/archive",
			.run_dir = PERFMAPD_RUN_DIR,
			.status_gid = STATUS_NO_GROUP,
			.retention_s = 600,
			.archive_max_bytes = 256ull << 20,
			.max_map_bytes = 256ull << 20,
			/* A 10 MB map forked 100 times a second is 1000 MB/s: within both. */
			.copy_budget = 1ull << 30,
			.copy_burst = 2ull << 30,
			.events = { .ringbuf_bytes = 1u << 20, .programs = BPF_PROGS_AUTO },
		},
		.map_dir_fd = -1,
	};
	int err;

	if (parse_args(argc, argv, &d.cfg))
		return 2;
	block_signals();
	raise_fd_limit();
	d.started_ns = clock_mono_ns();
	d.self_mnt_ns = procfs_ns(0, "mnt");
	d.self_pid_ns = procfs_ns(0, "pid");

	err = open_map_dir(&d);
	if (err)
		goto close_daemon;
	err = daemon_open(&d);
	if (err)
		goto close_daemon;
	pr_info("managing %s%s: retention %llus, archive %s (max %llu bytes)",
		d.cfg.map_dir, d.cfg.dry_run ? " (dry run: no file is changed)" : "",
		(unsigned long long)d.cfg.retention_s, d.cfg.archive_dir,
		(unsigned long long)d.cfg.archive_max_bytes);
	err = run(&d);
close_daemon:
	daemon_close(&d);
	log_flush(true);
	return err ? 1 : 0;
}

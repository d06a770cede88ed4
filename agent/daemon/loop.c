/* perfmapd's one event loop: BPF events, the index, timers, signals, the status socket, the metrics' text. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/daemon_internal.h"
#include "in/in.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "mirror/mirror.h"
#include "policy/policy.h"
#include "report/report.h"
#include "store/store.h"

#define TICK_MS 100   /* drops, copy retries and retention are checked this often */

/*
 * A listing of the map directory reads every name in it (30,000 in a busy
 * /tmp), and anyone who can fill the inotify queue asks for one: at most one
 * a second, the requests meanwhile coalesced into it.
 */
#define RELIST_MIN_NS (1000ull * 1000000)

/* The loop's own state: its fds, and what it counts of its own work. */
struct loop {
	int epfd, sigfd, timerfd;
	int retryfd;                  /* one-shot, CLOCK_BOOTTIME: a busy move's next try */
	uint64_t retry_at;
	bool status_paused;           /* this second's answers are spent: not watched */
	bool stop;                    /* SIGTERM or SIGINT read */
	uint64_t dropped_seen;        /* events__dropped() when last read: a gap since, /proc fills it */
	uint64_t exec_lost_seen;      /* execmap__lost() when last read: likewise */
	bool relist_wanted;           /* the index lost changes: a listing is due */
	uint64_t relisted_ns;         /* CLOCK_BOOTTIME of the last listing after start */
	struct loop_stats stats;      /* what it counts of its own work: its report reads them */
	struct report *report;        /* the status answers and the metrics */
};

static int loop_add(int epfd, int fd, uint32_t id)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = id };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

enum { SRC_EVENTS, SRC_SIGNAL, SRC_TIMER, SRC_RETRY, SRC_INOTIFY, SRC_STATUS, SRC_COPIES,
       SRC_MIRRORS, SRC_EXECMAP, SRC_ASKING };

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

void daemon__block_signals(void)
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
	err = err ?: loop_add(l->epfd, instance__asking_fd(d->inst), SRC_ASKING);
	err = err ?: loop_add(l->epfd, store__copy_fd(d->store), SRC_COPIES);
	if (d->mirrors)
		err = err ?: loop_add(l->epfd, mirrors__fd(d->mirrors), SRC_MIRRORS);
	if (d->execmap)
		err = err ?: loop_add(l->epfd, execmap__fd(d->execmap), SRC_EXECMAP);
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
			l->stop = true;
		} else if (si.ssi_signo == SIGHUP) {
			daemon__reload(d);
		}
	}
}

/*
 * List the map directory when one is wanted and the last is a second old.
 * Until then the index is not exact, and every event looks on disk: slower,
 * never wrong.
 */
static void relist(struct daemon *d, struct loop *l, bool asked)
{
	struct scan_env env = daemon__scan_env(d);
	uint64_t now = clock_boot_ns();
	bool too_soon = l->relisted_ns && now - l->relisted_ns < RELIST_MIN_NS;

	if (asked) {
		/* Coalesced into one already due, or waiting for its turn. */
		if (l->relist_wanted || too_soon)
			l->stats.rescans_deferred++;
		l->relist_wanted = true;
	}
	if (!l->relist_wanted || too_soon)
		return;
	l->relist_wanted = false;
	l->relisted_ns = now;
	l->stats.rescans++;
	if (scan_maps(&env, false))
		l->relist_wanted = true;  /* again in a second */
}

/*
 * Every read of the ring buffer starts with the map directory's changes:
 * then the index (mapwatch.c) knows of every map made before those events.
 */
static void catch_up(struct daemon *d, struct loop *l)
{
	bool lost = mapwatch__drain(d->mw, daemon__on_map_change, d);

	events__consume(d->events);
	if (lost)
		relist(d, l, true);
}

/*
 * Lost process events: the table no longer matches the system; /proc is the
 * truth. The maps are the index's to tell while it is exact: a listing only
 * when it is not.
 */
static void resync(struct daemon *d, struct loop *l)
{
	struct scan_env env = daemon__scan_env(d);

	l->stats.resyncs++;
	scan_procs(&env);
	if (strcmp(mapwatch__state(d->mw), "exact") || scan_index(&env))
		relist(d, l, true);
}

/* Watch the status socket again, or not until the next second's budget. */
static void watch_status(struct daemon *d, struct loop *l, bool on)
{
	struct epoll_event e = { .events = on ? EPOLLIN : 0, .data.u32 = SRC_STATUS };

	if (!epoll_ctl(l->epfd, EPOLL_CTL_MOD, instance__fd(d->inst), &e))
		l->status_paused = !on;
}

/*
 * The kernel's mmap reports, after the process events queued before them:
 * the rings' ends are marked first, then the process events read, then the
 * reports up to the marks, so a new process is in the table before its
 * first code is counted. Records the ring lost leave a gap that a pass over
 * /proc fills.
 */
static void read_exec_maps(struct daemon *d, struct loop *l)
{
	uint64_t lost;

	if (!d->execmap)
		return;
	execmap__mark(d->execmap);
	catch_up(d, l);
	execmap__consume(d->execmap);
	lost = execmap__lost(d->execmap);
	if (lost != l->exec_lost_seen) {
		pr_warn("exec maps: %llu mmap reports lost (ring full); reading /proc/<pid>/maps again",
			(unsigned long long)(lost - l->exec_lost_seen));
		l->exec_lost_seen = lost;
		jitscan__pass(d->jitscan, d->policy);
	}
}

/* The report of the agent's pieces and of the loop's own counters: what the status and the metrics read. */
static int report_open(struct daemon *d, struct loop *l)
{
	const struct report_pieces p = {
		.map_dir = d->cfg->map_dir, .map_dir_fd = d->map_dir_fd,
		.archive_dir = d->cfg->archive_dir, .ns_map_dir = d->cfg->ns_map_dir,
		.dry_run = d->cfg->dry_run,
		.exec_source = execmap_source_name(d->exec_src), .exec_probe = d->exec_probe,
		.policy = d->policy, .events = d->events, .mw = d->mw, .ar = d->ar,
		.mirrors = d->mirrors, .execmap = d->execmap, .jitscan = d->jitscan,
		.holds = d->holds, .jitdumps = d->jitdumps, .inst = d->inst, .metrics = d->metrics,
	};

	l->report = report__new(&p, &l->stats);
	return l->report ? 0 : -errno;
}

/* A status client's request (report/instance.h): answered from the report. */
static size_t answer_request(void *ctx, const struct status_request *rq, char *buf, size_t len)
{
	return report__answer(ctx, rq, buf, len);
}

static void on_tick(struct daemon *d, struct loop *l)
{
	uint64_t expirations, dropped;

	if (read(l->timerfd, &expirations, sizeof(expirations)) < 0)
		return;
	/* Events that needed no wake-up (bpf/) are read here at the latest. */
	mapwatch__check(d->mw);
	catch_up(d, l);
	dropped = events__dropped(d->events);
	if (dropped != l->dropped_seen) {
		pr_warn("bpf: %llu events lost (ring buffer full); resyncing from /proc",
			(unsigned long long)(dropped - l->dropped_seen));
		l->dropped_seen = dropped;
		resync(d, l);
	}
	relist(d, l, false);
	if (l->status_paused && instance__budget(d->inst, clock_mono_ns()))
		watch_status(d, l, true);
	/* A client that promised a request and sent none is let go. */
	instance__serve_asking(d->inst, clock_mono_ns(), answer_request, l->report);
	read_exec_maps(d, l);
	holds__tick(d->holds);
	if (d->jitscan)
		jitscan__tick(d->jitscan, d->policy, clock_boot_ns());
	/* Before the policy's tick: a producer's map is there when its JIT code is judged. */
	if (d->jitdumps)
		jitdumps__tick(d->jitdumps);
	policy__tick(d->policy, clock_boot_ns());
	if (d->mirrors)
		mirrors__poll(d->mirrors, clock_boot_ns());
	/* Rendered here, in the loop's thread: the HTTP thread only sends what was published. */
	report__metrics(l->report);
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
	catch_up(d, l);
	holds__tick(d->holds);
	policy__tick(d->policy, clock_boot_ns());
}

static void on_status(struct daemon *d, struct loop *l)
{
	unsigned int max = instance__budget(d->inst, clock_mono_ns());
	char text[32768];
	size_t n;

	if (!max) {
		watch_status(d, l, false);
		return;
	}
	n = report__status(l->report, text, sizeof(text));
	instance__serve(d->inst, text, n, max, clock_mono_ns(), answer_request, l->report);
}

int daemon__run(struct daemon *d, uint64_t started_ns)
{
	struct scan_env env = daemon__scan_env(d);
	struct loop l = {
		.epfd = -1, .sigfd = -1, .timerfd = -1, .retryfd = -1, .retry_at = UINT64_MAX,
		.stats.started_ns = started_ns,
	};
	struct epoll_event evs[8];
	int n, i, err;

	err = loop_open(d, &l);
	err = err ?: report_open(d, &l);
	if (err) {
		pr_err("event loop: %s", strerror(-err));
		goto close_loop;
	}
	/* BPF is attached and the directory watched: what happens now is queued while we catch up. */
	scan_procs(&env);
	scan_maps(&env, true);
	if (d->jitscan)
		jitscan__pass(d->jitscan, d->policy);
	/* A scrape before the first tick finds the counters, not an empty page. */
	report__metrics(l.report);
	pr_info("tracking %zu processes; %zu exited processes' maps retained",
		policy__processes(d->policy), policy__retained(d->policy));

	while (!l.stop) {
		n = epoll_wait(l.epfd, evs, 8, -1);
		if (n < 0 && errno != EINTR) {
			err = -errno;
			pr_err("epoll: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case SRC_EVENTS: catch_up(d, &l); break;
			case SRC_SIGNAL: on_signal(d, &l); break;
			case SRC_TIMER: on_tick(d, &l); break;
			case SRC_RETRY: on_retry(d, &l); break;
			case SRC_INOTIFY: catch_up(d, &l); break;
			case SRC_STATUS: on_status(d, &l); break;
			case SRC_COPIES: store__drain_copies(d->store, daemon__on_copy_done, d); break;
			case SRC_MIRRORS: mirrors__on_inotify(d->mirrors, clock_boot_ns()); break;
			case SRC_EXECMAP: read_exec_maps(d, &l); break;
			case SRC_ASKING:
				instance__serve_asking(d->inst, clock_mono_ns(), answer_request, l.report);
				break;
			}
		}
		arm_retry(d, &l);
	}
close_loop:
	report__free(l.report);
	loop_close(&l);
	return err;
}

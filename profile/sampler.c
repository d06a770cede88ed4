/*
 * Sampling: a CPU-clock perf event per CPU at the interval, each running
 * profile.bpf.c's on_sample(), which counts stacks in the kernel. Process
 * events (fork, exec, exit of profiled processes) come over a ring buffer:
 * their mappings are read at once and again while they load libraries and
 * make JIT code, so that a process gone by the report is still named. The
 * whole host (-a) churns too fast to read every process: there a process
 * image is read at its first sample, and only those sampled are followed. At a
 * flush the samples turn to the other of two count maps, and the first is
 * read, handed to the callback, and cleared.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "profile.skel.h"
#include "symbolizer.h"
#include "profile_event.h"

#define INTERVAL_MS_DEFAULT 10
#define STACKS_DEFAULT (1u << 14)
/* A process's mappings are read again this long after an exec, then this often. */
#define REREAD_FIRST_NS (50ull * 1000000)
#define REREAD_EVERY_NS (1000ull * 1000000)
/* Processes sampled that no event told of (-a: those running before the start) are looked for this often. */
#define DISCOVER_EVERY_NS (500ull * 1000000)

struct tracked {
	pid_t pid;
	uint64_t start_ticks;
	uint64_t next_ns;          /* CLOCK_MONOTONIC: read its mappings again then */
	uint64_t every_ns;
	uint64_t final_read;       /* the flush that read it last, + 1 */
	uint32_t image;            /* its image now: execs since the profile began */
	bool gone;
	uint32_t gone_turn;        /* the period it was found gone in: forgotten at a later turn */
};

struct perfmap_profile {
	struct profile_bpf *skel;
	struct bpf_link **links;   /* one per CPU */
	int *pfds;
	int ncpus;
	struct ring_buffer *rb;
	struct perfmap_symbolizer *sym;
	perfmap_profile_cb cb;
	void *data;
	bool all;
	bool keep_maps;            /* read a process's map at its exit, for the report */
	struct tracked *t;
	size_t nt, capt;
	size_t *idx;               /* @t's index + 1 by (pid, start): open addressing */
	size_t idx_cap;
	struct perfmap_profile_stats stats;
	uint64_t *ips;
	struct profile_key *key, *next;   /* two keys of a counts map, for walking it */
	uint32_t period;           /* which counts map the samples go to now (profile.bpf.c) */
	uint64_t discover_ns;      /* CLOCK_MONOTONIC: next look for processes sampled, unknown */
	uint64_t discover_lost;    /* process events lost by the last look: a look only if more */
	uint64_t start_boot_ns;    /* CLOCK_BOOTTIME at the start: a process started later forked then */
	uint64_t flushes;
	uint64_t seen;             /* processes tracked since the start, those forgotten too */
	struct agent_hold *hold;   /* perfmapd's hold socket; NULL: none */
};

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* "i<ms>": the interval; any other letter is an error naming it. */
static int parse_mode(const char *mode, uint64_t *interval_ms)
{
	char *end;

	*interval_ms = INTERVAL_MS_DEFAULT;
	for (const char *m = mode ? mode : ""; *m;) {
		if (*m != 'i')
			return -EINVAL;
		*interval_ms = strtoull(m + 1, &end, 10);
		if (end == m + 1 || !*interval_ms || *interval_ms > 60000)
			return -EINVAL;
		m = end;
	}
	return 0;
}

static size_t slot_of(size_t cap, pid_t pid, uint64_t start_ticks)
{
	return (size_t)(((uint64_t)pid * 0x9e3779b97f4a7c15ull) ^ start_ticks) % cap;
}

static struct tracked *tracked_find(const struct perfmap_profile *p, pid_t pid, uint64_t start_ticks)
{
	size_t i;

	if (!p->idx_cap)
		return NULL;
	for (i = slot_of(p->idx_cap, pid, start_ticks); p->idx[i]; i = (i + 1) % p->idx_cap) {
		struct tracked *t = &p->t[p->idx[i] - 1];

		if (t->pid == pid && t->start_ticks == start_ticks)
			return t;
	}
	return NULL;
}

/* @p->t's entries into @idx, an index of @cap slots: at most half full. */
static void index_fill(const struct perfmap_profile *p, size_t *idx, size_t cap)
{
	size_t i;

	for (size_t k = 0; k < p->nt; k++) {
		for (i = slot_of(cap, p->t[k].pid, p->t[k].start_ticks); idx[i]; i = (i + 1) % cap)
			;
		idx[i] = k + 1;
	}
}

/* The index of @p->t by (pid, start), rebuilt twice as large when it would be more than half full. */
static int index_grow(struct perfmap_profile *p)
{
	size_t cap = p->idx_cap ? p->idx_cap * 2 : 256;
	size_t *idx = calloc(cap, sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	index_fill(p, idx, cap);
	free(p->idx);
	p->idx = idx;
	p->idx_cap = cap;
	return 0;
}

static struct tracked *track(struct perfmap_profile *p, pid_t pid, uint64_t start_ticks)
{
	struct tracked *t = tracked_find(p, pid, start_ticks), *nt;
	size_t i;

	if (t)
		return t;
	if (p->nt == p->capt) {
		size_t cap = p->capt ? p->capt * 2 : 64;

		nt = realloc(p->t, cap * sizeof(*nt));
		if (!nt)
			return NULL;
		p->t = nt;
		p->capt = cap;
	}
	if (2 * (p->nt + 1) > p->idx_cap && index_grow(p))
		return NULL;
	p->t[p->nt] = (struct tracked){ .pid = pid, .start_ticks = start_ticks };
	for (i = slot_of(p->idx_cap, pid, start_ticks); p->idx[i]; i = (i + 1) % p->idx_cap)
		;
	p->idx[i] = ++p->nt;
	p->seen++;
	/* Sampled, or about to be: its map is the agent's to keep until its stacks are named. */
	perfmap_prof__agent_hold_add(p->hold, pid, start_ticks);
	return &p->t[p->nt - 1];
}

/*
 * Gone: forgotten once a flush has named its stacks, at the first turn of
 * the count maps after this one (samples it left in the map the turn just
 * began are named at the next flush).
 */
static void mark_gone(struct perfmap_profile *p, struct tracked *t)
{
	if (t->gone)
		return;
	t->gone = true;
	t->gone_turn = p->period;
}

/*
 * The image (@pid, @start_ticks) runs now, as on_exec() counted its execs:
 * 0 for none since the start; -1 when the kernel keeps no count for it (it
 * exited, or the LRU map let it go).
 */
static int64_t image_now(const struct perfmap_profile *p, pid_t pid, uint64_t start_ticks)
{
	struct profile_image im;
	__u32 key = (__u32)pid;

	if (bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.images), &key, &im))
		return errno == ENOENT ? 0 : -1;
	return perfmap_prof__ticks_of_ns(im.start_ns) == start_ticks ? im.n : 0;
}

/*
 * Read @t's mappings as those of its image @t->image, while that image is
 * the one running: an exec the events have not told of yet must not lend
 * the next image's mappings to this one's samples. -ESRCH: it is gone;
 * -ESTALE: that image is over (nothing read, what was read kept), or an
 * exec came during the read (what was read is dropped: no wrong name).
 */
static int read_image(struct perfmap_profile *p, struct tracked *t, pid_t ppid)
{
	int err;

	if (image_now(p, t->pid, t->start_ticks) != t->image)
		return -ESTALE;
	err = perfmap_prof__symbolizer_read(p->sym, t->pid, t->start_ticks, t->image, ppid);
	if (err || image_now(p, t->pid, t->start_ticks) == t->image)
		return err;
	perfmap_prof__symbolizer_unread(p->sym, t->pid, t->start_ticks, t->image);
	return -ESTALE;
}

/*
 * A child forked after the start, sampled, and gone before it could be
 * read: its code is named with its parent's mappings, read now if they
 * were not, when the parent is the same image (no exec since the start,
 * so none since the fork) and no later process at its pid.
 */
static void read_parent(struct perfmap_profile *p, pid_t child, uint64_t child_ticks, pid_t ppid)
{
	struct perfmap_proc_stat st;
	struct tracked *t;

	if (perfmap__proc_stat_read(ppid, &st) || st.start_ticks > child_ticks ||
	    image_now(p, ppid, st.start_ticks) != 0)
		return;
	t = track(p, ppid, st.start_ticks);
	if (!t)
		return;
	if (!t->next_ns) {
		if (read_image(p, t, 0) == -ESRCH) {
			mark_gone(p, t);
			return;
		}
		t->next_ns = mono_ns() + REREAD_EVERY_NS;
		t->every_ns = REREAD_EVERY_NS;
	}
	perfmap_prof__symbolizer_forked(p->sym, child, child_ticks, ppid);
}

/* -a: a process image sampled for the first time, read while it runs, and followed from now. */
static void sampled(struct perfmap_profile *p, const struct profile_event *e, uint64_t ticks)
{
	struct tracked *t = tracked_find(p, (pid_t)e->tgid, ticks);
	pid_t ppid = 0;
	int err;

	/* Told again (the kernel's told map let it go), or an image before the one read: nothing new. */
	if (t && (t->gone || e->image < t->image || (e->image == t->image && t->next_ns)))
		return;
	if (!t && !(t = track(p, (pid_t)e->tgid, ticks)))
		return;
	t->image = e->image;
	/* Forked after the start, no exec since: its parent's mappings are its own until it is read. */
	if (!e->image && e->start_ns >= p->start_boot_ns)
		ppid = (pid_t)e->ppid;
	err = read_image(p, t, ppid);
	if (err == -ESRCH) {
		if (ppid)
			read_parent(p, t->pid, ticks, ppid);
		mark_gone(p, t);
	}
	/* Sampled: it has run a while, its libraries are likely in. */
	t->next_ns = mono_ns() + REREAD_EVERY_NS;
	t->every_ns = REREAD_EVERY_NS;
}

static int on_event(void *ctx, void *data, size_t size)
{
	const struct profile_event *e = data;
	struct perfmap_profile *p = ctx;
	uint64_t ticks;
	struct tracked *t;

	if (size < sizeof(*e))
		return 0;
	ticks = perfmap_prof__ticks_of_ns(e->start_ns);
	if (e->type == PROFILE_EV_SAMPLED) {
		sampled(p, e, ticks);
		return 0;
	}
	t = track(p, (pid_t)e->tgid, ticks);
	if (!t)
		return 0;
	switch (e->type) {
	case PROFILE_EV_FORK:
		read_image(p, t, (pid_t)e->ppid);
		t->next_ns = mono_ns() + REREAD_EVERY_NS;
		t->every_ns = REREAD_EVERY_NS;
		break;
	case PROFILE_EV_EXEC:
		/* The new image's own mappings; the old image's stay for its samples. */
		t->image = e->image;
		read_image(p, t, 0);
		/* The loader maps its libraries after the exec: read again soon. */
		t->next_ns = mono_ns() + REREAD_FIRST_NS;
		t->every_ns = REREAD_FIRST_NS;
		break;
	case PROFILE_EV_EXIT:
		/* What its jitdump says last (read from the fd kept): no agent needed for it. */
		perfmap_prof__symbolizer_exited(p->sym, t->pid, ticks);
		/* Its map, read now while perfmapd keeps it at its path, stays until the report. */
		if (p->keep_maps)
			perfmap_prof__symbolizer_keep_map(p->sym, t->pid, ticks);
		mark_gone(p, t);
		break;
	}
	return 0;
}

/* Read again the mappings of live processes whose time came: JIT code and libraries come later. */
static void reread(struct perfmap_profile *p)
{
	/* The whole host: fewer reads a second; the last read before the report catches up. */
	uint64_t now = mono_ns(), most = p->all ? 5 * REREAD_EVERY_NS : REREAD_EVERY_NS;

	for (size_t i = 0; i < p->nt; i++) {
		struct tracked *t = &p->t[i];
		int err;

		if (t->gone || !t->next_ns || now < t->next_ns)
			continue;
		err = read_image(p, t, 0);
		if (err == -ESRCH) {
			mark_gone(p, t);
			continue;
		}
		t->every_ns = t->every_ns * 4 > most ? most : t->every_ns * 4;
		t->next_ns = now + t->every_ns;
	}
}

static int open_cpus(struct perfmap_profile *p, uint64_t interval_ms)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = interval_ms * 1000000ull,
	};
	int opened = 0, fd, err = 0;

	p->ncpus = libbpf_num_possible_cpus();
	if (p->ncpus <= 0)
		return -EINVAL;
	p->pfds = calloc((size_t)p->ncpus, sizeof(*p->pfds));
	p->links = calloc((size_t)p->ncpus, sizeof(*p->links));
	if (!p->pfds || !p->links)
		return -ENOMEM;
	for (int cpu = 0; cpu < p->ncpus; cpu++) {
		p->pfds[cpu] = -1;
		fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV)
				continue;  /* a CPU offline */
			err = -errno;
			break;
		}
		p->pfds[cpu] = fd;
		p->links[cpu] = bpf_program__attach_perf_event(p->skel->progs.on_sample, fd);
		if (!p->links[cpu]) {
			err = -errno;
			break;
		}
		/* The link owns the event now, and closes it when destroyed. */
		p->pfds[cpu] = -1;
		opened++;
	}
	return err ? err : opened ? 0 : -ENODEV;
}

static int add_targets(struct perfmap_profile *p, const pid_t *pids, size_t n)
{
	int fd = bpf_map__fd(p->skel->maps.targets), err;
	struct perfmap_proc_stat st;
	__u8 one = 1;

	for (size_t i = 0; i < n; i++) {
		__u32 key = (__u32)pids[i];

		err = perfmap__proc_stat_read(pids[i], &st);
		if (err)
			return err;
		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY))
			return -errno;
		perfmap_prof__symbolizer_read(p->sym, pids[i], st.start_ticks, 0, 0);
		if (!track(p, pids[i], st.start_ticks))
			return -ENOMEM;
		p->t[p->nt - 1].next_ns = mono_ns() + REREAD_EVERY_NS;
		p->t[p->nt - 1].every_ns = REREAD_EVERY_NS;
	}
	return 0;
}

struct perfmap_profile *perfmap_profile_start(const struct perfmap_profile_opts *opts,
					      const char *mode, perfmap_profile_cb cb, void *data)
{
	struct perfmap_symbolizer_opts so = { .sz = sizeof(so) };
	struct perfmap_profile *p = NULL;
	uint64_t interval_ms;
	uint32_t max;
	int err;

	err = parse_mode(mode, &interval_ms);
	if (err)
		goto stop_profile;
	err = -EINVAL;
	/* The options as far as the caller's size of them goes: a later field it lacks is 0. */
	if (!opts || opts->sz < offsetof(struct perfmap_profile_opts, map_dir) || !cb ||
	    (!opts->all && !opts->npids))
		goto stop_profile;
	err = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto stop_profile;
	p->cb = cb;
	p->data = data;
	p->all = opts->all;
	p->keep_maps = !opts->no_keep_maps;
	/* No agent there is no error: maps are read as perf reads them. */
	if (opts->sz > offsetof(struct perfmap_profile_opts, hold_socket) && opts->hold_socket)
		perfmap_prof__agent_hold_open(opts->hold_socket, &p->hold);
	so.map_dir = opts->map_dir;
	so.archive_dir = opts->archive_dir;
	so.states_file = opts->states_file;
	p->sym = perfmap_symbolizer_new(&so);
	p->key = calloc(1, sizeof(*p->key));
	p->next = calloc(1, sizeof(*p->next));
	p->ips = calloc(PROFILE_KDEPTH + PROFILE_DEPTH, sizeof(uint64_t));
	if (!p->sym) {
		err = -errno;
		goto stop_profile;
	}
	if (!p->key || !p->next || !p->ips)
		goto stop_profile;
	p->skel = profile_bpf__open();
	if (!p->skel) {
		err = -errno;
		goto stop_profile;
	}
	max = opts->max_stacks ? opts->max_stacks : STACKS_DEFAULT;
	p->skel->rodata->all_tasks = opts->all;
	/* -a: a child is told of at its first sample, so the fork program would only return; not loaded. */
	if (opts->all)
		bpf_program__set_autoload(p->skel->progs.on_fork, false);
	p->skel->rodata->kernel_stacks = !opts->no_kernel;
	bpf_map__set_max_entries(p->skel->maps.counts0, max);
	bpf_map__set_max_entries(p->skel->maps.counts1, max);
	err = profile_bpf__load(p->skel);
	if (err)
		goto stop_profile;
	p->start_boot_ns = clock_ns(CLOCK_BOOTTIME);
	err = add_targets(p, opts->pids, opts->all ? 0 : opts->npids);
	if (err)
		goto stop_profile;
	err = profile_bpf__attach(p->skel);
	if (err)
		goto stop_profile;
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), on_event, p, NULL);
	if (!p->rb) {
		err = -errno;
		goto stop_profile;
	}
	err = open_cpus(p, interval_ms);
	if (err)
		goto stop_profile;
	return p;
stop_profile:
	if (p)
		p->cb = NULL;  /* nothing is handed out of a start that failed */
	perfmap_profile_stop(p);
	errno = -err;
	return NULL;
}

int perfmap_profile_fd(const struct perfmap_profile *p)
{
	return p && p->rb ? ring_buffer__epoll_fd(p->rb) : -EINVAL;
}

/* The counts map of @period's parity. */
static int counts_fd(const struct perfmap_profile *p, uint32_t period)
{
	return bpf_map__fd(period & 1 ? p->skel->maps.counts1 : p->skel->maps.counts0);
}

/* Processes in the counts that nothing told of (their event lost): read while they are there, and kept up. */
static void discover(struct perfmap_profile *p)
{
	int cfd = counts_fd(p, p->period);
	struct profile_key *key = p->key, *next = p->next, *prev = NULL, *tmp;
	uint64_t now = mono_ns(), ticks, lost = p->skel->bss->lost_events;
	struct tracked *t;

	/*
	 * Every process sampled was told of (-a: at its first sample; else at
	 * its fork or by the caller) unless the ring buffer lost that: only
	 * then is the counts map walked, each key 1.6 KiB hashed at each step.
	 */
	if (now < p->discover_ns || lost == p->discover_lost)
		return;
	p->discover_lost = lost;
	p->discover_ns = now + DISCOVER_EVERY_NS;
	while (!bpf_map_get_next_key(cfd, prev, next)) {
		tmp = key;
		key = next;
		next = tmp;
		prev = key;
		ticks = perfmap_prof__ticks_of_ns(key->start_ns);
		if (tracked_find(p, (pid_t)key->tgid, ticks))
			continue;
		t = track(p, (pid_t)key->tgid, ticks);
		if (!t)
			return;
		t->image = key->image;
		if (read_image(p, t, 0) == -ESRCH)
			mark_gone(p, t);
		t->next_ns = now + REREAD_EVERY_NS;
		t->every_ns = REREAD_EVERY_NS;
	}
}

int perfmap_profile_poll(struct perfmap_profile *p, int timeout_ms)
{
	int n;

	if (!p || !p->rb)
		return -EINVAL;
	n = ring_buffer__poll(p->rb, timeout_ms);
	/* Events sent with no wakeup (-a's exits) are read at each poll, woken or not. */
	if (n >= 0)
		ring_buffer__consume(p->rb);
	reread(p);
	discover(p);
	if (perfmap_prof__agent_hold_retry(p->hold))
		for (size_t i = 0; i < p->nt; i++)
			if (!p->t[i].gone)
				perfmap_prof__agent_hold_add(p->hold, p->t[i].pid, p->t[i].start_ticks);
	perfmap_prof__agent_hold_flush(p->hold);
	return n < 0 && n != -EINTR ? n : 0;
}

/*
 * Processes gone whose stacks were named at this flush: the agent need not
 * keep their maps, nor the profile what it read of them. A profile per
 * period for days (--every) holds only the processes that live.
 */
static void forget_gone(struct perfmap_profile *p)
{
	size_t kept = 0, *idx;

	perfmap_prof__agent_hold_flush(p->hold);
	if (!p->idx_cap)
		return;
	/* The new index first: without memory nothing is forgotten now, and a later flush does it. */
	idx = calloc(p->idx_cap, sizeof(*idx));
	if (!idx)
		return;
	for (size_t i = 0; i < p->nt; i++) {
		struct tracked *t = &p->t[i];

		/*
		 * Gone in this turn: it may have samples in the map now counting.
		 * A parent whose unread children name their code with its mappings
		 * waits for them.
		 */
		if (!t->gone || t->gone_turn == p->period ||
		    perfmap_prof__symbolizer_forget(p->sym, t->pid, t->start_ticks) == -EBUSY) {
			p->t[kept++] = *t;
			continue;
		}
		perfmap_prof__agent_hold_release(p->hold, t->pid, t->start_ticks);
	}
	p->nt = kept;
	index_fill(p, idx, p->idx_cap);
	free(p->idx);
	p->idx = idx;
	perfmap_prof__agent_hold_flush(p->hold);
}

/* Every stack counted in @cfd to the callback; the counts cleared when @clear. */
static int hand_out(struct perfmap_profile *p, int cfd, bool clear)
{
	struct profile_key *key = p->key, *next = p->next, *prev = NULL, *tmp;
	struct perfmap_profile_stack st;
	char comm[PROFILE_COMM_LEN + 1];
	uint32_t nu, nk, kept;
	uint64_t count;

	ring_buffer__consume(p->rb);
	perfmap_prof__agent_hold_flush(p->hold);
	/* The latest mappings of each process still there: JIT code made since the last read. */
	while (!bpf_map_get_next_key(cfd, prev, next)) {
		struct tracked *t;
		int err;

		tmp = key;
		key = next;
		next = tmp;
		prev = key;
		t = track(p, (pid_t)key->tgid, perfmap_prof__ticks_of_ns(key->start_ns));
		/* Only the image that runs now can be read. */
		if (!t || t->gone || t->final_read == p->flushes + 1 || key->image != t->image)
			continue;
		t->final_read = p->flushes + 1;
		err = read_image(p, t, 0);
		if (err == -ESRCH)
			mark_gone(p, t);
	}
	p->flushes++;
	prev = NULL;
	while (!bpf_map_get_next_key(cfd, prev, next)) {
		tmp = key;
		key = next;
		next = tmp;
		prev = key;
		if (bpf_map_lookup_elem(cfd, key, &count))
			continue;
		/*
		 * Read, then cleared: a key a late sample made after the walk
		 * stays for this map's next turn. Without its predecessor the
		 * walk goes on from the map's first key: the unread ones.
		 */
		if (clear)
			bpf_map_delete_elem(cfd, key);
		nk = key->nkernel < PROFILE_KDEPTH ? key->nkernel : PROFILE_KDEPTH;
		nu = key->nuser < PROFILE_DEPTH ? key->nuser : PROFILE_DEPTH;
		memcpy(p->ips, key->kips, nk * sizeof(uint64_t));
		/* A frame-pointer walk through code built without them ends in a 0 (or a small) address: no frame. */
		kept = 0;
		for (uint32_t i = 0; i < nu; i++)
			if (key->uips[i] >= 4096)
				p->ips[nk + kept++] = key->uips[i];
		nu = kept;
		memcpy(comm, key->comm, PROFILE_COMM_LEN);
		comm[PROFILE_COMM_LEN] = '\0';
		st = (struct perfmap_profile_stack){
			.pid = (pid_t)key->tgid,
			.start_ticks = perfmap_prof__ticks_of_ns(key->start_ns),
			.image = key->image, .comm = comm, .ips = p->ips, .nips = nk + nu, .nkernel = nk, .samples = count,
		};
		p->stats.samples += count;
		if (p->cb)
			p->cb(p->data, &st);
	}
	if (clear)
		forget_gone(p);
	return 0;
}

int perfmap_profile_flush(struct perfmap_profile *p)
{
	uint32_t old;

	if (!p || !p->skel)
		return -EINVAL;
	/*
	 * The samples go to the other map from now on: this one is read and
	 * cleared with no sample lost between. A sample that read the old
	 * period just before has long been counted by the time the reading,
	 * which looks at /proc first, gets to its key.
	 */
	old = p->period++;
	__atomic_store_n(&p->skel->bss->period, p->period, __ATOMIC_SEQ_CST);
	return hand_out(p, counts_fd(p, old), true);
}

void perfmap_profile_stats(const struct perfmap_profile *p, struct perfmap_profile_stats *st)
{
	*st = p->stats;
	if (p->skel && p->skel->bss) {
		st->lost_keys = p->skel->bss->lost_keys;
		st->taken = p->skel->bss->taken;
		st->lost_events = p->skel->bss->lost_events;
	}
	st->processes = p->seen;
	st->tracked = p->nt;
	perfmap_prof__agent_hold_stats(p->hold, &st->held, &st->holds_dropped, &st->agent_holds);
}

struct perfmap_symbolizer *perfmap_profile_symbolizer(struct perfmap_profile *p)
{
	return p ? p->sym : NULL;
}

static void detach(struct perfmap_profile *p)
{
	for (int cpu = 0; cpu < p->ncpus; cpu++) {
		bpf_link__destroy(p->links ? p->links[cpu] : NULL);
		if (p->pfds && p->pfds[cpu] >= 0)
			close(p->pfds[cpu]);
	}
	free(p->links);
	free(p->pfds);
	p->links = NULL;
	p->pfds = NULL;
	p->ncpus = 0;
}

int perfmap_profile_detach(struct perfmap_profile *p)
{
	if (!p)
		return -EINVAL;
	detach(p);
	return 0;
}

int perfmap_profile_stop(struct perfmap_profile *p)
{
	int err = 0;

	if (!p)
		return 0;
	/* Sampling ends first: the counts read are the profile's last. */
	detach(p);
	/* The map now counting, and what late samples left in the other after its turn. */
	if (p->skel && p->rb) {
		err = hand_out(p, counts_fd(p, p->period), false);
		if (!err && p->period)
			err = hand_out(p, counts_fd(p, p->period + 1), false);
	}
	ring_buffer__free(p->rb);
	profile_bpf__destroy(p->skel);
	perfmap_symbolizer_free(p->sym);
	/* The stacks are named: the connection's end releases every hold. */
	perfmap_prof__agent_hold_free(p->hold);
	free(p->t);
	free(p->idx);
	free(p->key);
	free(p->next);
	free(p->ips);
	free(p);
	return err;
}

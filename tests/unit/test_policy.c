/*
 * policy: every decision perfmapd makes about a map, driven through a fake
 * map store and a fake clock, without root, BPF or a file system.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfmap.h"
#include "lib/log.h"
#include "policy/jitregions.h"
#include "policy/policy.h"
#include "policy/retention.h"
#include "testutil.h"

#define NPIDS 64
#define MS 1000000ull
#define SEC 1000000000ull
#define TICK (10 * MS)   /* USER_HZ 100: what start_ticks count */
#define CODE 0x7f0000000000ull   /* where the processes' JIT code is mapped */

/* ---- the fake store: maps by pid, and what each operation did ---- */

struct fake_map {
	bool exists;
	struct map_info mi;
	enum map_entries entries;  /* what the process's mappings say of it */
};

static struct fake {
	struct fake_map map[NPIDS];
	bool alive[NPIDS];
	uint64_t execd[NPIDS];     /* when the pid last exec'd; 0 never */
	bool same_image;
	bool taken[NPIDS];         /* another process holds the pid by now */
	int busy;                  /* archive: -EBUSY this many more times */
	int archive_err;           /* archive: fails with this, when not 0 */
	int full;                  /* archive: -EAGAIN (queue full) this many more times */
	int append_eagain;         /* copy_append: -EAGAIN this many more times */
	int create_err;            /* copy_create: fails with this, when not 0 */
	bool create_refused;       /* ... as a refusal of what is at the path */
	uint64_t now;              /* the fake clock, CLOCK_BOOTTIME */
	ino_t next_ino;
	/* What was done. */
	int archived[NPIDS];       /* 1 + enum archive_reason of the last move; 0 none */
	int archive_calls, creates, appends, entries_calls, looks;
	int squatted_moves;        /* archive() with ARCHIVE_F_SQUATTED */
	/* The worker: the last copy sent to it, and what settling one does. */
	int defer_err;             /* copy_defer fails with this, when not 0 */
	bool queue_of_one;         /* copy_defer: -EAGAIN (the uid's share) while one is pending */
	int defers, settles;
	bool settle_shows;         /* settling finds the copy at the path already */
	bool settle_running;       /* settling finds the copy being made: -EINPROGRESS */
	uint64_t ticket;           /* of the last copy deferred */
	enum copy_op op;
	struct copy_req rq;
	struct map_info rq_parent;
	bool pending;              /* deferred, not done nor settled */
	uint64_t data[NPIDS];      /* bytes of data in a map when not its blocks (compressed); 0: its blocks */
	/* Processes in other namespaces: where attaching finds each map (1 + enum ns_place; 0: refused). */
	int ns_place[NPIDS];
	bool mirrored[NPIDS];      /* attached as mirrored, not ended */
	int ns_attaches, ns_syncs, ns_copies, ns_execs, ns_ends;
	pid_t ns_copy_parent;
	uint64_t ns_exec_at;
	bool ns_only_copy;         /* ns_exec: the mirror held only the fork's copy, unwritten */
	ino_t ns_new_mirror_ino;   /* ns_exec: the new mirror it made, at the path after the move */
	pid_t ns_kin[4];           /* ns_attach: the ancestors it was given */
	int syncs_before_archive;  /* ns_syncs when the last archive() was called */
} F;

static int fake_look(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	(void)ctx;
	(void)at_ns;
	F.looks++;
	if (pid <= 0 || pid >= NPIDS || !F.map[pid].exists)
		return -ENOENT;
	*mi = F.map[pid].mi;
	mi->seen_ns = F.now;
	return 0;
}

static enum map_entries fake_entries(void *ctx, pid_t pid, uint64_t start_ticks,
				     uint64_t image_ns, const struct map_info *mi)
{
	(void)ctx;
	(void)start_ticks;
	(void)mi;
	F.entries_calls++;
	/* As the store does: a later image's mappings tell nothing. */
	if (image_ns != UINT64_MAX && F.execd[pid] > image_ns)
		return ENTRIES_UNKNOWN;
	return F.map[pid].entries;
}

static bool fake_execd_since(void *ctx, pid_t pid, uint64_t since_ns)
{
	(void)ctx;
	return F.execd[pid] && F.execd[pid] >= since_ns;
}

static bool fake_held(void *ctx, pid_t pid, uint64_t start_ticks)
{
	(void)ctx;
	(void)start_ticks;
	return F.alive[pid];
}

static bool fake_same_image(void *ctx, pid_t child, pid_t parent)
{
	(void)ctx;
	(void)child;
	(void)parent;
	return F.same_image;
}

static void put_map(pid_t pid, uint64_t size, struct span born, enum map_entries entries)
{
	F.map[pid].exists = true;
	F.map[pid].mi = (struct map_info){ .dev = 1, .ino = ++F.next_ino, .size = size,
					   .uid = 1000, .born = born };
	F.map[pid].entries = entries;
}

/* What a copy of the parent's map reads and writes: its data, not its holes. */
static uint64_t fake_data(const struct copy_req *rq)
{
	const struct map_info *pm = rq->parent_map;

	if (F.data[rq->parent])
		return F.data[rq->parent];
	return pm->disk_bytes && pm->disk_bytes < pm->size ? pm->disk_bytes : pm->size;
}

static int fake_copy_create(void *ctx, const struct copy_req *rq, struct copy_result *res)
{
	(void)ctx;
	F.creates++;
	/* As mapfile.c: more data than allowed stops the copy. */
	if (rq->max_data && fake_data(rq) > rq->max_data)
		return -EFBIG;
	/* In the real store's order: whose pid it is, then what is at the path. */
	if (F.taken[rq->child])
		return -ESRCH;
	if (F.map[rq->child].exists)
		return -EEXIST;
	if (F.create_err) {
		res->why = F.create_refused ? "is a symlink, refused" : "cannot be filled";
		res->refused = F.create_refused;
		return F.create_err;
	}
	put_map(rq->child, rq->parent_map->size, span_at(F.now), ENTRIES_MAPPED);
	res->kind = COPY_CREATED;
	res->entries = 3;
	/* As mapfile.c: the data, not the holes. */
	res->bytes = fake_data(rq);
	res->map = F.map[rq->child].mi;
	return 0;
}

static int fake_copy_append(void *ctx, const struct copy_req *rq, struct copy_result *res)
{
	(void)ctx;
	F.appends++;
	if (F.taken[rq->child])
		return -ESRCH;
	/* As mapfile.c: the hardened open refuses a trap, and names it. */
	if (F.map[rq->child].mi.refused) {
		res->refused = true;
		res->why = perfmap_open_strerror(F.map[rq->child].mi.refused);
		res->trap_dev = F.map[rq->child].mi.dev;
		res->trap_ino = F.map[rq->child].mi.ino;
		snprintf(res->trap_name, sizeof(res->trap_name), "perf-%d.map", (int)rq->child);
		return F.map[rq->child].mi.refused;
	}
	if (F.append_eagain > 0) {
		F.append_eagain--;
		res->why = "ends in an unfinished line";
		return -EAGAIN;
	}
	F.map[rq->child].mi.size += rq->parent_map->size;
	res->kind = COPY_APPENDED;
	res->entries = 3;
	res->map = F.map[rq->child].mi;
	return 0;
}

static int fake_archive(void *ctx, pid_t pid, uint64_t start_ticks, enum archive_reason why,
			const struct map_info *expect, unsigned int flags)
{
	(void)ctx;
	(void)start_ticks;
	F.archive_calls++;
	F.syncs_before_archive = F.ns_syncs;
	if (!F.map[pid].exists)
		return -ENOENT;
	if (F.map[pid].mi.ino != expect->ino)
		return -ESTALE;
	/* As archive__move_squatted(): no lease, and queued past a full queue. */
	if ((flags & ARCHIVE_F_SQUATTED) && !F.archive_err) {
		F.squatted_moves++;
		F.map[pid].exists = false;
		F.archived[pid] = 1 + why;
		return 0;
	}
	if (F.busy > 0) {
		F.busy--;
		return -EBUSY;
	}
	if (F.full > 0) {
		F.full--;
		return -EAGAIN;
	}
	if (F.archive_err)
		return F.archive_err;
	F.map[pid].exists = false;
	F.archived[pid] = 1 + why;
	return 0;
}

static int fake_copy_defer(void *ctx, const struct copy_req *rq, enum copy_op op, uint64_t ticket)
{
	(void)ctx;
	if (F.defer_err)
		return F.defer_err;
	if (F.queue_of_one && F.pending)
		return -EAGAIN;
	F.defers++;
	F.ticket = ticket;
	F.op = op;
	F.rq = *rq;
	F.rq_parent = *rq->parent_map;
	F.rq.parent_map = &F.rq_parent;
	F.pending = true;
	return 0;
}

/* The worker makes the last deferred copy as the store would have. */
static int fake_make_deferred(struct copy_result *res)
{
	*res = (struct copy_result){ 0 };
	F.pending = false;
	return F.op == COPY_OP_CREATE ? fake_copy_create(NULL, &F.rq, res) :
					fake_copy_append(NULL, &F.rq, res);
}

static int fake_copy_settle(void *ctx, pid_t child, uint64_t ticket, struct copy_result *res)
{
	(void)ctx;
	F.settles++;
	assert_int_equal(child, F.rq.child);
	assert_true(ticket == F.ticket && F.pending);
	if (F.settle_shows)
		return fake_make_deferred(res);
	/* As the copier for a copy being made: stopped, its result drained later. */
	if (F.settle_running)
		return -EINPROGRESS;
	F.pending = false;
	return -ECANCELED;
}

static int fake_ns_attach(void *ctx, const struct ns_req *rq, enum ns_place *place)
{
	(void)ctx;
	F.ns_attaches++;
	memcpy(F.ns_kin, rq->kin, sizeof(F.ns_kin));
	/* The new mirror an exec began is at the path by the time the process is placed again. */
	if (F.ns_new_mirror_ino) {
		put_map(rq->pid, 10, span_at(F.now), ENTRIES_MAPPED);
		F.ns_new_mirror_ino = 0;
	}
	*place = F.ns_place[rq->pid] ? (enum ns_place)(F.ns_place[rq->pid] - 1) : NS_REFUSED;
	if (*place == NS_MIRRORED)
		F.mirrored[rq->pid] = true;
	return 0;
}

static void fake_ns_sync(void *ctx, pid_t pid)
{
	(void)ctx;
	(void)pid;
	F.ns_syncs++;
}

static int fake_ns_copy(void *ctx, pid_t parent, const struct ns_req *rq)
{
	(void)ctx;
	(void)rq;
	F.ns_copies++;
	F.ns_copy_parent = parent;
	return 0;
}

/* The mirror is the map at the pid's path: F.map[pid], when there is one. */
static int fake_ns_let_go(pid_t pid, struct map_info *mi)
{
	if (!F.mirrored[pid] || !F.map[pid].exists)
		return -ENOENT;
	*mi = F.map[pid].mi;
	return 0;
}

static int fake_ns_exec(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	(void)ctx;
	int err;

	F.ns_execs++;
	F.ns_exec_at = at_ns;
	err = fake_ns_let_go(pid, mi);
	if (err || F.ns_only_copy)
		return err ?: 1;
	/* As the store does: the new mirror begins at once with lines read after the exec. */
	F.ns_new_mirror_ino = ++F.next_ino;
	return 0;
}

static int fake_ns_end(void *ctx, pid_t pid, struct map_info *mi)
{
	int err;

	(void)ctx;
	F.ns_ends++;
	err = fake_ns_let_go(pid, mi);
	F.mirrored[pid] = false;
	return err;
}

static const struct mapstore_ops fake_ops = {
	.look = fake_look,
	.entries = fake_entries,
	.execd_since = fake_execd_since,
	.pid_held = fake_held,
	.same_image = fake_same_image,
	.copy_create = fake_copy_create,
	.copy_append = fake_copy_append,
	.copy_defer = fake_copy_defer,
	.copy_settle = fake_copy_settle,
	.archive = fake_archive,
	.ns_attach = fake_ns_attach,
	.ns_sync = fake_ns_sync,
	.ns_copy = fake_ns_copy,
	.ns_exec = fake_ns_exec,
	.ns_end = fake_ns_end,
};

/* ---- events ---- */

static struct policy *P;
static struct policy_config cfg;

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	cfg = (struct policy_config){ .map_dir = "/fake", .archive_dir = "/fake-archive",
				      .retention_ns = 600 * SEC, .max_map_bytes = 1 << 20 };
	P = policy__new(&cfg, (struct mapstore){ &fake_ops, NULL });
	return P ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	policy__free(P);
	P = NULL;
	return 0;
}

/* Start again with another configuration. */
static void reconfigure(const struct policy_config *c)
{
	policy__free(P);
	cfg = *c;
	P = policy__new(&cfg, (struct mapstore){ &fake_ops, NULL });
	assert_non_null(P);
}

static void send(enum policy_event_type type, pid_t pid, pid_t ppid, uint64_t start_ns,
		 uint64_t pstart_ns, uint64_t at_ns, uint32_t flags)
{
	struct policy_event ev = {
		.type = type, .flags = flags, .pid = pid, .ppid = ppid,
		.start_ticks = start_ns / TICK, .start = span_at(start_ns),
		.pstart = span_at(pstart_ns), .at = span_at(at_ns), .uid = 1000, .gid = 1000,
		.comm = "test",
	};

	if (at_ns > F.now)
		F.now = at_ns;
	policy__event(P, &ev, F.now);
}

/* Process @pid started at @start_ns from @ppid (started at @pstart_ns). */
static void fork_at(pid_t pid, pid_t ppid, uint64_t start_ns, uint64_t pstart_ns)
{
	send(POLICY_EV_FORK, pid, ppid, start_ns, pstart_ns, start_ns + 1000, 0);
}

static void exec_at(pid_t pid, uint64_t start_ns, uint64_t at_ns)
{
	F.execd[pid] = at_ns;
	send(POLICY_EV_EXEC, pid, 0, start_ns, 0, at_ns, 0);
}

static void exit_at(pid_t pid, uint64_t start_ns, uint64_t at_ns)
{
	F.alive[pid] = false;
	send(POLICY_EV_EXIT, pid, 0, start_ns, 0, at_ns, 0);
}

static void tick(uint64_t to_ns)
{
	F.now = to_ns;
	policy__tick(P, F.now);
}

static const struct policy_stats *stats(void)
{
	return policy__stats(P);
}

/* ---- fork ---- */

static void test_fork_gives_the_child_its_parents_entries(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, (struct span){ 2 * SEC, 2 * SEC }, ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.creates, 1);
	assert_true(F.map[11].exists);
	assert_int_equal(F.map[11].mi.size, 300);
	assert_int_equal(stats()->copies_created, 1);
	/* The parent's map is its own (made after it started): never weighed against mappings. */
	assert_int_equal(F.entries_calls, 0);
}

static void test_fork_of_a_parent_without_a_map_writes_nothing(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.creates, 0);
	assert_false(F.map[11].exists);
	assert_int_equal(stats()->copies_created, 0);
}

static void test_vfork_child_gets_nothing(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	send(POLICY_EV_FORK, 11, 10, 5 * SEC, 1 * SEC, 5 * SEC, POLICY_EVF_VFORK);
	assert_int_equal(F.creates, 0);
	assert_false(F.map[11].exists);
}

static void test_child_that_execd_before_the_copy_gets_nothing(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	/* The fork event is read after the child exec'd: BPF recorded the exec. */
	F.execd[11] = 5 * SEC + 500;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.creates, 0);
	assert_false(F.map[11].exists);
	assert_int_equal(stats()->copies_skipped_exec, 1);
}

static void test_runtime_map_first_gets_the_entries_appended(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	/* The child's runtime made its own map before the agent read the fork. */
	put_map(11, 40, span_at(5 * SEC + 200), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.appends, 1);
	assert_int_equal(F.map[11].mi.size, 340);
	assert_int_equal(stats()->copies_appended, 1);
	assert_int_equal(F.archive_calls, 0);
}

static void test_copy_waits_for_an_unfinished_line_then_gives_up(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	put_map(11, 40, span_at(5 * SEC + 200), ENTRIES_MAPPED);
	F.append_eagain = 2;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_appended, 0);
	tick(F.now + 100 * MS);
	assert_int_equal(stats()->copies_appended, 0);
	tick(F.now + 100 * MS);
	assert_int_equal(stats()->copies_appended, 1);
	assert_int_equal(F.appends, 3);

	/* A line never finished: after 5 s, counted as failed, and no more tries. */
	put_map(12, 40, span_at(6 * SEC + 200), ENTRIES_MAPPED);
	F.append_eagain = 1000;
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	tick(F.now + 4 * SEC);
	assert_int_equal(stats()->copies_failed, 0);
	tick(F.now + 2 * SEC);
	assert_int_equal(stats()->copies_failed, 1);
	F.appends = 0;
	tick(F.now + 100 * MS);
	assert_int_equal(F.appends, 0);
}

/* A full disk fails every copy alike: each is counted, only the first said, until one works. */
static void test_copies_failing_alike_are_said_once(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, (struct span){ 2 * SEC, 2 * SEC }, ENTRIES_MAPPED);
	F.create_err = -ENOSPC;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	fork_at(13, 10, 7 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_failed, 3);
	assert_int_equal(stats()->copies_failed_quiet, 2);
	/* Another cause is said. */
	F.create_err = -EIO;
	fork_at(14, 10, 8 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_failed_quiet, 2);
	/* A copy works: the next failure is said again. */
	F.create_err = 0;
	fork_at(15, 10, 9 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_created, 1);
	F.create_err = -EIO;
	fork_at(16, 10, 10 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_failed, 5);
	assert_int_equal(stats()->copies_failed_quiet, 2);
	/* A refusal names a trap at one path: said every time. */
	F.create_refused = true;
	F.create_err = -ELOOP;
	fork_at(17, 10, 11 * SEC, 1 * SEC);
	fork_at(18, 10, 12 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_failed, 7);
	assert_int_equal(stats()->copies_failed_quiet, 2);
}

static void test_over_max_map_bytes_is_neither_copied_nor_archived(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, (2 << 20), span_at(2 * SEC), ENTRIES_UNMAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.creates, 0);
	assert_int_equal(stats()->too_large, 1);
	/* Its exec would archive it, but it is over the bound: left as it is. */
	exec_at(10, 1 * SEC, 6 * SEC);
	assert_int_equal(F.archive_calls, 0);
	assert_true(F.map[10].exists);
	assert_int_equal(stats()->too_large, 2);
}

static void test_dry_run_decides_and_changes_nothing(void **state)
{
	struct policy_config c = cfg;

	(void)state;
	c.dry_run = true;
	reconfigure(&c);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_UNMAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	exec_at(10, 1 * SEC, 6 * SEC);
	exit_at(10, 1 * SEC, 7 * SEC);
	tick(F.now + 700 * SEC);
	assert_int_equal(F.creates + F.appends + F.archive_calls, 0);
	assert_true(F.map[10].exists);
	assert_false(F.map[11].exists);
}

/* ---- JIT code without a map (policy_jit.c) ---- */

#define LOST_LINES_BURST_TEST 64  /* policy_internal.h's LOST_LINES_BURST */

struct jit_seen {
	pid_t pid;
	bool lost;
	uint64_t bytes, memfd;
	unsigned int n;
};

static void jit_found(const struct policy_jit *j, void *ctx)
{
	struct jit_seen *js = ctx;

	js->n++;
	js->pid = j->pid;
	js->lost = j->lost;
	js->bytes = j->jit_bytes;
	js->memfd = j->memfd_bytes;
}

static struct jit_seen jits(uint64_t *lost)
{
	struct jit_seen js = { 0 };

	policy__for_each_jit(P, jit_found, &js, lost);
	return js;
}

static void test_jit_code_without_a_map_is_lost_once_after_the_grace(void **state)
{
	struct jit_seen js;
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 10, CODE, 8192, false, 2 * SEC);
	policy__exec_mapping(P, 10, CODE, 4096, true, 2 * SEC);
	/* A runtime maps its code before it names it: not judged within the grace. */
	tick(2 * SEC + JIT_GRACE_NS - 1);
	assert_int_equal(stats()->lost_symbols_total, 0);
	tick(2 * SEC + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, 1);
	js = jits(&lost);
	assert_int_equal(lost, 1);
	assert_int_equal(js.pid, 10);
	assert_true(js.lost);
	assert_int_equal(js.bytes, 8192);
	assert_int_equal(js.memfd, 4096);
	/* More code later: said once only. */
	policy__exec_mapping(P, 10, CODE + 0x100000, 4096, false, 10 * SEC);
	tick(20 * SEC);
	assert_int_equal(stats()->lost_symbols_total, 1);
	/* Its map appears: named from now on. */
	put_map(10, 300, span_at(21 * SEC), ENTRIES_MAPPED);
	policy__map_appeared(P, 10, 21 * SEC);
	jits(&lost);
	assert_int_equal(lost, 0);
	assert_int_equal(stats()->lost_symbols_named, 1);
}

static void test_jit_code_with_a_map_is_not_lost(void **state)
{
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	policy__exec_mapping(P, 10, CODE, 8192, false, 2 * SEC);
	tick(10 * SEC);
	assert_int_equal(stats()->lost_symbols_total, 0);
	assert_int_equal(jits(&lost).n, 1);
	assert_int_equal(lost, 0);
}

static void test_jit_code_of_an_old_image_is_forgotten_at_exec(void **state)
{
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 10, CODE, 8192, false, 2 * SEC);
	exec_at(10, 1 * SEC, 3 * SEC);
	tick(10 * SEC);
	/* The new image mapped no code: nothing to name, nothing lost. */
	assert_int_equal(stats()->lost_symbols_total, 0);
	assert_int_equal(jits(&lost).n, 0);
	/* Code of an unknown process (its fork not read): counted, not judged. */
	policy__exec_mapping(P, 99, CODE, 4096, false, 10 * SEC);
	assert_int_equal(stats()->jit_unknown, 1);
}

/* A launcher with JIT code execs a runtime: the runtime has its own grace. */
static void test_jit_grace_of_a_new_image_is_its_own(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 10, CODE, 4096, false, 2 * SEC);
	exec_at(10, 1 * SEC, 3 * SEC);
	policy__exec_mapping(P, 10, CODE, 8192, false, 3 * SEC + SEC / 2);
	/* The old image's watch comes due: not the new image's. */
	tick(2 * SEC + JIT_GRACE_NS);
	tick(3 * SEC + SEC / 2 + JIT_GRACE_NS - 1);
	assert_int_equal(stats()->lost_symbols_total, 0);
	tick(3 * SEC + SEC / 2 + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, 1);
}

/* One uid's lines are bounded: the rest counted, not said. */
static void test_lost_symbols_lines_are_bounded_per_uid(void **state)
{
	pid_t pid;

	(void)state;
	for (pid = 100; pid < 100 + LOST_LINES_BURST_TEST + 10; pid++) {
		fork_at(pid, 1, 1 * SEC, 0);
		policy__exec_mapping(P, pid, CODE, 4096, false, 2 * SEC);
	}
	tick(2 * SEC + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, LOST_LINES_BURST_TEST + 10);
	assert_int_equal(stats()->lost_symbols_unsaid, 10);
}

static void test_jit_code_found_in_proc_is_judged_too(void **state)
{
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	/* A stale start time: another process's mappings, not this one's. */
	policy__exec_mappings_found(P, 10, 12345, 2, 8192, 0, 2 * SEC);
	tick(10 * SEC);
	assert_int_equal(jits(&lost).n, 0);
	policy__exec_mappings_found(P, 10, 1 * SEC / TICK, 2, 8192, 0, 10 * SEC);
	tick(10 * SEC + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, 1);
}

static void test_jit_code_in_an_unmirrored_namespace_is_not_judged(void **state)
{
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	send(POLICY_EV_FORK, 11, 10, 5 * SEC, 1 * SEC, 5 * SEC, POLICY_EVF_FOREIGN);
	policy__exec_mapping(P, 11, CODE, 8192, false, 6 * SEC);
	tick(20 * SEC);
	/* Its map is in its own /tmp, which nobody mirrors here: cannot tell. */
	assert_int_equal(stats()->lost_symbols_total, 0);
	jits(&lost);
	assert_int_equal(lost, 0);
}

/* ---- the regions kept for the doctor (jitregions.c) ---- */

#define PAGE 4096ull

struct regions_seen {
	unsigned int n;
	struct jit_region v[JITREGIONS_PER_PROC];
};

static void region_found(uint64_t addr, uint64_t len, void *ctx)
{
	struct regions_seen *rs = ctx;

	assert_true(rs->n < JITREGIONS_PER_PROC);
	rs->v[rs->n++] = (struct jit_region){ addr, len };
}

static struct regions_seen regions_of(pid_t pid)
{
	struct regions_seen rs = { 0 };

	policy__for_each_jit_region(P, pid, region_found, &rs);
	return rs;
}

static void assert_region(const struct regions_seen *rs, unsigned int i, uint64_t addr, uint64_t len)
{
	assert_true(i < rs->n);
	assert_int_equal(rs->v[i].addr, addr);
	assert_int_equal(rs->v[i].len, len);
}

/*
 * The kernel reports each mmap as the mapping it merged into: three pages
 * mapped one beside the other come as [a, +1), [a, +2), [a, +3). Each
 * region kept is what its own mmap added, whichever side it merged on.
 */
static void test_jit_regions_are_kept_as_each_mmap_made_them(void **state)
{
	struct regions_seen rs;
	struct policy_jit j;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 10, CODE + 4 * PAGE, PAGE, false, 2 * SEC);
	policy__exec_mapping(P, 10, CODE + 4 * PAGE, 2 * PAGE, false, 2 * SEC);
	policy__exec_mapping(P, 10, CODE + 4 * PAGE, 3 * PAGE, false, 2 * SEC);
	rs = regions_of(10);
	assert_int_equal(rs.n, 3);
	assert_region(&rs, 0, CODE + 4 * PAGE, PAGE);
	assert_region(&rs, 1, CODE + 5 * PAGE, PAGE);
	assert_region(&rs, 2, CODE + 6 * PAGE, PAGE);
	/* An mprotect back to executable reports the merged mapping again: nothing new. */
	policy__exec_mapping(P, 10, CODE + 4 * PAGE, 3 * PAGE, false, 3 * SEC);
	policy__exec_mapping(P, 10, CODE + 5 * PAGE, PAGE, false, 3 * SEC);
	assert_int_equal(regions_of(10).n, 3);
	/* Merged below, and into a hole between two: only the new page each time. */
	policy__exec_mapping(P, 10, CODE + 3 * PAGE, 4 * PAGE, false, 3 * SEC);
	policy__exec_mapping(P, 10, CODE + 9 * PAGE, PAGE, false, 3 * SEC);
	policy__exec_mapping(P, 10, CODE + 3 * PAGE, 7 * PAGE, false, 3 * SEC);
	rs = regions_of(10);
	assert_int_equal(rs.n, 6);
	assert_region(&rs, 0, CODE + 3 * PAGE, PAGE);
	assert_region(&rs, 1, CODE + 4 * PAGE, PAGE);
	assert_region(&rs, 4, CODE + 7 * PAGE, 2 * PAGE);
	assert_region(&rs, 5, CODE + 9 * PAGE, PAGE);
	/* memfd code is looked up as a file, never in the map: not kept. */
	policy__exec_mapping(P, 10, CODE + 64 * PAGE, PAGE, true, 3 * SEC);
	/* Nonsense from a record: nothing. */
	policy__exec_mapping(P, 10, CODE, 0, false, 3 * SEC);
	policy__exec_mapping(P, 10, UINT64_MAX - PAGE, 2 * PAGE, false, 3 * SEC);
	assert_true(policy__jit_of(P, 10, &j));
	assert_int_equal(j.regions_kept, 6);
	assert_int_equal(j.regions_not_kept, 0);
	assert_int_equal(policy__jit_regions_kept(P), 6);
	/* Another process's are its own. */
	fork_at(11, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 11, CODE + 4 * PAGE, 2 * PAGE, false, 3 * SEC);
	rs = regions_of(11);
	assert_int_equal(rs.n, 1);
	assert_region(&rs, 0, CODE + 4 * PAGE, 2 * PAGE);
	assert_int_equal(policy__jit_regions_kept(P), 7);
	assert_false(policy__jit_of(P, 12, &j));
	assert_int_equal(regions_of(12).n, 0);

	/* An exec drops the old image's; an exit drops the process's. */
	exec_at(10, 1 * SEC, 4 * SEC);
	assert_int_equal(regions_of(10).n, 0);
	assert_int_equal(policy__jit_regions_kept(P), 1);
	policy__exec_mapping(P, 10, CODE + 4 * PAGE, PAGE, false, 5 * SEC);
	assert_int_equal(regions_of(10).n, 1);
	exit_at(10, 1 * SEC, 6 * SEC);
	exit_at(11, 1 * SEC, 6 * SEC);
	assert_int_equal(regions_of(10).n, 0);
	assert_int_equal(policy__jit_regions_kept(P), 0);
	/* A later process at the pid starts with none (its fork reuses the entry). */
	fork_at(11, 1, 2 * SEC, 0);
	policy__exec_mapping(P, 11, CODE, PAGE, false, 7 * SEC);
	fork_at(11, 1, 3 * SEC, 0);
	assert_int_equal(regions_of(11).n, 0);
	assert_int_equal(policy__jit_regions_kept(P), 0);
}

/* The first JITREGIONS_PER_PROC of a process are kept, the rest counted; JITREGIONS_MAX for all. */
static void test_jit_regions_are_bounded_per_process_and_in_all(void **state)
{
	struct regions_seen rs;
	struct policy_jit j;
	unsigned int i;
	pid_t pid;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	/* Every second page: none merges. */
	for (i = 0; i < JITREGIONS_PER_PROC + 6; i++)
		policy__exec_mapping(P, 10, CODE + 2 * i * PAGE, PAGE, false, 2 * SEC);
	rs = regions_of(10);
	assert_int_equal(rs.n, JITREGIONS_PER_PROC);
	assert_region(&rs, JITREGIONS_PER_PROC - 1, CODE + 2 * (JITREGIONS_PER_PROC - 1) * PAGE, PAGE);
	assert_true(policy__jit_of(P, 10, &j));
	assert_int_equal(j.regions_kept, JITREGIONS_PER_PROC);
	assert_int_equal(j.regions_not_kept, 6);
	assert_int_equal(stats()->jit_regions_not_kept, 6);
	/* A report over the first two and the gap between: the gap is new, and past the bound. */
	policy__exec_mapping(P, 10, CODE, 3 * PAGE, false, 2 * SEC);
	assert_int_equal(stats()->jit_regions_not_kept, 7);

	/* In all: JITREGIONS_MAX, then none, until a process gives its own back. */
	for (pid = 100; policy__jit_regions_kept(P) < JITREGIONS_MAX; pid++) {
		fork_at(pid, 1, 1 * SEC, 0);
		for (i = 0; i < JITREGIONS_PER_PROC; i++)
			policy__exec_mapping(P, pid, CODE + 2 * i * PAGE, PAGE, false, 2 * SEC);
	}
	assert_int_equal(policy__jit_regions_kept(P), JITREGIONS_MAX);
	fork_at(pid, 1, 1 * SEC, 0);
	policy__exec_mapping(P, pid, CODE, PAGE, false, 2 * SEC);
	assert_int_equal(regions_of(pid).n, 0);
	assert_int_equal(stats()->jit_regions_not_kept, 8);
	exec_at(10, 1 * SEC, 3 * SEC);
	policy__exec_mapping(P, pid, CODE, PAGE, false, 3 * SEC);
	assert_int_equal(regions_of(pid).n, 1);
	assert_int_equal(policy__jit_regions_kept(P), JITREGIONS_MAX - JITREGIONS_PER_PROC + 1);
}

/* The pool's bound, and a region's parts, on the object itself. */
static void test_jitregions_pool_is_shared_and_given_back(void **state)
{
	struct jitregions_pool pool = { .max = 4 };
	struct jitregions a = { 0 }, b = { 0 };

	(void)state;
	assert_int_equal(jitregions__add(&a, &pool, CODE, PAGE), 0);
	assert_int_equal(jitregions__add(&a, &pool, CODE + 2 * PAGE, PAGE), 0);
	/* Two parts, one before the first region and one in the gap: one kept, one past the pool's bound. */
	assert_int_equal(jitregions__add(&b, &pool, CODE, PAGE), 0);
	assert_int_equal(jitregions__add(&a, &pool, CODE - PAGE, 3 * PAGE), 1);
	assert_int_equal(a.n, 3);
	assert_int_equal(a.v[0].addr, CODE - PAGE);
	assert_int_equal(a.not_kept, 1);
	assert_int_equal(pool.kept, 4);
	assert_int_equal(jitregions__add(&b, &pool, CODE + PAGE, PAGE), 1);
	jitregions__clear(&a, &pool);
	assert_int_equal(pool.kept, 1);
	assert_null(a.v);
	assert_int_equal(jitregions__add(&b, &pool, CODE + PAGE, PAGE), 0);
	assert_int_equal(b.n, 2);
	jitregions__clear(&b, &pool);
	assert_int_equal(pool.kept, 0);
	/* Cleared twice, or never filled: nothing. */
	jitregions__clear(&b, &pool);
	assert_int_equal(pool.kept, 0);
}

static void test_foreign_namespace_is_left_alone(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	send(POLICY_EV_FORK, 11, 10, 5 * SEC, 1 * SEC, 5 * SEC, POLICY_EVF_FOREIGN);
	assert_int_equal(F.creates, 0);
	assert_int_equal(stats()->foreign_ns, 1);
	put_map(11, 50, span_at(3 * SEC), ENTRIES_UNMAPPED);
	send(POLICY_EV_EXEC, 11, 0, 5 * SEC, 0, 6 * SEC, POLICY_EVF_FOREIGN);
	exit_at(11, 5 * SEC, 7 * SEC);
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(policy__retained(P), 0);
}

/* An event of a process in another namespace: its own pid is @pid + 100, its mount namespace 7. */
static void send_ns(enum policy_event_type type, pid_t pid, pid_t ppid, uint64_t start_ns,
		    uint64_t at_ns, uint32_t flags)
{
	struct policy_event ev = {
		.type = type, .flags = flags | POLICY_EVF_FOREIGN, .pid = pid, .ppid = ppid,
		.start_ticks = start_ns / TICK, .start = span_at(start_ns),
		.pstart = span_at(1 * SEC), .at = span_at(at_ns), .uid = 1000, .gid = 1000,
		.ns_pid = pid + 100, .mnt_ns = 7, .comm = "ctr",
	};

	if (at_ns > F.now)
		F.now = at_ns;
	policy__event(P, &ev, F.now);
}

static void test_ns_process_whose_map_is_ours_is_a_host_process(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	/* Another mount namespace (a systemd service's), but /tmp and the pid are ours. */
	F.ns_place[11] = 1 + NS_OURS;
	send_ns(POLICY_EV_FORK, 11, 10, 5 * SEC, 5 * SEC, 0);
	assert_int_equal(F.ns_attaches, 1);
	assert_int_equal(F.creates, 1);
	assert_true(F.map[11].exists);
	assert_int_equal(stats()->foreign_ns, 0);
	/* Its later events do not place it again; the host's exec rules judge its map. */
	send_ns(POLICY_EV_EXEC, 11, 0, 5 * SEC, 6 * SEC, 0);
	assert_int_equal(F.ns_attaches, 1);
	assert_int_equal(F.archived[11], 1 + ARCHIVE_DROP);
	assert_int_equal(F.ns_execs, 0);
	F.alive[11] = false;
	send_ns(POLICY_EV_EXIT, 11, 0, 5 * SEC, 7 * SEC, 0);
	assert_int_equal(F.ns_ends, 0);
}

static void test_ns_refused_process_is_left_alone(void **state)
{
	(void)state;
	put_map(11, 50, span_at(3 * SEC), ENTRIES_UNMAPPED);
	send_ns(POLICY_EV_FORK, 11, 10, 5 * SEC, 5 * SEC, 0);
	assert_int_equal(F.ns_attaches, 1);
	assert_int_equal(stats()->foreign_ns, 1);
	assert_int_equal(stats()->ns_mirrored, 0);
	send_ns(POLICY_EV_EXIT, 11, 0, 5 * SEC, 7 * SEC, 0);
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(policy__retained(P), 0);
}

static void test_ns_fork_of_a_mirrored_parent_copies_in_its_namespace(void **state)
{
	(void)state;
	F.ns_place[10] = F.ns_place[11] = F.ns_place[12] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 10, 1, 1 * SEC, 1 * SEC, 0);
	assert_int_equal(stats()->ns_mirrored, 1);
	assert_int_equal(F.ns_copies, 0);  /* its parent is a host process */
	send_ns(POLICY_EV_FORK, 11, 10, 5 * SEC, 5 * SEC, 0);
	/* Its parent, in its mount namespace, is named for placing it should it be gone; not 1 (another). */
	assert_int_equal(F.ns_kin[0], 10);
	assert_int_equal(F.ns_kin[1], 0);
	assert_int_equal(F.ns_copies, 1);
	assert_int_equal(F.ns_copy_parent, 10);
	assert_int_equal(stats()->ns_copies, 1);
	/* Never a host copy: the child's map is in its own root. */
	assert_int_equal(F.creates + F.appends + F.defers, 0);
	/* A vfork child execs or exits next: nothing. */
	send_ns(POLICY_EV_FORK, 12, 10, 6 * SEC, 6 * SEC, POLICY_EVF_VFORK);
	assert_int_equal(F.ns_copies, 1);
	assert_int_equal(stats()->ns_mirrored, 3);
}

static void test_ns_mirror_is_retained_at_exit_then_archived(void **state)
{
	(void)state;
	F.ns_place[20] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 20, 1, 1 * SEC, 1 * SEC, 0);
	put_map(20, 400, span_at(2 * SEC), ENTRIES_MAPPED);  /* the mirror */
	send_ns(POLICY_EV_EXIT, 20, 0, 1 * SEC, 20 * SEC, 0);
	assert_int_equal(F.ns_ends, 1);
	assert_int_equal(policy__retained(P), 1);
	assert_int_equal(policy__processes(P), 0);
	tick(F.now + 600 * SEC - 1);
	assert_true(F.map[20].exists);
	tick(F.now + 1);
	assert_int_equal(F.archived[20], 1 + ARCHIVE_EXIT);
}

static void test_ns_exec_archives_the_old_images_mirror(void **state)
{
	(void)state;
	F.ns_place[20] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 20, 1, 1 * SEC, 1 * SEC, 0);
	put_map(20, 400, span_at(2 * SEC), ENTRIES_MAPPED);
	send_ns(POLICY_EV_EXEC, 20, 0, 1 * SEC, 9 * SEC, 0);
	assert_int_equal(F.ns_execs, 1);
	/* The exec's own time splits the lines: before it, surely the old image's. */
	assert_int_equal(F.ns_exec_at, 9 * SEC);
	assert_int_equal(F.archived[20], 1 + ARCHIVE_EXEC);
	assert_int_equal(stats()->exec_archived, 1);
	/* Placed again (its root may have changed), and still mirrored: its exit ends it. */
	assert_int_equal(F.ns_attaches, 2);
	/* The new mirror at the path is the new image's: not cleared as an earlier holder's. */
	assert_int_equal(F.archive_calls, 1);
	assert_true(F.map[20].exists);
	assert_int_equal(stats()->ns_mirrored, 1);
	send_ns(POLICY_EV_EXIT, 20, 0, 1 * SEC, 20 * SEC, 0);
	assert_int_equal(F.ns_ends, 1);
}

static void test_ns_exec_drops_an_unwritten_fork_copy(void **state)
{
	(void)state;
	F.ns_place[21] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 21, 1, 1 * SEC, 1 * SEC, 0);
	put_map(21, 400, span_at(2 * SEC), ENTRIES_MAPPED);
	F.ns_only_copy = true;
	send_ns(POLICY_EV_EXEC, 21, 0, 1 * SEC, 9 * SEC, 0);
	assert_int_equal(F.archived[21], 1 + ARCHIVE_DROP);
	assert_int_equal(stats()->exec_dropped, 1);
}

static void test_ns_mirror_ends_when_it_cannot_be_placed_again(void **state)
{
	(void)state;
	F.ns_place[22] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 22, 1, 1 * SEC, 1 * SEC, 0);
	put_map(22, 400, span_at(2 * SEC), ENTRIES_MAPPED);
	/* Its new image's directory is refused: the mirror it had ends, kept for the retention. */
	F.ns_place[22] = 0;
	F.mirrored[22] = true;
	send_ns(POLICY_EV_EXEC, 22, 0, 1 * SEC, 9 * SEC, 0);
	assert_int_equal(F.ns_ends, 1);
	assert_false(F.mirrored[22]);
	assert_int_equal(stats()->foreign_ns, 1);
	/* Its exit does not end it twice. */
	send_ns(POLICY_EV_EXIT, 22, 0, 1 * SEC, 20 * SEC, 0);
	assert_int_equal(F.ns_ends, 1);
}

static void test_ns_host_path_is_cleared_before_mirroring(void **state)
{
	(void)state;
	/* An earlier holder's map at the host path: never the new process's, which writes elsewhere. */
	put_map(30, 100, span_at(1 * SEC), ENTRIES_UNMAPPED);
	F.ns_place[30] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 30, 1, 5 * SEC, 5 * SEC, 0);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_STALE);
	/* Moved before the mirror was first brought up to date. */
	assert_int_equal(F.syncs_before_archive, 0);
	assert_int_equal(F.ns_syncs, 1);
	/* Another user's file there is moved aside as squatted. */
	put_map(31, 100, span_at(1 * SEC), ENTRIES_UNMAPPED);
	F.map[31].mi.uid = 2000;
	F.ns_place[31] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_FORK, 31, 1, 6 * SEC, 6 * SEC, 0);
	assert_int_equal(F.squatted_moves, 1);
	assert_int_equal(stats()->squatted_moved, 1);
}

static void test_ns_process_moved_into_a_container_is_placed_at_its_exec(void **state)
{
	(void)state;
	/* A container's init: forked in our namespaces, unshared, then exec'd. */
	fork_at(40, 1, 1 * SEC, 0);
	assert_int_equal(F.ns_attaches, 0);
	F.ns_place[40] = 1 + NS_MIRRORED;
	send_ns(POLICY_EV_EXEC, 40, 0, 1 * SEC, 2 * SEC, 0);
	assert_int_equal(F.ns_attaches, 1);
	assert_int_equal(stats()->ns_mirrored, 1);
	/* No host exec judgement of a path it does not write. */
	assert_int_equal(F.entries_calls, 0);
}

/* ---- exec, under every combination of evidence ---- */

enum born_when { BORN_BEFORE, BORN_AFTER, BORN_AROUND, BORN_UNKNOWN };
enum outcome { KEPT, ARCHIVED, DROPPED };

struct exec_case {
	enum born_when born;
	enum map_entries entries;
	enum outcome want;
	bool ambiguous;            /* counted as such */
};

#define EXEC_NS (10 * SEC)

static struct span born_span(enum born_when b)
{
	switch (b) {
	case BORN_BEFORE: return (struct span){ EXEC_NS - 50 * MS, EXEC_NS - 10 * MS };
	case BORN_AFTER: return (struct span){ EXEC_NS + 1000, EXEC_NS + 2 * MS };
	case BORN_AROUND: return (struct span){ EXEC_NS - 30 * MS, EXEC_NS + 30 * MS };
	case BORN_UNKNOWN: break;
	}
	return SPAN_UNKNOWN;
}

static void run_exec_case(const struct exec_case *c, size_t i)
{
	const struct policy_stats before = *stats();
	pid_t pid = 20;
	uint64_t ambiguous;

	memset(F.archived, 0, sizeof(F.archived));
	F.map[pid].exists = false;
	F.execd[pid] = 0;
	fork_at(pid, 1, 1 * SEC, 0);
	put_map(pid, 500, born_span(c->born), c->entries);
	exec_at(pid, 1 * SEC, EXEC_NS);
	ambiguous = stats()->ambiguous_kept - before.ambiguous_kept;
	switch (c->want) {
	case KEPT:
		if (F.map[pid].exists && !F.archived[pid] && ambiguous == c->ambiguous)
			break;
		fail_msg("case %zu (born %d, entries %d): want kept%s; archived %d, ambiguous %llu",
			 i, c->born, c->entries, c->ambiguous ? " (ambiguous)" : "",
			 F.archived[pid], (unsigned long long)ambiguous);
		break;
	case ARCHIVED:
		if (F.archived[pid] == 1 + ARCHIVE_EXEC && !ambiguous)
			break;
		fail_msg("case %zu (born %d, entries %d): want archived; archived %d, ambiguous %llu",
			 i, c->born, c->entries, F.archived[pid], (unsigned long long)ambiguous);
		break;
	case DROPPED:
		break;
	}
	exit_at(pid, 1 * SEC, EXEC_NS + SEC);
	F.map[pid].exists = false;
	tick(F.now + 700 * SEC);
}

static void test_exec_under_every_combination_of_evidence(void **state)
{
	/*
	 * Made after the exec: the new image's, whatever its entries. Made
	 * before: the old image's, unless its newest entries name the new
	 * image's memory (it appended: kept, ambiguous) or the process cannot
	 * be read. When the index cannot say: the entries decide, and an empty
	 * map, an unreadable process or entries of both kinds keep it.
	 */
	static const struct exec_case cases[] = {
		{ BORN_AFTER, ENTRIES_MAPPED, KEPT, false },
		{ BORN_AFTER, ENTRIES_UNMAPPED, KEPT, false },
		{ BORN_AFTER, ENTRIES_NONE, KEPT, false },
		{ BORN_AFTER, ENTRIES_UNKNOWN, KEPT, false },
		{ BORN_AFTER, ENTRIES_MIXED, KEPT, false },
		{ BORN_BEFORE, ENTRIES_MAPPED, KEPT, true },
		{ BORN_BEFORE, ENTRIES_UNMAPPED, ARCHIVED, false },
		{ BORN_BEFORE, ENTRIES_NONE, ARCHIVED, false },
		{ BORN_BEFORE, ENTRIES_UNKNOWN, KEPT, true },
		{ BORN_BEFORE, ENTRIES_MIXED, KEPT, true },
		{ BORN_AROUND, ENTRIES_MAPPED, KEPT, false },
		{ BORN_AROUND, ENTRIES_UNMAPPED, ARCHIVED, false },
		{ BORN_AROUND, ENTRIES_NONE, KEPT, true },
		{ BORN_AROUND, ENTRIES_UNKNOWN, KEPT, true },
		{ BORN_AROUND, ENTRIES_MIXED, KEPT, true },
		{ BORN_UNKNOWN, ENTRIES_MAPPED, KEPT, false },
		{ BORN_UNKNOWN, ENTRIES_UNMAPPED, ARCHIVED, false },
		{ BORN_UNKNOWN, ENTRIES_NONE, KEPT, true },
		{ BORN_UNKNOWN, ENTRIES_UNKNOWN, KEPT, true },
		{ BORN_UNKNOWN, ENTRIES_MIXED, KEPT, true },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_exec_case(&cases[i], i);
	assert_int_equal(stats()->exec_kept, 7);
	assert_int_equal(stats()->exec_archived, 4);
	assert_int_equal(stats()->ambiguous_kept, 9);
}

static void test_exec_never_takes_a_map_made_microseconds_after_it(void **state)
{
	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	/* Made 2 us after the exec, in the same 4 ms file-time tick; not yet written. */
	put_map(20, 0, (struct span){ EXEC_NS + 2000, EXEC_NS + 40000 }, ENTRIES_NONE);
	exec_at(20, 1 * SEC, EXEC_NS);
	assert_true(F.map[20].exists);
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(stats()->exec_kept, 1);
	assert_int_equal(stats()->by_index, 1);
	/* Decided by the index alone: no /proc read. */
	assert_int_equal(F.entries_calls, 0);
}

static void test_exec_drops_an_untouched_copy_even_when_made_late(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	/* The copy is made after the child exec'd (a slow copy): still only the parent's entries. */
	F.now = EXEC_NS + 5 * MS;
	fork_at(21, 10, 9 * SEC, 1 * SEC);
	assert_true(F.map[21].exists);
	F.execd[21] = EXEC_NS;
	send(POLICY_EV_EXEC, 21, 0, 9 * SEC, 0, EXEC_NS, 0);
	assert_int_equal(F.archived[21], 1 + ARCHIVE_DROP);
	assert_int_equal(stats()->exec_dropped, 1);
	assert_int_equal(stats()->by_identity, 1);
}

static void test_exec_keeps_a_late_copy_the_new_image_wrote_to(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	F.now = EXEC_NS + 5 * MS;
	fork_at(21, 10, 9 * SEC, 1 * SEC);
	F.map[21].mi.size += 40;  /* the new image appended its own line */
	F.execd[21] = EXEC_NS;
	send(POLICY_EV_EXEC, 21, 0, 9 * SEC, 0, EXEC_NS, 0);
	assert_true(F.map[21].exists);
	assert_int_equal(F.archived[21], 0);
	assert_int_equal(stats()->ambiguous_kept, 1);
}

static void test_exec_archives_a_copy_the_old_image_wrote_to(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(21, 10, 9 * SEC, 1 * SEC);
	F.map[21].mi.size += 40;           /* the child's own line, before the exec */
	F.map[21].entries = ENTRIES_UNMAPPED;  /* nothing of the new image's */
	exec_at(21, 9 * SEC, EXEC_NS);
	assert_int_equal(F.archived[21], 1 + ARCHIVE_EXEC);
}

static void test_exec_mappings_of_a_later_image_tell_nothing(void **state)
{
	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	put_map(20, 500, born_span(BORN_AROUND), ENTRIES_UNMAPPED);
	/* Read late: the process exec'd twice, and its mappings are the second image's. */
	F.execd[20] = EXEC_NS + 50 * MS;
	send(POLICY_EV_EXEC, 20, 0, 1 * SEC, 0, EXEC_NS, 0);
	assert_true(F.map[20].exists);
	assert_int_equal(stats()->ambiguous_kept, 1);
}

static void test_exec_busy_is_retried_within_milliseconds(void **state)
{
	uint64_t next;

	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	put_map(20, 500, born_span(BORN_BEFORE), ENTRIES_UNMAPPED);
	F.busy = 3;   /* the old image's fd, closing as the task returns to user space */
	exec_at(20, 1 * SEC, EXEC_NS);
	assert_true(F.map[20].exists);
	assert_int_equal(stats()->busy_deferred, 1);
	next = policy__next_deadline(P);
	assert_true(next > F.now && next <= F.now + 1 * MS);
	tick(next);
	tick(policy__next_deadline(P));
	assert_true(F.map[20].exists);
	tick(policy__next_deadline(P));
	assert_int_equal(F.archived[20], 1 + ARCHIVE_EXEC);
	assert_int_equal(stats()->exec_archived, 1);
	assert_int_equal(policy__next_deadline(P), UINT64_MAX);
}

static void test_exec_busy_for_good_is_left_to_the_new_image(void **state)
{
	uint64_t first;

	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	put_map(20, 500, born_span(BORN_BEFORE), ENTRIES_UNMAPPED);
	F.busy = 1 << 30;  /* the new image opened it and keeps it */
	exec_at(20, 1 * SEC, EXEC_NS);
	first = F.now;
	while (policy__next_deadline(P) != UINT64_MAX && F.now < first + 10 * SEC)
		tick(policy__next_deadline(P));
	assert_true(F.now - first >= 2 * SEC && F.now - first < 3 * SEC);
	assert_true(F.map[20].exists);
	assert_int_equal(stats()->ambiguous_kept, 1);
	assert_int_equal(stats()->exec_archived, 0);
}

/* ---- exit and retention ---- */

static void test_exit_keeps_the_map_for_the_retention_then_archives(void **state)
{
	uint64_t exited;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	exited = F.now;
	assert_int_equal(policy__retained(P), 1);
	assert_int_equal(policy__processes(P), 0);
	/* The lower bound: still at its path a moment before the period ends. */
	tick(exited + 600 * SEC - 1);
	assert_true(F.map[30].exists);
	assert_int_equal(F.archive_calls, 0);
	tick(exited + 600 * SEC);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(policy__retained(P), 0);
}

/* A profiler's hold keeps an exited map at its path past the retention, until released. */
static void test_exit_held_map_stays_until_released(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	assert_int_equal(policy__hold(P, 30, 1 * SEC / TICK), 0);
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	tick(due);
	tick(due + 3600 * SEC);
	assert_true(F.map[30].exists);
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(stats()->held_past_retention, 1);
	policy__release(P, 30, 1 * SEC / TICK);
	assert_int_equal(policy__held(P), 0);
	/* Looked at again within RETRY_HELD_NS of the release. */
	tick(due + 3600 * SEC + RETRY_HELD_NS);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(policy__retained(P), 0);
}

/* A hold names a process: another at the same pid is not held, nor is a hold without a start. */
static void test_hold_of_another_process_at_the_pid_keeps_nothing(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	assert_int_equal(policy__hold(P, 30, 7 * SEC / TICK), 0);
	assert_int_equal(policy__hold(P, 30, 0), -EINVAL);
	/* An earlier process at the pid takes nothing from the later one's hold. */
	assert_int_equal(policy__hold(P, 30, 6 * SEC / TICK), -ESTALE);
	assert_true(policy__is_held(P, 30, 7 * SEC / TICK));
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	tick(due);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(stats()->held_past_retention, 0);
}

/* Two holders: the map stays until both released; a release of no hold changes nothing. */
static void test_hold_lasts_while_any_holder_holds(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	assert_int_equal(policy__hold(P, 30, 1 * SEC / TICK), 0);
	assert_int_equal(policy__hold(P, 30, 1 * SEC / TICK), 0);
	policy__release(P, 30, 9 * SEC / TICK);
	policy__release(P, 31, 1 * SEC / TICK);
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	policy__release(P, 30, 1 * SEC / TICK);
	tick(due + 5 * SEC);
	assert_true(F.map[30].exists);
	policy__release(P, 30, 1 * SEC / TICK);
	tick(due + 5 * SEC + RETRY_HELD_NS);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
}

/* At most HELD_MAX processes are held: more are refused and counted. */
static void test_holds_are_bounded(void **state)
{
	(void)state;
	for (pid_t pid = 1; pid <= HELD_MAX; pid++)
		assert_int_equal(policy__hold(P, pid, 5), 0);
	assert_int_equal(policy__hold(P, HELD_MAX + 1, 5), -ENOSPC);
	assert_int_equal(stats()->holds_refused, 1);
	/* Another hold of one held already takes no room. */
	assert_int_equal(policy__hold(P, 1, 5), 0);
	policy__release(P, 2, 5);
	assert_int_equal(policy__hold(P, HELD_MAX + 1, 5), 0);
	assert_int_equal(policy__held(P), HELD_MAX);
}

static void test_exit_busy_map_waits_ten_seconds_more(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	F.busy = 1;  /* a forked LuaJIT child still writes into it */
	tick(due);
	assert_true(F.map[30].exists);
	tick(due + 10 * SEC - 1);
	assert_true(F.map[30].exists);
	tick(due + 10 * SEC);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
}

static void test_exit_map_waits_while_the_archive_is_full(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	F.full = 2;  /* the archive's queue is full: not moved, tried again */
	tick(due);
	assert_true(F.map[30].exists);
	assert_int_equal(policy__retained(P), 1);
	tick(due + 10 * SEC);
	assert_true(F.map[30].exists);
	tick(due + 20 * SEC);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(policy__retained(P), 0);
	assert_int_equal(stats()->busy_deferred, 0);
}

static void test_exec_move_is_retried_while_the_archive_is_full(void **state)
{
	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	put_map(20, 500, born_span(BORN_BEFORE), ENTRIES_UNMAPPED);
	F.full = 1;
	exec_at(20, 1 * SEC, EXEC_NS);
	assert_true(F.map[20].exists);
	tick(policy__next_deadline(P));
	assert_int_equal(F.archived[20], 1 + ARCHIVE_EXEC);
	assert_int_equal(stats()->exec_archived, 1);
}

/* Out of fds: the exited map stays at its path and is tried again, never dropped. */
static void test_exit_map_without_an_fd_is_tried_again(void **state)
{
	uint64_t due;

	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	due = F.now + 600 * SEC;
	F.archive_err = -EMFILE;
	tick(due);
	assert_true(F.map[30].exists);
	assert_int_equal(policy__retained(P), 1);
	assert_int_equal(stats()->resource_deferred, 1);
	F.archive_err = 0;
	tick(due + 10 * SEC);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(policy__retained(P), 0);
}

/* Out of fds at a fork: the copy is tried again at the next ticks. */
static void test_copy_without_an_fd_is_tried_again(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, (struct span){ 2 * SEC, 2 * SEC }, ENTRIES_MAPPED);
	F.create_err = -EMFILE;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_false(F.map[11].exists);
	assert_int_equal(stats()->resource_deferred, 1);
	F.create_err = 0;
	tick(5 * SEC + 100 * MS);
	assert_true(F.map[11].exists);
	assert_int_equal(stats()->copies_created, 1);
	assert_int_equal(stats()->copies_failed, 0);
}

static void test_exit_of_a_map_made_after_it_is_not_retained(void **state)
{
	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	/* Made after the exit: by the next process at the pid, or anyone else. */
	put_map(30, 500, (struct span){ 20 * SEC + 1000, 20 * SEC + 9000 }, ENTRIES_UNKNOWN);
	exit_at(30, 1 * SEC, 20 * SEC);
	assert_int_equal(policy__retained(P), 0);
}

static void test_orphan_map_is_retained_unless_its_pid_lives(void **state)
{
	struct policy_event ev = { .type = POLICY_EV_MAP, .pid = 40, .start = SPAN_UNKNOWN,
				   .at = SPAN_UNKNOWN };

	(void)state;
	put_map(40, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
	F.alive[40] = true;   /* its fork event is still queued */
	policy__map_appeared(P, 40, F.now);
	tick(F.now);
	assert_int_equal(policy__retained(P), 0);
	F.alive[40] = false;
	policy__event(P, &ev, F.now);
	assert_int_equal(policy__retained(P), 1);
	tick(F.now + 600 * SEC);
	assert_int_equal(F.archived[40], 1 + ARCHIVE_EXIT);
}

static void map_found(pid_t pid)
{
	struct policy_event ev = { .type = POLICY_EV_MAP, .pid = pid, .start = SPAN_UNKNOWN,
				   .at = SPAN_UNKNOWN };

	policy__event(P, &ev, F.now);
}

static void test_orphan_maps_are_retained_up_to_a_bound_per_owner(void **state)
{
	struct policy_config c = cfg;
	pid_t pid;

	(void)state;
	c.orphans_per_uid = 3;
	reconfigure(&c);
	/* uid 1000 makes six maps for pids nobody holds. */
	for (pid = 40; pid < 46; pid++) {
		put_map(pid, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
		map_found(pid);
	}
	assert_int_equal(policy__retained(P), 3);
	assert_int_equal(stats()->orphans_over_limit, 3);
	/* Another owner's is not held back by uid 1000's. */
	put_map(50, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
	F.map[50].mi.uid = 2000;
	map_found(50);
	assert_int_equal(policy__retained(P), 4);
	/* Exited processes' maps are not orphans: no bound. */
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	assert_int_equal(policy__retained(P), 5);
	/* Those past the bound are where they were: nothing deleted, nothing moved. */
	for (pid = 43; pid < 46; pid++)
		assert_true(F.map[pid].exists);
	assert_int_equal(F.archive_calls, 0);
	/* Retention over: the three go to the archive, and the owner's bound frees up. */
	tick(F.now + 600 * SEC);
	assert_int_equal(F.archived[40], 1 + ARCHIVE_EXIT);
	assert_int_equal(F.archived[43], 0);
	map_found(43);
	assert_int_equal(policy__retained(P), 1);
	/* A process that takes a pid whose map was left has it judged as ever. */
	F.map[44].entries = ENTRIES_UNMAPPED;
	F.alive[44] = true;
	fork_at(44, 1, 700 * SEC, 0);
	assert_int_equal(F.archived[44], 1 + ARCHIVE_STALE);
}

/* A user ending processes by the thousand: past its cap, its exited maps go to the archive at the next tick. */
static void test_exited_maps_past_the_owners_cap_are_archived_at_once(void **state)
{
	struct policy_config c = cfg;
	pid_t pid;

	(void)state;
	c.retained_per_uid = 3;
	reconfigure(&c);
	for (pid = 30; pid < 36; pid++) {
		fork_at(pid, 1, 1 * SEC, 0);
		put_map(pid, 500, span_at(2 * SEC), ENTRIES_MAPPED);
		exit_at(pid, 1 * SEC, 20 * SEC);
	}
	/* Another owner's are not held back by uid 1000's. */
	fork_at(40, 1, 1 * SEC, 0);
	put_map(40, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	F.map[40].mi.uid = 2000;
	exit_at(40, 1 * SEC, 20 * SEC);
	assert_int_equal(stats()->retained_over_limit, 3);
	tick(F.now + 1);
	/* The first three wait their retention at their paths; the excess left at once, archived. */
	for (pid = 30; pid < 33; pid++)
		assert_int_equal(F.archived[pid], 0);
	for (pid = 33; pid < 36; pid++)
		assert_int_equal(F.archived[pid], 1 + ARCHIVE_EXIT);
	assert_int_equal(F.archived[40], 0);
	assert_int_equal(policy__retained(P), 4);
	tick(F.now + 600 * SEC);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_EXIT);
	assert_int_equal(policy__retained(P), 0);
}

static void test_orphan_claimed_by_a_new_process_frees_its_owners_bound(void **state)
{
	struct policy_config c = cfg;

	(void)state;
	c.orphans_per_uid = 1;
	reconfigure(&c);
	put_map(40, 100, SPAN_UNKNOWN, ENTRIES_UNMAPPED);
	map_found(40);
	put_map(41, 100, SPAN_UNKNOWN, ENTRIES_UNMAPPED);
	map_found(41);
	assert_int_equal(stats()->orphans_over_limit, 1);
	/* A new process at pid 40: the orphan entry goes with the claim. */
	F.alive[40] = true;
	fork_at(40, 1, 30 * SEC, 0);
	map_found(41);
	assert_int_equal(policy__retained(P), 1);
	assert_int_equal(stats()->orphans_over_limit, 1);
}

static void test_orphan_trap_is_left_and_warned_about_once(void **state)
{
	char *dir = tu_mkdtemp(), path[4096], *s;
	size_t len;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/log", dir);
	log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(log_fd >= 0);
	log_max_level = LOG_WARN;
	/* A second link to somebody's file, at a pid nobody holds: found again at every listing. */
	put_map(40, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
	F.map[40].mi.refused = -EMLINK;
	map_found(40);
	map_found(40);
	policy__map_appeared(P, 40, F.now);
	tick(F.now);
	/* Another trap, at another pid. */
	put_map(41, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
	F.map[41].mi.refused = -ELOOP;
	map_found(41);
	log_max_level = LOG_ERROR;
	close(log_fd);
	log_fd = STDERR_FILENO;
	assert_int_equal(policy__retained(P), 0);
	assert_int_equal(stats()->orphan_traps, 4);
	assert_int_equal(F.archive_calls, 0);
	assert_true(F.map[40].exists);
	s = tu_read(path, &len);
	assert_non_null(s);
	assert_string_equal(s,
		"perfmapd: warning: scan: /fake/perf-40.map has no process and has more than one hard link, refused; left in place\n"
		"perfmapd: warning: scan: /fake/perf-41.map has no process and is a symlink, refused; left in place\n");
	free(s);
	tu_rmdir(dir);
}

/* A trap met by a scan, then at a fork's path, its copy and its exit: one warning in all. */
static void test_a_trap_is_said_once_wherever_it_is_met(void **state)
{
	char *dir = tu_mkdtemp(), path[4096], *s;
	size_t len;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/log", dir);
	log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(log_fd >= 0);
	log_max_level = LOG_WARN;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, (struct span){ 2 * SEC, 2 * SEC }, ENTRIES_MAPPED);
	put_map(44, 100, span_at(3 * SEC), ENTRIES_UNKNOWN);
	F.map[44].mi.refused = -ELOOP;
	map_found(44);
	fork_at(44, 10, 5 * SEC, 1 * SEC);
	exit_at(44, 5 * SEC, 6 * SEC);
	log_max_level = LOG_ERROR;
	close(log_fd);
	log_fd = STDERR_FILENO;
	assert_int_equal(stats()->copies_failed, 1);
	assert_int_equal(policy__retained(P), 0);
	assert_int_equal(F.archive_calls, 0);
	s = tu_read(path, &len);
	assert_non_null(s);
	assert_string_equal(s,
		"perfmapd: warning: scan: /fake/perf-44.map has no process and is a symlink, refused; left in place\n");
	free(s);
	tu_rmdir(dir);
}

/*
 * Maps made at pids nobody holds are weighed at the tick, a bounded number a
 * tick: a storm of them made and deleted costs the event loop no look each.
 */
static void test_orphans_are_weighed_at_the_tick_in_bounded_batches(void **state)
{
	int looks;
	int i;

	(void)state;
	/* 300 maps made (and deleted again) at pids nobody holds. */
	looks = F.looks;
	for (i = 0; i < 300; i++)
		policy__map_appeared(P, 20 + i % 40, F.now);
	assert_int_equal(F.looks, looks);
	tick(F.now + 100 * MS);
	assert_int_equal(F.looks - looks, 256);
	tick(F.now + 100 * MS);
	assert_int_equal(F.looks - looks, 300);
	/* One that is there at the tick is retained, as one a listing finds. */
	put_map(21, 100, SPAN_UNKNOWN, ENTRIES_UNKNOWN);
	policy__map_appeared(P, 21, F.now);
	tick(F.now + 100 * MS);
	assert_int_equal(policy__retained(P), 1);
	/* Past the queue's bound, more are left where they are, and counted. */
	for (i = 0; i < 4096 + 10; i++)
		policy__map_appeared(P, 20 + i % 40, F.now);
	assert_int_equal(stats()->orphan_checks_dropped, 10);
}

/* ---- pid reuse ---- */

static void test_reuse_archives_the_earlier_processs_untouched_map(void **state)
{
	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	/* A new process at pid 30; its mappings happen to cover the old entries (prefork). */
	F.map[30].entries = ENTRIES_MAPPED;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_STALE);
	assert_int_equal(stats()->stale_archived, 1);
	assert_int_equal(stats()->by_identity, 1);
	assert_int_equal(policy__retained(P), 0);
}

static void test_reuse_keeps_a_map_the_new_process_appended_to(void **state)
{
	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	F.map[30].mi.size += 60;  /* the new holder's runtime appended before the agent read the fork */
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_true(F.map[30].exists);
	assert_int_equal(F.archived[30], 0);
	assert_int_equal(stats()->ambiguous_kept, 1);
	assert_int_equal(policy__retained(P), 0);  /* the pid has a new holder: nothing to expire */
}

static void test_reuse_keeps_the_new_processs_own_map(void **state)
{
	(void)state;
	fork_at(30, 1, 1 * SEC, 0);
	put_map(30, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	exit_at(30, 1 * SEC, 20 * SEC);
	/* The old map is gone; the new process made its own microseconds after its start. */
	put_map(30, 80, (struct span){ 30 * SEC + 2000, 30 * SEC + 5000 }, ENTRIES_NONE);
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_true(F.map[30].exists);
	assert_int_equal(F.archive_calls, 0);
	tick(F.now + 700 * SEC);
	assert_true(F.map[30].exists);
}

/*
 * uid 2000 plants perf-<pid>.map files for the pids a uid 1000 process will
 * take next. Whatever keeps an earlier holder's map in place (a writer, a
 * full archive queue, no identity record), such a map is never the new
 * holder's: it is moved aside, not kept for it.
 */
static void plant(pid_t pid, enum map_entries entries)
{
	put_map(pid, 100, span_at(5 * SEC), entries);
	F.map[pid].mi.uid = 2000;
}

/* (a) The archive's queue is full. */
static void test_squatted_map_goes_even_with_the_archive_full(void **state)
{
	(void)state;
	plant(30, ENTRIES_UNMAPPED);
	F.full = 1 << 30;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_false(F.map[30].exists);
	assert_int_equal(F.archived[30], 1 + ARCHIVE_STALE);
	assert_int_equal(F.squatted_moves, 1);
	assert_int_equal(stats()->squatted_moved, 1);
	assert_int_equal(stats()->ambiguous_kept, 0);
	/* The child gets its own map, a copy of its parent's, at the path freed. */
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(31, 10, 40 * SEC, 1 * SEC);
	assert_int_equal(F.creates, 1);
}

/* (b) The planter holds it open for writing. */
static void test_squatted_map_goes_even_while_open_for_writing(void **state)
{
	(void)state;
	plant(30, ENTRIES_MAPPED);
	F.busy = 1 << 30;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_false(F.map[30].exists);
	assert_int_equal(F.squatted_moves, 1);
	assert_int_equal(stats()->busy_deferred, 0);
	assert_int_equal(stats()->ambiguous_kept, 0);
}

/* (c) Past the owner's orphan bound: left, no record; entries that look mapped ([vsyscall]). */
static void test_squatted_map_past_the_orphan_bound_is_not_kept(void **state)
{
	struct policy_config c = cfg;

	(void)state;
	c.orphans_per_uid = 1;
	reconfigure(&c);
	plant(40, ENTRIES_MAPPED);
	map_found(40);
	plant(41, ENTRIES_MAPPED);
	F.map[41].mi.born = SPAN_UNKNOWN;
	map_found(41);
	assert_int_equal(stats()->orphans_over_limit, 1);
	F.alive[41] = true;
	fork_at(41, 1, 30 * SEC, 0);
	assert_false(F.map[41].exists);
	assert_int_equal(F.archived[41], 1 + ARCHIVE_STALE);
	assert_int_equal(stats()->ambiguous_kept, 0);
	/* Found by a scan instead of a fork: alike. */
	plant(42, ENTRIES_MAPPED);
	F.alive[42] = true;
	send(POLICY_EV_FOUND, 42, 1, 30 * SEC, 0, 0, 0);
	assert_false(F.map[42].exists);
	assert_int_equal(stats()->squatted_moved, 2);
}

/* Planted after the claim, before the runtime opens its path: moved as it appears. */
static void test_squatted_map_made_after_the_claim_goes(void **state)
{
	(void)state;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	put_map(30, 100, span_at(31 * SEC), ENTRIES_NONE);
	F.map[30].mi.uid = 2000;
	policy__map_appeared(P, 30, F.now);
	assert_false(F.map[30].exists);
	assert_int_equal(stats()->squatted_moved, 1);
}

/* Root's maps, and a map a root process's path got after its start, are not squatted. */
static void test_root_maps_and_root_processes_are_not_squatted(void **state)
{
	struct policy_event ev = { .type = POLICY_EV_FORK, .pid = 32, .ppid = 1,
				   .start_ticks = 30 * SEC / TICK, .start = span_at(30 * SEC),
				   .pstart = span_at(0), .at = span_at(30 * SEC + 1000), .uid = 0,
				   .comm = "root" };

	(void)state;
	/* Written as root before the runtime dropped to uid 1000, then appended to. */
	put_map(30, 100, span_at(31 * SEC), ENTRIES_MAPPED);
	F.map[30].mi.uid = 0;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_true(F.map[30].exists);
	/* A root child that dropped to uid 2000 and made its map after its fork. */
	put_map(32, 100, span_at(31 * SEC), ENTRIES_MAPPED);
	F.map[32].mi.uid = 2000;
	F.now = 32 * SEC;
	policy__event(P, &ev, F.now);
	assert_true(F.map[32].exists);
	assert_int_equal(stats()->squatted_moved, 0);
	/* But one made before a root process's start is another user's. */
	plant(33, ENTRIES_MAPPED);
	ev.pid = 33;
	policy__event(P, &ev, F.now);
	assert_false(F.map[33].exists);
	assert_int_equal(stats()->squatted_moved, 1);
	/* And so is one seen before it without a process, though the index lost when it was made. */
	plant(34, ENTRIES_MAPPED);
	F.map[34].mi.born = SPAN_UNKNOWN;
	map_found(34);
	F.map[34].mi.size += 30;  /* written after it was seen: still its planter's, by its owner */
	ev.pid = 34;
	ev.start = span_at(F.now + SEC);
	ev.start_ticks = (F.now + SEC) / TICK;
	F.now += 2 * SEC;
	policy__event(P, &ev, F.now);
	assert_false(F.map[34].exists);
	assert_int_equal(stats()->squatted_moved, 2);
}

/* No fd to move it: left, counted, and not taken as the process's own. */
static void test_squatted_map_that_cannot_move_is_not_owned(void **state)
{
	(void)state;
	plant(30, ENTRIES_MAPPED);
	F.archive_err = -EMFILE;
	F.alive[30] = true;
	fork_at(30, 1, 30 * SEC, 0);
	assert_true(F.map[30].exists);
	assert_int_equal(stats()->squatted_left, 1);
	/* Its children get none of the planter's entries. */
	fork_at(31, 30, 31 * SEC, 30 * SEC);
	assert_int_equal(F.creates, 0);
	assert_int_equal(F.entries_calls, 0);
	F.archive_err = 0;
	policy__map_appeared(P, 30, F.now);
	assert_false(F.map[30].exists);
	assert_int_equal(stats()->squatted_moved, 1);
}

static void test_reuse_after_an_unseen_exit(void **state)
{
	(void)state;
	/* A map left long before, whose writer's exit the agent never saw. */
	put_map(31, 500, span_at(2 * SEC), ENTRIES_UNMAPPED);
	fork_at(31, 1, 30 * SEC, 0);
	assert_int_equal(F.archived[31], 1 + ARCHIVE_STALE);
	/* The same, but the new process's mappings cover its entries: it may have appended. */
	put_map(32, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(32, 1, 30 * SEC, 0);
	assert_true(F.map[32].exists);
	assert_int_equal(stats()->ambiguous_kept, 1);
}

static void test_fork_read_after_the_child_execd_keeps_the_map(void **state)
{
	(void)state;
	/*
	 * Read late: the child exec'd a JIT that made its map, then exec'd again.
	 * The entries name none of the latest image's memory, but that says
	 * nothing of whether they were there before the fork: the exec events
	 * decide, not the fork.
	 */
	put_map(34, 500, (struct span){ 29 * SEC, 31 * SEC }, ENTRIES_UNMAPPED);
	F.execd[34] = 30 * SEC + 5 * MS;
	fork_at(34, 1, 30 * SEC, 0);
	assert_true(F.map[34].exists);
	assert_int_equal(F.archive_calls, 0);
	exec_at(34, 30 * SEC, 30 * SEC + 5 * MS);
	assert_int_equal(F.archived[34], 1 + ARCHIVE_EXEC);
}

static void test_reuse_seen_by_a_start_time_that_changed(void **state)
{
	(void)state;
	fork_at(33, 1, 1 * SEC, 0);
	put_map(33, 500, span_at(2 * SEC), ENTRIES_UNMAPPED);
	/* The exit was lost: the fork of another process at 33 tells. */
	fork_at(33, 1, 30 * SEC, 0);
	assert_int_equal(F.archived[33], 1 + ARCHIVE_STALE);
	assert_int_equal(policy__processes(P), 1);
}

/* ---- scans ---- */

static void test_scan_ends_the_unseen_and_copies_the_found(void **state)
{
	struct policy_event found = { .type = POLICY_EV_FOUND, .pid = 51, .ppid = 50,
				      .start_ticks = 500, .start = span_of_ticks(500, TICK),
				      .pstart = SPAN_UNKNOWN, .at = SPAN_UNKNOWN, .uid = 1000 };

	(void)state;
	fork_at(50, 1, 1 * SEC, 0);
	fork_at(60, 1, 2 * SEC, 0);
	put_map(60, 100, span_at(3 * SEC), ENTRIES_MAPPED);
	put_map(50, 100, span_at(3 * SEC), ENTRIES_MAPPED);
	assert_true(policy__mark(P, 50, 1 * SEC / TICK));
	assert_false(policy__mark(P, 60, 99));  /* another process at 60 now */
	policy__sweep(P, true, F.now);
	assert_int_equal(policy__processes(P), 1);
	assert_int_equal(policy__retained(P), 1);  /* 60's map waits for the retention */
	/* A child forked while no agent ran, still running its parent's image. */
	F.same_image = true;
	policy__event(P, &found, F.now);
	assert_true(F.map[51].exists);
	assert_int_equal(stats()->copies_created, 1);
}


/* ---- what review found: each once a way to lose or misplace a map ---- */

static void test_busy_move_is_not_retried_on_a_file_written_since(void **state)
{
	(void)state;
	fork_at(20, 1, 1 * SEC, 0);
	put_map(20, 500, born_span(BORN_BEFORE), ENTRIES_UNMAPPED);
	F.busy = 1;
	exec_at(20, 1 * SEC, EXEC_NS);
	assert_true(F.map[20].exists);
	/* While the move waits, the new image opens the file and writes its lines. */
	F.map[20].mi.size += 80;
	tick(policy__next_deadline(P));
	assert_true(F.map[20].exists);
	assert_int_equal(F.archived[20], 0);
	assert_int_equal(stats()->ambiguous_kept, 1);
	assert_int_equal(policy__next_deadline(P), UINT64_MAX);
}

static void test_exit_of_an_earlier_holder_leaves_the_new_ones_map(void **state)
{
	struct policy_event found = { .type = POLICY_EV_FOUND, .pid = 36, .ppid = 1,
				      .start_ticks = 3000, .start = span_of_ticks(3000, TICK),
				      .pstart = SPAN_UNKNOWN, .at = SPAN_UNKNOWN, .uid = 1000 };

	(void)state;
	fork_at(36, 1, 1 * SEC, 0);
	/* Its exit queued, then another process at its pid, whose fork event was lost. */
	put_map(36, 80, (struct span){ 30 * SEC + 10 * MS, 30 * SEC + 20 * MS }, ENTRIES_MAPPED);
	F.now = 40 * SEC;
	policy__event(P, &found, F.now);
	assert_true(F.map[36].exists);
	assert_int_equal(policy__retained(P), 0);
	/* The first one's exit, read now, is not the map's. */
	exit_at(36, 1 * SEC, 29 * SEC);
	assert_int_equal(policy__retained(P), 0);
	assert_int_equal(policy__processes(P), 1);
	tick(F.now + 700 * SEC);
	assert_true(F.map[36].exists);
	assert_int_equal(F.archive_calls, 0);
}

static void test_no_copy_lands_at_a_pid_another_process_holds(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	F.taken[11] = true;  /* the child exited and its pid went on before the fork was read */
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_false(F.map[11].exists);
	assert_int_equal(stats()->copies_created, 0);
	assert_int_equal(stats()->copies_failed, 0);
}

static void test_old_image_map_waiting_to_move_is_not_copied(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 3 * SEC, 1 * SEC);   /* the map is judged the parent's own here */
	assert_int_equal(stats()->copies_created, 1);
	F.map[10].entries = ENTRIES_UNMAPPED;
	F.busy = 1;
	exec_at(10, 1 * SEC, EXEC_NS);     /* the old image's: its move waits */
	fork_at(12, 10, EXEC_NS + MS, 1 * SEC);
	assert_false(F.map[12].exists);
	assert_int_equal(stats()->copies_created, 1);
}

static void test_appended_map_is_not_dropped_as_only_a_copy(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	put_map(11, 40, span_at(5 * SEC + 200), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_appended, 1);
	/* The child's own line and the parent's entries, unchanged since: not "only our copy". */
	F.map[11].entries = ENTRIES_UNMAPPED;
	exec_at(11, 5 * SEC, EXEC_NS);
	assert_int_equal(F.archived[11], 1 + ARCHIVE_EXEC);
	assert_int_equal(stats()->exec_dropped, 0);
}

static void test_exec_of_a_process_the_table_did_not_know_ends_the_old_one(void **state)
{
	(void)state;
	fork_at(37, 1, 1 * SEC, 0);
	put_map(37, 100, span_at(2 * SEC), ENTRIES_UNMAPPED);
	/* An exec of another process at pid 37: the first one's exit and the second's fork were lost. */
	F.execd[37] = EXEC_NS;
	send(POLICY_EV_EXEC, 37, 0, 8 * SEC, 0, EXEC_NS, 0);
	assert_int_equal(policy__processes(P), 1);
	/* The first one's map: not the new process's, and archived as the old image's. */
	assert_int_equal(F.archived[37], 1 + ARCHIVE_EXEC);
}

static void test_fork_child_sharing_its_parents_memory_proves_nothing(void **state)
{
	(void)state;
	/*
	 * A sibling's map left at the pid (prefork servers): its entries name
	 * the parent's memory, which the new child shares.
	 */
	put_map(38, 500, SPAN_UNKNOWN, ENTRIES_MAPPED);
	fork_at(38, 1, 30 * SEC, 0);
	assert_true(F.map[38].exists);
	assert_int_equal(stats()->ambiguous_kept, 1);
}

static void test_a_map_seen_appearing_is_not_judged_again_by_a_listing(void **state)
{
	struct policy_event ev = { .type = POLICY_EV_MAP, .pid = 39, .start = SPAN_UNKNOWN,
				   .at = SPAN_UNKNOWN };

	(void)state;
	fork_at(39, 1, 1 * SEC, 0);
	put_map(39, 100, (struct span){ 2 * SEC, 2 * SEC + MS }, ENTRIES_UNMAPPED);
	policy__map_appeared(P, 39, F.now);
	/* An overflow later: the listing knows no birth; its newest code was freed. */
	F.map[39].mi.born = SPAN_UNKNOWN;
	policy__event(P, &ev, F.now);
	assert_true(F.map[39].exists);
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(F.entries_calls, 0);
}

static void test_identity_evidence_rewritten_and_too_late(void **state)
{
	(void)state;
	/* Shrunk since the exit: rewritten (a runtime that truncates) by the new holder. */
	fork_at(40, 1, 1 * SEC, 0);
	put_map(40, 500, span_at(2 * SEC), ENTRIES_UNMAPPED);
	exit_at(40, 1 * SEC, 20 * SEC);
	F.map[40].mi.size = 100;
	fork_at(40, 1, 30 * SEC, 0);
	assert_true(F.map[40].exists);
	assert_int_equal(stats()->by_identity, 1);

	/* Seen only after the new process started: what it shows may be the new one's. */
	fork_at(41, 1, 1 * SEC, 0);
	put_map(41, 500, span_at(2 * SEC), ENTRIES_MAPPED);
	F.now = 50 * SEC;
	exit_at(41, 1 * SEC, 45 * SEC);
	fork_at(41, 1, 48 * SEC, 0);   /* started before the agent read the exit */
	assert_true(F.map[41].exists);
	assert_int_equal(stats()->by_identity, 1);
	assert_int_equal(stats()->ambiguous_kept, 1);  /* born before, entries mapped */
}

static void test_exec_of_a_holder_new_to_the_table_leaves_nothing_to_expire(void **state)
{
	(void)state;
	fork_at(37, 1, 1 * SEC, 0);
	/* A's exit and B's fork were lost; B's new image made its map, then its exec was read. */
	put_map(37, 100, (struct span){ EXEC_NS + 1000, EXEC_NS + 2000 }, ENTRIES_MAPPED);
	F.execd[37] = EXEC_NS;
	send(POLICY_EV_EXEC, 37, 0, 8 * SEC, 0, EXEC_NS, 0);
	assert_true(F.map[37].exists);
	assert_int_equal(policy__retained(P), 0);
	tick(F.now + 700 * SEC);
	assert_true(F.map[37].exists);
	assert_int_equal(F.archive_calls, 0);
}

static void test_parents_map_from_before_its_exec_is_not_copied(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 3 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_created, 1);
	/* The exec judges it the old image's, but it cannot be moved. */
	F.map[10].entries = ENTRIES_UNMAPPED;
	F.archive_err = -EPERM;
	exec_at(10, 1 * SEC, EXEC_NS);
	assert_true(F.map[10].exists);
	/* The new image forks: the old image's entries are not its code. */
	fork_at(12, 10, EXEC_NS + MS, 1 * SEC);
	assert_false(F.map[12].exists);
	assert_int_equal(stats()->copies_created, 1);
}

/* A parent forking a thousand times past an old image's map: judged once, said once, judged again when it grows. */
static void test_parents_old_map_is_judged_and_said_once(void **state)
{
	char *dir = tu_mkdtemp(), path[4096], *s;
	int entries, i;
	size_t len;

	(void)state;
	assert_non_null(dir);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_UNMAPPED);
	F.archive_err = -EPERM;
	exec_at(10, 1 * SEC, EXEC_NS);
	snprintf(path, sizeof(path), "%s/log", dir);
	log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(log_fd >= 0);
	log_max_level = LOG_INFO;
	entries = F.entries_calls;
	for (i = 0; i < 1000; i++)
		fork_at(20 + i % 40, 10, EXEC_NS + (i + 1) * MS, 1 * SEC);
	assert_int_equal(F.entries_calls - entries, 1);
	assert_int_equal(stats()->copies_created, 0);
	/* Grown: weighed again, not said again. */
	F.map[10].mi.size += 50;
	fork_at(61, 10, EXEC_NS + 2 * SEC, 1 * SEC);
	assert_int_equal(F.entries_calls - entries, 2);
	log_max_level = LOG_ERROR;
	close(log_fd);
	log_fd = STDERR_FILENO;
	s = tu_read(path, &len);
	assert_non_null(s);
	assert_non_null(strstr(s, "is not the parent's"));
	assert_null(strstr(strstr(s, "is not the parent's") + 1, "is not the parent's"));
	free(s);
	tu_rmdir(dir);
}

static void test_a_map_seen_appearing_stays_its_parents_own(void **state)
{
	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, (struct span){ 2 * SEC, 2 * SEC + MS }, ENTRIES_UNMAPPED);
	policy__map_appeared(P, 10, F.now);
	/* Lost changes later: the index can no longer say; its newest code was freed. */
	F.map[10].mi.born = SPAN_UNKNOWN;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_true(F.map[11].exists);
	assert_int_equal(F.entries_calls, 0);
}

static void test_a_scan_cut_short_ends_nobody(void **state)
{
	(void)state;
	fork_at(50, 1, 1 * SEC, 0);
	fork_at(51, 1, 2 * SEC, 0);
	assert_true(policy__mark(P, 50, 1 * SEC / TICK));
	policy__sweep(P, false, F.now);
	assert_int_equal(policy__processes(P), 2);
	/* The marks are gone: a full scan that marks nobody ends both. */
	policy__sweep(P, true, F.now);
	assert_int_equal(policy__processes(P), 0);
}

static void test_found_child_sharing_its_parents_image_proves_nothing(void **state)
{
	struct policy_event found = { .type = POLICY_EV_FOUND, .pid = 53, .ppid = 52,
				      .start_ticks = 500, .start = span_of_ticks(500, TICK),
				      .pstart = SPAN_UNKNOWN, .at = SPAN_UNKNOWN, .uid = 1000 };

	(void)state;
	fork_at(52, 1, 1 * SEC, 0);
	put_map(53, 100, SPAN_UNKNOWN, ENTRIES_MAPPED);
	F.same_image = true;
	policy__event(P, &found, F.now);
	assert_true(F.map[53].exists);
	assert_int_equal(stats()->ambiguous_kept, 1);
	/* Another image than its parent's: its own mappings, its own map. */
	F.same_image = false;
	found.pid = 54;
	put_map(54, 100, SPAN_UNKNOWN, ENTRIES_MAPPED);
	policy__event(P, &found, F.now);
	assert_int_equal(stats()->ambiguous_kept, 1);
	assert_int_equal(stats()->by_mappings, 2);
}

/* ---- the cost of copies: sparse maps, budgets, the worker ---- */

#define KB 1024ull
#define MB (1024ull * 1024)

/* A map of @size bytes of which only @disk_bytes are written: the rest is holes. */
static void put_sparse_map(pid_t pid, uint64_t size, uint64_t disk_bytes, struct span born)
{
	put_map(pid, size, born, ENTRIES_MAPPED);
	F.map[pid].mi.disk_bytes = disk_bytes;
}

/* The worker's copy done: its result back to the policy, as the event loop does. */
static void finish_deferred(void)
{
	struct copy_result res;
	int err = fake_make_deferred(&res);

	policy__copy_done(P, F.rq.child, F.ticket, err, &res, F.now);
}

static void budget_config(uint64_t rate, uint64_t burst, uint64_t defer_bytes, uint64_t loop_rate)
{
	struct policy_config c = cfg;

	c.max_map_bytes = 1ull << 30;
	c.copy_rate = rate;
	c.copy_burst = burst;
	c.defer_copy_bytes = defer_bytes;
	c.loop_copy_rate = loop_rate;
	reconfigure(&c);
}

static void test_sparse_map_costs_what_its_parent_wrote(void **state)
{
	(void)state;
	/* 1 MB a second for each uid: far less than the map's apparent 250 MB. */
	budget_config(1 * MB, 1 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_sparse_map(10, 250 * MB, 4 * KB, span_at(2 * SEC));
	for (pid_t c = 11; c <= 20; c++)
		fork_at(c, 10, (5 + c) * SEC, 1 * SEC);
	/* Ten copies of 4 KB of data, each small enough for the event loop. */
	assert_int_equal(F.creates, 10);
	assert_int_equal(F.defers, 0);
	assert_int_equal(stats()->copies_created, 10);
	assert_int_equal(stats()->copies_over_budget, 0);
	assert_int_equal(stats()->copy_bytes, 40 * KB);
}

static void test_copy_budget_is_per_uid_and_refills_with_the_clock(void **state)
{
	struct policy_event ev = { .type = POLICY_EV_FORK, .comm = "other" };

	(void)state;
	budget_config(1 * MB, 1 * MB, 0, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 600 * KB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_created, 1);
	/* 400 KB left: the next 600 KB copy of uid 1000 is refused, and counted. */
	fork_at(12, 10, 5 * SEC + 1 * MS, 1 * SEC);
	assert_int_equal(F.creates, 1);
	assert_false(F.map[12].exists);
	assert_int_equal(stats()->copies_over_budget, 1);
	/* Another uid's copy is not charged to uid 1000. */
	ev.pid = 13;
	ev.ppid = 10;
	ev.start_ticks = (5 * SEC + 2 * MS) / TICK;
	ev.start = ev.at = span_at(5 * SEC + 2 * MS);
	ev.pstart = span_at(1 * SEC);
	ev.uid = ev.gid = 2000;
	F.now = ev.at.hi;
	policy__event(P, &ev, F.now);
	assert_int_equal(F.creates, 2);
	assert_true(F.map[13].exists);
	/* A tenth of a second later, 100 KB more: still not enough. */
	fork_at(14, 10, 5 * SEC + 100 * MS, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 2);
	/* The agent's clock refills it: 1 MB a second. */
	fork_at(15, 10, 6 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 2);
	assert_true(F.map[15].exists);
	assert_int_equal(stats()->copy_bytes, 3 * 600 * KB);
}

static void test_large_copy_is_made_by_the_worker_and_recorded_as_ours(void **state)
{
	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	/* Not in the event loop: queued, nothing at the path yet. */
	assert_int_equal(F.creates, 0);
	assert_int_equal(F.defers, 1);
	assert_int_equal(F.op, COPY_OP_CREATE);
	assert_int_equal(stats()->copies_deferred, 1);
	assert_false(F.map[11].exists);
	/* Retries wait for the worker: one copy at a time. */
	tick(F.now + 100 * MS);
	assert_int_equal(F.defers, 1);
	finish_deferred();
	assert_true(F.map[11].exists);
	assert_int_equal(stats()->copies_created, 1);
	assert_int_equal(stats()->copy_bytes, 5 * MB);
	/* Recorded as perfmapd's copy: the child's exec drops it, unwritten. */
	exec_at(11, 5 * SEC, 6 * SEC);
	assert_int_equal(F.settles, 0);
	assert_int_equal(F.archived[11], 1 + ARCHIVE_DROP);
}

static void test_child_exec_while_its_copy_is_queued_stops_it(void **state)
{
	(void)state;
	budget_config(10 * MB, 10 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.defers, 1);
	/* The new image writes its own map; the exec stops the copy before it is weighed. */
	put_map(11, 40, span_at(6 * SEC + 1 * MS), ENTRIES_MAPPED);
	exec_at(11, 5 * SEC, 6 * SEC);
	assert_int_equal(F.settles, 1);
	assert_false(F.pending);
	assert_int_equal(stats()->copies_skipped_exec, 1);
	assert_int_equal(stats()->copies_created + stats()->copies_appended, 0);
	/* The new image's own map stays, untouched. */
	assert_int_equal(F.archive_calls, 0);
	assert_int_equal(F.map[11].mi.size, 40);
	/* The budget was given back: two more 5 MB copies fit in 10 MB. */
	fork_at(12, 10, 7 * SEC, 1 * SEC);
	finish_deferred();
	fork_at(13, 10, 7 * SEC + 1 * MS, 1 * SEC);
	finish_deferred();
	assert_int_equal(stats()->copies_over_budget, 0);
	assert_int_equal(stats()->copies_created, 2);
}

static void test_child_exec_after_its_copy_showed_drops_the_copy(void **state)
{
	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	/* Linked in before the exec was read, its result not drained yet: settling takes it. */
	F.settle_shows = true;
	exec_at(11, 5 * SEC, 6 * SEC);
	assert_int_equal(F.settles, 1);
	assert_int_equal(stats()->copies_created, 1);
	/* Only the parent's entries, which the new image has none of. */
	assert_int_equal(F.archived[11], 1 + ARCHIVE_DROP);
	assert_false(F.map[11].exists);
}

static void test_child_exit_while_its_copy_is_queued(void **state)
{
	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	exit_at(11, 5 * SEC, 6 * SEC);
	/* Stopped: nothing to retain, nothing made for a process that is gone. */
	assert_int_equal(F.settles, 1);
	assert_false(F.map[11].exists);
	assert_int_equal(policy__retained(P), 0);
	assert_int_equal(stats()->copies_created, 0);

	/* Shown before the exit was read: the copy is the exited child's map, kept. */
	F.settle_shows = true;
	fork_at(12, 10, 7 * SEC, 1 * SEC);
	exit_at(12, 7 * SEC, 8 * SEC);
	assert_int_equal(F.settles, 2);
	assert_true(F.map[12].exists);
	assert_int_equal(policy__retained(P), 1);
	assert_int_equal(stats()->copies_created, 1);
}

static void test_copy_done_for_a_child_gone_since_changes_nothing(void **state)
{
	uint64_t old_ticket;
	struct copy_result res = { .kind = COPY_APPENDED, .entries = 3, .bytes = 5 * MB };

	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	old_ticket = F.ticket;
	exit_at(11, 5 * SEC, 6 * SEC);
	/* The pid is another process's by now, with a copy of its own queued. */
	fork_at(11, 10, 7 * SEC, 1 * SEC);
	assert_int_equal(F.defers, 2);
	/* A result of the first copy arriving late (an append in progress at the exit) is not the second's. */
	res.map = (struct map_info){ .dev = 1, .ino = 999, .size = 5 * MB };
	policy__copy_done(P, 11, old_ticket, 0, &res, F.now);
	assert_int_equal(stats()->copies_appended, 0);
	assert_int_equal(stats()->copy_bytes, 5 * MB);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 1);
	assert_true(F.map[11].exists);
}

static void test_pid_reused_while_a_copy_is_queued_stops_it(void **state)
{
	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	/* Its exit lost: the next holder of pid 11 forks; the first one's copy must not land. */
	fork_at(11, 1, 9 * SEC, 0);
	assert_int_equal(F.settles, 1);
	assert_false(F.map[11].exists);
}

static void test_deferred_create_finding_a_map_appends_to_it(void **state)
{
	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	/* The child's runtime made its map while the copy waited. */
	put_map(11, 40, span_at(5 * SEC + 200), ENTRIES_MAPPED);
	finish_deferred();
	assert_int_equal(F.defers, 2);
	assert_int_equal(F.op, COPY_OP_APPEND);
	finish_deferred();
	assert_int_equal(stats()->copies_appended, 1);
	assert_int_equal(F.map[11].mi.size, 40 + 5 * MB);
	/* A deferred append that meets an unfinished line is tried again, in the worker. */
	put_map(12, 40, span_at(6 * SEC + 200), ENTRIES_MAPPED);
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	finish_deferred();
	assert_int_equal(F.op, COPY_OP_APPEND);
	F.append_eagain = 1;
	finish_deferred();
	assert_int_equal(F.defers, 4);
	assert_false(F.pending);
	tick(F.now + 100 * MS);
	assert_int_equal(F.defers, 5);
	finish_deferred();
	finish_deferred();
	assert_int_equal(stats()->copies_appended, 2);
	assert_int_equal(stats()->copies_failed, 0);
}

static void test_a_uids_many_small_copies_leave_the_event_loop(void **state)
{
	(void)state;
	/* 1 MB a second of copies in the event loop for each uid. */
	budget_config(0, 0, 64 * KB, 1 * MB);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 60 * KB, span_at(2 * SEC), ENTRIES_MAPPED);
	for (pid_t c = 11; c < 11 + 16; c++)
		fork_at(c, 10, 5 * SEC + c * MS, 1 * SEC);
	/* 16 copies of 60 KB fit the loop's share; the 18th goes to the worker. */
	assert_int_equal(F.creates, 16);
	fork_at(27, 10, 5 * SEC + 27 * MS, 1 * SEC);
	assert_int_equal(F.creates, 17);
	fork_at(28, 10, 5 * SEC + 28 * MS, 1 * SEC);
	assert_int_equal(F.creates, 17);
	assert_int_equal(F.defers, 1);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 18);
}

/* The whole queue full is nobody's budget: put off, not refused, and made once there is room. */
static void test_a_queue_full_for_everyone_is_tried_again(void **state)
{
	(void)state;
	budget_config(10 * MB, 10 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	F.defer_err = -EBUSY;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 0);
	assert_int_equal(stats()->copies_queue_full, 1);
	assert_int_equal(stats()->copies_deferred, 0);
	F.defer_err = 0;
	tick(F.now + 100 * MS);
	assert_int_equal(stats()->copies_deferred, 1);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 1);
	/* Charged once: another 5 MB copy fits the 10 MB. */
	fork_at(12, 10, F.now + MS, 1 * SEC);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 2);
	assert_int_equal(stats()->copies_over_budget, 0);
}

/* A copy stopped while it was being made keeps its charge: exiting mid-copy makes no copy free. */
static void test_a_copy_stopped_while_made_keeps_its_charge(void **state)
{
	struct copy_result res = { .bytes = 3 * MB };

	(void)state;
	budget_config(1, 6 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_deferred, 1);
	F.settle_running = true;
	exit_at(11, 5 * SEC, 5 * SEC + MS);
	/* Its result comes later, stopped, with what it wrote. */
	policy__copy_done(P, 11, F.ticket, -ECANCELED, &res, F.now);
	assert_int_equal(stats()->copy_bytes, 3 * MB);
	/* The 5 MB stay spent: the next 5 MB copy is over the 6 MB. */
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 1);
}

static void test_a_uids_full_share_puts_the_copy_off(void **state)
{
	(void)state;
	budget_config(10 * MB, 10 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	/* The uid has its share of the workers' queue: not refused, tried again. */
	F.defer_err = -EAGAIN;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 0);
	assert_int_equal(stats()->copies_queue_full, 1);
	assert_int_equal(stats()->copies_deferred, 0);
	assert_false(F.map[11].exists);
	/* Room again: the retry at the tick sends it, and nothing had been spent on it. */
	F.defer_err = 0;
	tick(5 * SEC + 100 * MS);
	finish_deferred();
	assert_true(F.map[11].exists);
	fork_at(12, 10, 5 * SEC + 200 * MS, 1 * SEC);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 2);
	assert_int_equal(stats()->copies_over_budget, 0);
	assert_int_equal(stats()->copies_failed, 0);
}

/*
 * A loaded host starves the workers (nice 10): a uid's share may stay full
 * for longer than any deadline. The copy waits as long as its child lives,
 * and a tick asks the queue once per full uid, not once per waiting child.
 */
static void test_a_copy_waits_for_the_queue_as_long_as_its_child_lives(void **state)
{
	int defers;

	(void)state;
	budget_config(100 * MB, 100 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	F.defer_err = -EAGAIN;
	for (pid_t c = 11; c < 21; c++)
		fork_at(c, 10, 5 * SEC + c * MS, 1 * SEC);
	assert_int_equal(stats()->copies_queue_full, 10);
	/* A minute of ticks with the share full: one try a tick, none given up. */
	for (int t = 1; t <= 600; t++)
		tick(6 * SEC + (uint64_t)t * 100 * MS);
	assert_int_equal(stats()->copies_queue_full, 10 + 600);
	assert_int_equal(stats()->copies_failed, 0);
	/* Room for one at a time: every child gets its copy, one a tick. */
	F.defer_err = 0;
	F.queue_of_one = true;
	defers = F.defers;
	tick(F.now + 100 * MS);
	assert_int_equal(F.defers, defers + 1);
	for (int t = 0; t < 10; t++) {
		finish_deferred();
		tick(F.now + 100 * MS);
	}
	assert_int_equal(F.defers, defers + 10);
	for (pid_t c = 11; c < 21; c++)
		assert_true(F.map[c].exists);
	assert_int_equal(stats()->copies_failed, 0);
}

/* A child that waited for the queue and exec'd gets nothing: its new image has its own names. */
static void test_a_waiting_copy_ends_with_an_exec(void **state)
{
	(void)state;
	budget_config(100 * MB, 100 * MB, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	F.defer_err = -EAGAIN;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	tick(5 * SEC + 100 * MS);
	exec_at(11, 5 * SEC, 6 * SEC);
	F.defer_err = 0;
	tick(6 * SEC + 100 * MS);
	assert_false(F.pending);
	assert_false(F.map[11].exists);
	assert_int_equal(stats()->copies_deferred, 0);
}

static void test_compressed_map_goes_to_the_worker_at_its_apparent_size(void **state)
{
	(void)state;
	budget_config(8 * MB, 8 * MB, 1 * MB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	/* 5 MB of lines in 100 KB of blocks (a compressing file system): not a small copy. */
	put_sparse_map(10, 5 * MB, 100 * KB, span_at(2 * SEC));
	F.data[10] = 5 * MB;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	/* The loop's try stopped at its bound; the worker has it, charged 5 MB. */
	assert_int_equal(F.creates, 1);
	assert_int_equal(F.defers, 1);
	assert_true(F.rq.max_data >= 5 * MB);
	finish_deferred();
	assert_int_equal(stats()->copies_created, 1);
	assert_int_equal(stats()->copies_failed, 0);
	assert_int_equal(stats()->copy_bytes, 5 * MB);
	/* 3 MB left of 8: a second such copy is refused. */
	fork_at(12, 10, 5 * SEC + 1 * MS, 1 * SEC);
	assert_int_equal(stats()->copies_over_budget, 1);
	assert_false(F.map[12].exists);
}

/* ---- jitdumps (policy_jitdump.c) ---- */

/* Process @pid of @uid started at @start_ns from @ppid (started at @pstart_ns). */
static void fork_as(pid_t pid, pid_t ppid, uint64_t start_ns, uint64_t pstart_ns, uid_t uid)
{
	struct policy_event ev = {
		.type = POLICY_EV_FORK, .pid = pid, .ppid = ppid, .start_ticks = start_ns / TICK,
		.start = span_at(start_ns), .pstart = span_at(pstart_ns),
		.at = span_at(start_ns + 1000), .uid = uid, .gid = uid, .comm = "other",
	};

	if (ev.at.hi > F.now)
		F.now = ev.at.hi;
	policy__event(P, &ev, F.now);
}

/* May the dump of (@owner, started at @owner_start_ns), a file of uid 1000, name code in @pid's map? */
static enum jitdump_target target(pid_t owner, uint64_t owner_start_ns, pid_t pid,
				  uint64_t *start_ticks)
{
	*start_ticks = 0;
	return policy__jitdump_target(P, owner, owner_start_ns / TICK, pid, 1000, start_ticks);
}

static void test_jitdump_names_code_for_its_producer(void **state)
{
	uint64_t start;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	assert_int_equal(target(10, 1 * SEC, 10, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 1 * SEC / TICK);
	/* Not in the table: not yet read, or gone. */
	assert_int_equal(target(10, 1 * SEC, 42, &start), JITDUMP_TARGET_GONE);
	assert_int_equal(target(42, 1 * SEC, 42, &start), JITDUMP_TARGET_GONE);
	/* Another process than the one the dump is of: an earlier holder's dump, or a lie. */
	assert_int_equal(target(10, 2 * SEC, 10, &start), JITDUMP_TARGET_REFUSED);
	/* A file of another uid than the producer's. */
	assert_int_equal(policy__jitdump_target(P, 10, 1 * SEC / TICK, 10, 2000, &start),
			 JITDUMP_TARGET_REFUSED);
}

static void test_jitdump_names_code_for_its_producers_descendants_of_its_uid(void **state)
{
	uint64_t start;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);            /* the producer */
	fork_at(11, 10, 5 * SEC, 1 * SEC);     /* its child */
	fork_at(12, 11, 6 * SEC, 5 * SEC);     /* its grandchild */
	fork_as(13, 10, 7 * SEC, 1 * SEC, 2000); /* its child, another uid (setuid) */
	fork_at(14, 1, 8 * SEC, 0);            /* unrelated, the same uid */
	fork_at(15, 14, 9 * SEC, 8 * SEC);     /* the unrelated one's child */
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 5 * SEC / TICK);
	assert_int_equal(target(10, 1 * SEC, 12, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 6 * SEC / TICK);
	/* Anyone can write any pid into a record: only its uid's own descendants. */
	assert_int_equal(target(10, 1 * SEC, 13, &start), JITDUMP_TARGET_REFUSED);
	/* A file of the child's uid is not its uid-1000 parent's dump. */
	assert_int_equal(policy__jitdump_target(P, 10, 1 * SEC / TICK, 13, 2000, &start),
			 JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 1 * SEC, 14, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 1 * SEC, 15, &start), JITDUMP_TARGET_REFUSED);
	/* A parent's child is not a child's: descent goes one way. */
	assert_int_equal(target(11, 5 * SEC, 10, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(11, 5 * SEC, 12, &start), JITDUMP_TARGET_OK);
	/* The dump of another process at the producer's pid names code in none of them. */
	assert_int_equal(target(10, 2 * SEC, 11, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 2 * SEC, 12, &start), JITDUMP_TARGET_REFUSED);
}

/* The producer ended and a later process holds its pid: its children are not the new one's. */
static void test_jitdump_of_a_later_holder_of_the_parents_pid_names_nothing_in_its_child(void **state)
{
	uint64_t start;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	fork_at(12, 11, 6 * SEC, 5 * SEC);
	exit_at(10, 1 * SEC, 7 * SEC);
	fork_at(10, 1, 8 * SEC, 0);
	/* 11's parent pid is 10, but 10 started after 11: not its parent. */
	assert_int_equal(target(10, 8 * SEC, 11, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 8 * SEC, 12, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(10, 8 * SEC, 10, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 8 * SEC / TICK);
	/* Its exit unseen, the new holder read at its fork: alike. */
	fork_at(11, 1, 9 * SEC, 0);
	fork_at(12, 11, 10 * SEC, 9 * SEC);
	fork_at(11, 1, 11 * SEC, 0);
	assert_int_equal(target(11, 9 * SEC, 12, &start), JITDUMP_TARGET_REFUSED);
	assert_int_equal(target(11, 11 * SEC, 12, &start), JITDUMP_TARGET_REFUSED);
}

/* A child whose copy of its parent's entries is in the worker: its map is not settled. */
static void test_jitdump_waits_for_a_childs_copy_in_the_worker(void **state)
{
	uint64_t start;

	(void)state;
	budget_config(0, 0, 64 * KB, 0);
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 5 * MB, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(F.defers, 1);
	assert_true(F.pending);
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_WAIT);
	/* The producer itself has no copy under way. */
	assert_int_equal(target(10, 1 * SEC, 10, &start), JITDUMP_TARGET_OK);
	finish_deferred();
	assert_true(F.map[11].exists);
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 5 * SEC / TICK);
	/* Waiting for room in the worker's queue: not settled either. */
	F.defer_err = -EAGAIN;
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	assert_false(F.map[12].exists);
	assert_int_equal(target(10, 1 * SEC, 12, &start), JITDUMP_TARGET_WAIT);
	F.defer_err = 0;
	tick(F.now + 100 * MS);
	finish_deferred();
	assert_true(F.map[12].exists);
	assert_int_equal(target(10, 1 * SEC, 12, &start), JITDUMP_TARGET_OK);
}

/* A child whose copy waits for its runtime to finish a line: its map is not settled. */
static void test_jitdump_waits_for_a_childs_copy_retried(void **state)
{
	uint64_t start;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	put_map(11, 40, span_at(5 * SEC + 200), ENTRIES_MAPPED);
	F.append_eagain = 1;
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_appended, 0);
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_WAIT);
	tick(F.now + 100 * MS);
	assert_int_equal(stats()->copies_appended, 1);
	assert_int_equal(target(10, 1 * SEC, 11, &start), JITDUMP_TARGET_OK);
	assert_int_equal(start, 5 * SEC / TICK);
}

/* Only perfmapd's copy of the parent's entries, as the copy left it, takes a dump's functions. */
static void test_jitdump_adopts_only_the_copy_perfmapd_left(void **state)
{
	struct map_info mi;
	uint64_t child = 5 * SEC / TICK;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	put_map(10, 300, span_at(2 * SEC), ENTRIES_MAPPED);
	fork_at(11, 10, 5 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_created, 1);
	mi = F.map[11].mi;
	assert_true(policy__jitdump_adopt(P, 11, child, &mi));
	/* Of another process at the pid, or none. */
	assert_false(policy__jitdump_adopt(P, 11, child + 1, &mi));
	assert_false(policy__jitdump_adopt(P, 42, child, &mi));
	/* Written since: the runtime's own lines follow the copy. */
	mi.size += 40;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
	/* Another file at the path. */
	mi = F.map[11].mi;
	mi.ino++;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
	mi = F.map[11].mi;
	mi.dev++;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
	/* Another user's, or a trap the hardened open refuses. */
	mi = F.map[11].mi;
	mi.uid = 2000;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
	mi = F.map[11].mi;
	mi.refused = -EMLINK;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
	/* The producer's own map, and a runtime's own map the copy was appended to: theirs. */
	mi = F.map[10].mi;
	assert_false(policy__jitdump_adopt(P, 10, 1 * SEC / TICK, &mi));
	put_map(12, 40, span_at(6 * SEC + 200), ENTRIES_MAPPED);
	fork_at(12, 10, 6 * SEC, 1 * SEC);
	assert_int_equal(stats()->copies_appended, 1);
	mi = F.map[12].mi;
	assert_false(policy__jitdump_adopt(P, 12, 6 * SEC / TICK, &mi));
	/*
	 * The child exec'd while its copy, unchanged, was open for writing: the
	 * copy is the old image's, left only until its move is tried again.
	 */
	F.busy = 1;
	exec_at(11, 5 * SEC, 7 * SEC);
	assert_true(F.map[11].exists);
	mi = F.map[11].mi;
	assert_false(policy__jitdump_adopt(P, 11, child, &mi));
}

/* A process whose code its dump describes is not lost, map or no map. */
static void test_jitdump_producer_is_not_lost(void **state)
{
	struct jit_seen js;
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	fork_at(11, 1, 1 * SEC, 0);
	policy__jitdump_found(P, 10, 1 * SEC / TICK);
	/* Of another process at the pid: nothing. */
	policy__jitdump_found(P, 11, 12345);
	policy__jitdump_found(P, 42, 1 * SEC / TICK);
	policy__exec_mapping(P, 10, CODE, 8192, false, 2 * SEC);
	policy__exec_mapping(P, 11, CODE, 8192, false, 2 * SEC);
	tick(2 * SEC + JIT_GRACE_NS);
	assert_false(F.map[10].exists);
	assert_int_equal(stats()->lost_symbols_total, 1);
	js = jits(&lost);
	assert_int_equal(js.n, 2);
	assert_int_equal(lost, 1);
	/* A new image has its own code, which the old image's dump does not describe. */
	exec_at(10, 1 * SEC, 3 * SEC);
	policy__exec_mapping(P, 10, CODE, 8192, false, 3 * SEC);
	tick(3 * SEC + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, 2);
}

/* Judged lost, then its dump is found: named from now on. */
static void test_jitdump_found_after_the_judgement_names_the_code(void **state)
{
	uint64_t lost;

	(void)state;
	fork_at(10, 1, 1 * SEC, 0);
	policy__exec_mapping(P, 10, CODE, 8192, false, 2 * SEC);
	tick(2 * SEC + JIT_GRACE_NS);
	assert_int_equal(stats()->lost_symbols_total, 1);
	jits(&lost);
	assert_int_equal(lost, 1);
	policy__jitdump_found(P, 10, 1 * SEC / TICK);
	jits(&lost);
	assert_int_equal(lost, 0);
	assert_int_equal(stats()->lost_symbols_total, 1);
	assert_int_equal(stats()->lost_symbols_named, 1);
	/* Said once: its map appearing later changes nothing. */
	put_map(10, 300, span_at(5 * SEC), ENTRIES_MAPPED);
	policy__map_appeared(P, 10, 5 * SEC);
	assert_int_equal(stats()->lost_symbols_named, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_fork_gives_the_child_its_parents_entries),
		T(test_fork_of_a_parent_without_a_map_writes_nothing),
		T(test_vfork_child_gets_nothing),
		T(test_child_that_execd_before_the_copy_gets_nothing),
		T(test_runtime_map_first_gets_the_entries_appended),
		T(test_copy_waits_for_an_unfinished_line_then_gives_up),
		T(test_copies_failing_alike_are_said_once),
		T(test_exit_map_without_an_fd_is_tried_again),
		T(test_copy_without_an_fd_is_tried_again),
		T(test_over_max_map_bytes_is_neither_copied_nor_archived),
		T(test_dry_run_decides_and_changes_nothing),
		T(test_jit_code_without_a_map_is_lost_once_after_the_grace),
		T(test_jit_code_with_a_map_is_not_lost),
		T(test_jit_code_of_an_old_image_is_forgotten_at_exec),
		T(test_jit_code_found_in_proc_is_judged_too),
		T(test_jit_grace_of_a_new_image_is_its_own),
		T(test_lost_symbols_lines_are_bounded_per_uid),
		T(test_jit_code_in_an_unmirrored_namespace_is_not_judged),
		T(test_jit_regions_are_kept_as_each_mmap_made_them),
		T(test_jit_regions_are_bounded_per_process_and_in_all),
		T(test_jitregions_pool_is_shared_and_given_back),
		T(test_foreign_namespace_is_left_alone),
		T(test_ns_process_whose_map_is_ours_is_a_host_process),
		T(test_ns_refused_process_is_left_alone),
		T(test_ns_fork_of_a_mirrored_parent_copies_in_its_namespace),
		T(test_ns_mirror_is_retained_at_exit_then_archived),
		T(test_ns_exec_archives_the_old_images_mirror),
		T(test_ns_exec_drops_an_unwritten_fork_copy),
		T(test_ns_mirror_ends_when_it_cannot_be_placed_again),
		T(test_ns_host_path_is_cleared_before_mirroring),
		T(test_ns_process_moved_into_a_container_is_placed_at_its_exec),
		T(test_exec_under_every_combination_of_evidence),
		T(test_exec_never_takes_a_map_made_microseconds_after_it),
		T(test_exec_drops_an_untouched_copy_even_when_made_late),
		T(test_exec_keeps_a_late_copy_the_new_image_wrote_to),
		T(test_exec_archives_a_copy_the_old_image_wrote_to),
		T(test_exec_mappings_of_a_later_image_tell_nothing),
		T(test_exec_busy_is_retried_within_milliseconds),
		T(test_exec_busy_for_good_is_left_to_the_new_image),
		T(test_exit_keeps_the_map_for_the_retention_then_archives),
		T(test_exit_held_map_stays_until_released),
		T(test_hold_of_another_process_at_the_pid_keeps_nothing),
		T(test_hold_lasts_while_any_holder_holds),
		T(test_holds_are_bounded),
		T(test_exit_busy_map_waits_ten_seconds_more),
		T(test_exit_map_waits_while_the_archive_is_full),
		T(test_exec_move_is_retried_while_the_archive_is_full),
		T(test_exit_of_a_map_made_after_it_is_not_retained),
		T(test_orphan_map_is_retained_unless_its_pid_lives),
		T(test_orphan_maps_are_retained_up_to_a_bound_per_owner),
		T(test_exited_maps_past_the_owners_cap_are_archived_at_once),
		T(test_orphan_claimed_by_a_new_process_frees_its_owners_bound),
		T(test_orphan_trap_is_left_and_warned_about_once),
		T(test_a_trap_is_said_once_wherever_it_is_met),
		T(test_orphans_are_weighed_at_the_tick_in_bounded_batches),
		T(test_squatted_map_goes_even_with_the_archive_full),
		T(test_squatted_map_goes_even_while_open_for_writing),
		T(test_squatted_map_past_the_orphan_bound_is_not_kept),
		T(test_squatted_map_made_after_the_claim_goes),
		T(test_root_maps_and_root_processes_are_not_squatted),
		T(test_squatted_map_that_cannot_move_is_not_owned),
		T(test_reuse_archives_the_earlier_processs_untouched_map),
		T(test_reuse_keeps_a_map_the_new_process_appended_to),
		T(test_reuse_keeps_the_new_processs_own_map),
		T(test_reuse_after_an_unseen_exit),
		T(test_fork_read_after_the_child_execd_keeps_the_map),
		T(test_reuse_seen_by_a_start_time_that_changed),
		T(test_scan_ends_the_unseen_and_copies_the_found),
		T(test_busy_move_is_not_retried_on_a_file_written_since),
		T(test_exit_of_an_earlier_holder_leaves_the_new_ones_map),
		T(test_no_copy_lands_at_a_pid_another_process_holds),
		T(test_old_image_map_waiting_to_move_is_not_copied),
		T(test_appended_map_is_not_dropped_as_only_a_copy),
		T(test_exec_of_a_process_the_table_did_not_know_ends_the_old_one),
		T(test_fork_child_sharing_its_parents_memory_proves_nothing),
		T(test_a_map_seen_appearing_is_not_judged_again_by_a_listing),
		T(test_identity_evidence_rewritten_and_too_late),
		T(test_exec_of_a_holder_new_to_the_table_leaves_nothing_to_expire),
		T(test_parents_map_from_before_its_exec_is_not_copied),
		T(test_parents_old_map_is_judged_and_said_once),
		T(test_a_map_seen_appearing_stays_its_parents_own),
		T(test_a_scan_cut_short_ends_nobody),
		T(test_found_child_sharing_its_parents_image_proves_nothing),
		T(test_sparse_map_costs_what_its_parent_wrote),
		T(test_copy_budget_is_per_uid_and_refills_with_the_clock),
		T(test_large_copy_is_made_by_the_worker_and_recorded_as_ours),
		T(test_child_exec_while_its_copy_is_queued_stops_it),
		T(test_child_exec_after_its_copy_showed_drops_the_copy),
		T(test_child_exit_while_its_copy_is_queued),
		T(test_copy_done_for_a_child_gone_since_changes_nothing),
		T(test_pid_reused_while_a_copy_is_queued_stops_it),
		T(test_deferred_create_finding_a_map_appends_to_it),
		T(test_a_uids_many_small_copies_leave_the_event_loop),
		T(test_a_uids_full_share_puts_the_copy_off),
		T(test_a_queue_full_for_everyone_is_tried_again),
		T(test_a_copy_waits_for_the_queue_as_long_as_its_child_lives),
		T(test_a_waiting_copy_ends_with_an_exec),
		T(test_a_copy_stopped_while_made_keeps_its_charge),
		T(test_compressed_map_goes_to_the_worker_at_its_apparent_size),
		T(test_jitdump_names_code_for_its_producer),
		T(test_jitdump_names_code_for_its_producers_descendants_of_its_uid),
		T(test_jitdump_of_a_later_holder_of_the_parents_pid_names_nothing_in_its_child),
		T(test_jitdump_waits_for_a_childs_copy_in_the_worker),
		T(test_jitdump_waits_for_a_childs_copy_retried),
		T(test_jitdump_adopts_only_the_copy_perfmapd_left),
		T(test_jitdump_producer_is_not_lost),
		T(test_jitdump_found_after_the_judgement_names_the_code),
#undef T
	};

	/* The decisions' own log lines would drown cmocka's. */
	log_max_level = getenv("TEST_LOG") ? LOG_DEBUG : LOG_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The map store the policy acts through (mapstore.h, struct mapstore_ops),
 * made of the real pieces: the inotify index answers "no map" without a
 * system call and says when an inode appeared; BPF knows when a process
 * exec'd; /proc holds the mappings and the executables; mapfile.c writes
 * copies and archive.c moves maps away.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "lib/clock.h"
#include "store/copier.h"
#include "in/in.h"
#include "store/mapfile.h"
#include "lib/mapname.h"
#include "mirror/mirror.h"
#include "lib/procfs.h"
#include "store/canon.h"
#include "store/store.h"

struct store {
	struct store_config cfg;
	struct mapwatch *mw;
	struct events *ev;
	struct archive *ar;
	struct copier *copier;
	struct mirrors *mirrors;
};

static int store_look(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	struct store *s = ctx;
	char name[32];
	struct stat st;

	if (!mapwatch__may_exist(s->mw, pid, at_ns))
		return -ENOENT;
	map_name(pid, name, sizeof(name));
	if (fstatat(s->cfg.map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	mi->dev = st.st_dev;
	mi->ino = st.st_ino;
	mi->size = st.st_size;
	mi->disk_bytes = (uint64_t)st.st_blocks * 512;
	mi->uid = st.st_uid;
	/* As perfmap__open_map_at() would refuse it. */
	mi->refused = S_ISLNK(st.st_mode) ? -ELOOP : !S_ISREG(st.st_mode) ? -EINVAL :
		      st.st_nlink > 1 ? -EMLINK : 0;
	mi->born = mapwatch__born(s->mw, pid, st.st_dev, st.st_ino);
	mi->seen_ns = clock_boot_ns();
	/* A process's in another pid namespace sharing this directory: never the host pid's. */
	if (s->mirrors && mirrors__claims(s->mirrors, pid, st.st_dev, st.st_ino))
		return -ENOENT;
	return 0;
}

static enum map_entries store_entries(void *ctx, pid_t pid, uint64_t start_ticks,
				      uint64_t image_ns, const struct map_info *mi)
{
	struct store *s = ctx;
	enum map_entries e;
	char name[32];

	/* A later image's mappings tell nothing of what the earlier one wrote. */
	if (image_ns != UINT64_MAX && s->ev && events__execd_since(s->ev, pid, image_ns + 1))
		return ENTRIES_UNKNOWN;
	map_name(pid, name, sizeof(name));
	e = mappings_check(s->cfg.map_dir_fd, name, pid, start_ticks, mi);
	if (image_ns != UINT64_MAX && s->ev && events__execd_since(s->ev, pid, image_ns + 1))
		return ENTRIES_UNKNOWN;  /* exec'd while we read */
	return e;
}

static bool store_execd_since(void *ctx, pid_t pid, uint64_t since_ns)
{
	struct store *s = ctx;

	return s->ev && events__execd_since(s->ev, pid, since_ns);
}

/*
 * Does a process other than (@pid, @start_ticks) hold @pid? /proc answers
 * for a thread's id too, but no process holds that pid: a map at its path
 * is a dead process's, and no fork event is coming for it. Taken for held,
 * it would wait at its path until a process took the pid (a host whose
 * pids go round gives its threads the ids of processes that just ended).
 */
static bool store_pid_held(void *ctx, pid_t pid, uint64_t start_ticks)
{
	int fd;

	(void)ctx;
	if (!procfs_pid_held(pid, start_ticks))
		return false;
	/*
	 * A thread group's leader only: any other thread's id is refused,
	 * ENOENT since Linux 6.9 (EINVAL before); ESRCH, it ended meanwhile.
	 * Out of fds or other errors: held, as before the thread was told apart.
	 */
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	return errno != ENOENT && errno != EINVAL && errno != ESRCH;
}

static bool store_same_image(void *ctx, pid_t child, pid_t parent)
{
	dev_t cd, pd;
	ino_t ci, pi;

	(void)ctx;
	return !procfs_exe(child, &cd, &ci) && !procfs_exe(parent, &pd, &pi) &&
	       cd == pd && ci == pi;
}

/* What the loop learns of a copy that shows at the path: the index and BPF know at once. */
static void copy_shown(struct store *s, pid_t child, int err, struct copy_result *res)
{
	if (err)
		return;
	if (res->kind == COPY_CREATED) {
		res->map.seen_ns = clock_boot_ns();
		/* Known at once, not when inotify says so: its exit may be in this batch. */
		mapwatch__made(s->mw, child, res->map.dev, res->map.ino, res->map.born);
		if (s->ev)
			events__set_mapped(s->ev, child, true);
	} else if (res->kind == COPY_APPENDED) {
		res->map.born = mapwatch__born(s->mw, child, res->map.dev, res->map.ino);
		res->map.seen_ns = clock_boot_ns();
	}
}

static int store_copy_create(void *ctx, const struct copy_req *rq, struct copy_result *res)
{
	struct store *s = ctx;
	int err;

	err = mapfile_create(s->cfg.map_dir_fd, -1, rq, s->cfg.max_map_bytes, NULL, res);
	copy_shown(s, rq->child, err, res);
	return err;
}

static int store_copy_append(void *ctx, const struct copy_req *rq, struct copy_result *res)
{
	struct store *s = ctx;
	int err;

	err = mapfile_append(s->cfg.map_dir_fd, -1, rq, s->cfg.max_map_bytes, NULL, res);
	copy_shown(s, rq->child, err, res);
	return err;
}

static int store_copy_defer(void *ctx, const struct copy_req *rq, enum copy_op op, uint64_t ticket)
{
	struct store *s = ctx;

	return copier__submit(s->copier, rq, op, ticket);
}

static int store_copy_settle(void *ctx, pid_t child, uint64_t ticket, struct copy_result *res)
{
	struct store *s = ctx;
	int err;

	err = copier__settle(s->copier, ticket, res);
	if (err != -ECANCELED && err != -EINPROGRESS)
		copy_shown(s, child, err, res);
	return err;
}

/*
 * An exec closes the old image's map, but the kernel finishes the close only
 * as the task returns to user space, microseconds after the event: until
 * then the map counts as open for writing. Read at once, an exec's move
 * waits that long in place (EXEC_WAIT_TRIES times EXEC_WAIT_NS at most)
 * rather than a timer's millisecond, in which a fast runtime may open the
 * path and append to the old image's file.
 */
#define EXEC_WAIT_NS 20000
#define EXEC_WAIT_TRIES 10

static int store_archive(void *ctx, pid_t pid, uint64_t start_ticks, enum archive_reason why,
			 const struct map_info *expect, unsigned int flags)
{
	uint64_t size = flags & ARCHIVE_F_AS_JUDGED ? expect->size : UINT64_MAX;
	const struct timespec pause = { 0, EXEC_WAIT_NS };
	struct store *s = ctx;
	int err, tries = 0;

	if (flags & ARCHIVE_F_SQUATTED)
		return archive__move_squatted(s->ar, pid, expect->dev, expect->ino);
	while ((err = archive__move_tagged(s->ar, pid, start_ticks, why, expect->dev,
					   expect->ino, size,
					   s->mirrors ? mirrors__tag(s->mirrors, pid, start_ticks) :
							NULL)) == -EBUSY &&
	       (flags & ARCHIVE_F_FRESH) && ++tries < EXEC_WAIT_TRIES)
		nanosleep(&pause, NULL);
	if (!err && s->mirrors)
		mirrors__archived(s->mirrors, pid, start_ticks);
	return err;
}

/* Without mirrors (--no-mirrors, --dry-run), processes in other namespaces are left alone. */
static int store_ns_attach(void *ctx, const struct ns_req *rq, enum ns_place *place)
{
	struct store *s = ctx;

	if (!s->mirrors)
		return -ENOTSUP;
	return mirrors__attach(s->mirrors, rq, place, clock_boot_ns());
}

static void store_ns_sync(void *ctx, pid_t pid)
{
	struct store *s = ctx;

	if (s->mirrors)
		mirrors__sync(s->mirrors, pid, clock_boot_ns());
}

static int store_ns_copy(void *ctx, pid_t parent, const struct ns_req *rq)
{
	struct store *s = ctx;

	return s->mirrors ? mirrors__copy(s->mirrors, parent, rq, clock_boot_ns()) : -ENOENT;
}

static int store_ns_exec(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi)
{
	struct store *s = ctx;

	return s->mirrors ? mirrors__exec(s->mirrors, pid, at_ns, mi, clock_boot_ns()) : -ENOENT;
}

static int store_ns_end(void *ctx, pid_t pid, struct map_info *mi)
{
	struct store *s = ctx;

	return s->mirrors ? mirrors__end(s->mirrors, pid, mi, clock_boot_ns()) : -ENOENT;
}

static int store_canon(void *ctx, pid_t pid, const struct map_info *mi)
{
	struct store *s = ctx;

	return store_canonicalize(s->cfg.map_dir_fd, s->cfg.map_dir, pid, CANON_MAX_BYTES, mi);
}

static const struct mapstore_ops store_ops = {
	.look = store_look,
	.entries = store_entries,
	.execd_since = store_execd_since,
	.pid_held = store_pid_held,
	.same_image = store_same_image,
	.copy_create = store_copy_create,
	.copy_append = store_copy_append,
	.copy_defer = store_copy_defer,
	.copy_settle = store_copy_settle,
	.archive = store_archive,
	.canonicalize = store_canon,
	.ns_attach = store_ns_attach,
	.ns_sync = store_ns_sync,
	.ns_copy = store_ns_copy,
	.ns_exec = store_ns_exec,
	.ns_end = store_ns_end,
};


struct store *store__new(const struct store_config *cfg, struct mapwatch *mw,
			 struct events *ev, struct archive *ar, struct mirrors *mirrors)
{
	struct store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->mw = mw;
	s->ev = ev;
	s->ar = ar;
	s->mirrors = mirrors;
	s->copier = copier__open(&(struct copier_config){
		.map_dir_fd = cfg->map_dir_fd, .max_map_bytes = cfg->max_map_bytes,
		.threads = cfg->copy_threads, .queue_max = cfg->copy_queue_max,
		.queue_per_uid = cfg->copy_queue_per_uid, .execd_since = store_execd_since,
		.ctx = s });
	if (!s->copier) {
		free(s);
		return NULL;
	}
	return s;
}

void store__free(struct store *s)
{
	if (!s)
		return;
	copier__free(s->copier);
	free(s);
}

int store__copy_fd(const struct store *s)
{
	return copier__fd(s->copier);
}

struct drain_ctx {
	struct store *s;
	store_copy_done_fn fn;
	void *ctx;
};

static void on_copy_done(void *arg, pid_t child, uint64_t ticket, enum copy_op op, int err,
			 const struct copy_result *res)
{
	struct drain_ctx *d = arg;
	struct copy_result r = *res;

	(void)op;
	copy_shown(d->s, child, err, &r);
	d->fn(d->ctx, child, ticket, err, &r);
}

void store__drain_copies(struct store *s, store_copy_done_fn fn, void *ctx)
{
	struct drain_ctx d = { s, fn, ctx };

	copier__drain(s->copier, on_copy_done, &d);
}

struct mapstore store__mapstore(struct store *s)
{
	return (struct mapstore){ .ops = &store_ops, .ctx = s };
}

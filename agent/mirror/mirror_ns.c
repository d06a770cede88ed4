/*
 * What the agent changes in a container's own map directory: a fork's copy
 * of its parent's entries under the child's own pid, made a bounded part at
 * a time; that copy removed at the child's exec when still unwritten; and an
 * ended process's map removed when another process takes its pid there,
 * unwritten since. Each is done as the process it is done for, with its own
 * file-system ids, groups and capabilities (creds.c), and only in a
 * directory its user namespace maps the owner of: the kernel then allows
 * only what the process could have done itself. A file is removed only
 * while its name is still that inode and no one has it open for writing (a
 * read lease), and never in the host's directories (the map directory, the
 * host's own /tmp), where a name may be any host process's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/actas.h"
#include "lib/budget.h"
#include "lib/mapname.h"
#include "mirror/mirror_internal.h"
#include "perfmap_tools.h"
#include "lib/procfs.h"

/*
 * A map a mirrored process left in its directory when it ended, to tell it
 * from the next holder's own. Keyed by the file's inode number; the same
 * directory, name and birth (or change) time must match too.
 */
struct ended_rec {
	struct pidmap_node node;
	dev_t dir_dev;
	ino_t dir_ino;
	pid_t ns_pid;
	dev_t dev;
	ino_t ino;
	uint64_t size;               /* as it ended: unwritten since while still this size */
	uint64_t line_end;           /* where its last whole line ended: the next holder's start */
	uint64_t btime_ns;           /* 0: the file system does not say */
	uint64_t ctime_ns;
};

/* Keyed by its directory and name: what a later holder of the name looks up. */
static pid_t ended_key(const struct nsdir *d, pid_t ns_pid)
{
	uint64_t h = ((uint64_t)d->dev * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)d->ino * 0xc2b2ae3d27d4eb4full) ^
		     (uint64_t)ns_pid;

	return (pid_t)(h % 0x7ffffffe) + 1;
}

static uint64_t ts_ns(struct statx_timestamp t)
{
	return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* Birth and change times of @fd: birth 0 when not known. */
static int file_times(int fd, uint64_t *btime_ns, uint64_t *ctime_ns)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BTIME | STATX_CTIME, &sx))
		return -errno;
	*btime_ns = (sx.stx_mask & STATX_BTIME) ? ts_ns(sx.stx_btime) : 0;
	*ctime_ns = ts_ns(sx.stx_ctime);
	return 0;
}

/* ---- acting as the process ---- */

static const struct {
	const char *words, *key;
} write_refusals[NSW__COUNT] = {
	[NSW_NOT_ITS_DIR] = { "is owned by a uid its user namespace does not map: not the namespace's own directory",
			      "ns_writes_refused_not_its_dir" },
	[NSW_UNMAPPED] = { "would get ids its user namespace does not map",
			   "ns_writes_refused_unmapped" },
	[NSW_DENIED] = { "is not writable by it: its own credentials do not allow it",
			 "ns_writes_refused_denied" },
	[NSW_GONE] = { "was not written: it was gone", "ns_writes_refused_gone" },
};

const char *ns_write_refusal_key(enum ns_write_refusal r)
{
	return r < NSW__COUNT ? write_refusals[r].key : "ns_writes_refused_unknown";
}

/* Counted each time; said once per directory and reason. @c: NULL when gone. */
static void refuse_write(struct mirrors *m, const struct mirror *mi, enum ns_write_refusal why,
			 const struct proc_creds *c)
{
	static const char *const tags[NSW__COUNT] = { "ns-write-dir", "ns-write-unmapped",
						      "ns-write-denied", "ns-write-gone" };

	m->stats.writes_refused[why]++;
	if (why == NSW_GONE || !log_first_time(mi->dir->dev, mi->dir->ino, tags[why]))
		return;
	pr_warn("mirror %d (%s): %s in %s %s (uid %u, gid %u); nothing is created or removed there for it, its fork copies go to its mirror alone (said once for this directory)",
		(int)mi->pid, mi->comm, m->cfg.ns_map_dir, mirror__where(mi), write_refusals[why].words,
		c ? (unsigned int)c->fsuid : (unsigned int)mi->uid,
		c ? (unsigned int)c->fsgid : (unsigned int)mi->gid);
}

int mirror__may_act(struct mirrors *m, const struct mirror *mi, struct proc_creds *c, int *dfd)
{
	enum ns_refusal why;
	struct stat st;
	int fd;

	*dfd = -1;
	if (mi->dir->is_host)
		return -EPERM;
	/*
	 * Its directory through its own root and mounts, not the one the
	 * record was first resolved through (another namespace may share the
	 * inode by a writable mount where this one's is read-only): the same
	 * directory as mirrored, or nothing is done. Before its credentials,
	 * whose read ends by checking that its pid is still it.
	 */
	fd = nsroot_open_dir(mi->pid, m->cfg.ns_map_dir, &st, &why);
	if (fd >= 0 && (st.st_dev != mi->dir->dev || st.st_ino != mi->dir->ino)) {
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0 || creds_read(mi->pid, mi->start_ticks, c)) {
		if (fd >= 0)
			close(fd);
		refuse_write(m, mi, NSW_GONE, NULL);
		return -EPERM;
	}
	if (!c->groups_known) {
		/* Not all its groups known: one left out could allow what the process may not do. */
		refuse_write(m, mi, NSW_DENIED, c);
	} else if (!idmap_has(&c->uid_map, c->fsuid) || !idmap_has(&c->gid_map, c->fsgid)) {
		/* What it makes gets its ids: ids with no name inside are nobody's there (EOVERFLOW). */
		refuse_write(m, mi, NSW_UNMAPPED, c);
	} else if (!idmap_has(&c->uid_map, st.st_uid)) {
		/*
		 * A directory of a uid its namespace does not map is not the
		 * namespace's: a host directory bind-mounted there (root's,
		 * another user's), whatever its mode says.
		 */
		refuse_write(m, mi, NSW_NOT_ITS_DIR, c);
	} else {
		*dfd = fd;
		return 0;
	}
	close(fd);
	return -EPERM;
}

/* The calling thread as @c; said once when the agent cannot (it lacks CAP_SETUID or CAP_SETGID). */
static int act_begin(const struct proc_creds *c)
{
	int err = actas_begin(c);

	if (err && log_first_time(0, 0, "creds-act"))
		pr_warn("privileges: cannot act with a process's own ids (%s): nothing is created or removed in containers' directories",
			strerror(-err));
	return err;
}

void mirror__act_refused(struct mirrors *m, const struct mirror *mi, const struct proc_creds *c,
			 int err)
{
	if (err == -EOVERFLOW)
		refuse_write(m, mi, NSW_UNMAPPED, c);
	else if (err == -EACCES || err == -EPERM || err == -EROFS)
		refuse_write(m, mi, NSW_DENIED, c);
}

/*
 * Remove @name in @mi's directory, as @mi, while it is still @fd's file and
 * no one has it open for writing: the read lease (the agent's) fails then,
 * and would be broken by an open for writing before the unlink. True when
 * removed.
 */
static bool unlink_unwritten(struct mirrors *m, struct mirror *mi, const char *name, int fd,
			     const struct stat *st)
{
	struct proc_creds c;
	struct stat at;
	int dfd, err;

	if (mirror__may_act(m, mi, &c, &dfd))
		return false;
	err = fcntl(fd, F_SETLEASE, F_RDLCK) ? -errno : act_begin(&c);
	if (!err) {
		if (fstatat(dfd, name, &at, AT_SYMLINK_NOFOLLOW))
			err = -errno;
		else if (at.st_dev != st->st_dev || at.st_ino != st->st_ino)
			err = -ESTALE;
		else if (unlinkat(dfd, name, 0))
			err = -errno;
		actas_end();
		mirror__act_refused(m, mi, &c, err);
		fcntl(fd, F_SETLEASE, F_UNLCK);
	}
	close(dfd);
	return !err;
}

/* ---- fork copies ---- */

void mirror__copy_free(struct mirrors *m, struct mirror *mi)
{
	if (!mi->copy)
		return;
	close(mi->copy->src_fd);
	if (mi->copy->dst_fd != mi->dst_fd)
		close(mi->copy->dst_fd);
	if (mi->copy->in.known)
		m->inherit_held--;
	inherit_release(&mi->copy->in);
	free(mi->copy);
	mi->copy = NULL;
}

size_t mirror__copy_step(struct mirrors *m, struct mirror *mi, size_t cap, uint64_t now_ns)
{
	struct ns_copy *c = mi->copy;
	size_t want, whole, kept;
	long left_out = 0;
	ssize_t n;
	char *nl;

	if (!c)
		return 0;
	if (c->off >= c->end)
		goto done;
	if (!cap)
		return 0;  /* the tick's bytes are spent: the next one goes on */
	want = c->end - c->off < cap ? (size_t)(c->end - c->off) : cap;
	if (want > PASS_BYTES)
		want = PASS_BYTES;
	/* Over its uid's budget: the rest waits for the next tick. */
	if (!budget__take(m->budget, mi->uid, want, now_ns))
		return 0;
	n = pread(c->src_fd, m->buf, want, (off_t)c->off);
	nl = n > 0 ? memrchr(m->buf, '\n', (size_t)n) : NULL;
	whole = nl ? (size_t)(nl - m->buf) + 1 : 0;
	budget__settle(m->budget, mi->uid, want, whole);
	if (!whole) {
		/* The parent's unfinished last line, a line longer than a pass, or nothing: done. */
		if (n <= 0 || (uint64_t)n >= c->end - c->off || n == PASS_BYTES)
			goto done;
		return 0;  /* a small part of the tick was left: the next one reads a whole line */
	}
	/* Entries only, as they are in a mirror: the parent's map is any bytes its owner wrote. */
	kept = perfmap__canonical_lines(m->buf, whole, &m->stats.lines_dropped);
	kept = inherit_filter(&c->in, m->buf, kept, &left_out);
	m->stats.ns_copy_entries_left_out += (uint64_t)left_out;
	if (kept && perfmap__write_all(c->dst_fd, m->buf, kept)) {
		m->stats.ns_copies_failed++;
		goto done;
	}
	c->off += whole;
	if (c->dst_fd == mi->dst_fd)
		mi->dst_bytes += kept;
	else
		mi->copy_size += kept;
	if (c->off < c->end)
		return whole;
done:
	mirror__copy_free(m, mi);
	return 0;
}

/*
 * The child's own map, made by its runtime before the copy, opened to have the
 * parent's entries appended, as the host does: only the child's uid's regular
 * file, ending in a whole line (-EAGAIN), and not beginning with the parent's
 * first line already (its runtime copied them itself: -EALREADY). The fd, or
 * -errno. Called as the child (actas_begin()): it opens its own file.
 */
static int open_own(struct mirrors *m, const struct mirror *child, int dfd, int parent_fd)
{
	char first[PERFMAP_LINE_MAX], have[PERFMAP_LINE_MAX], self[32], last;
	enum ns_refusal why;
	struct stat st, wst;
	ssize_t n, k;
	char *nl;
	int rfd, wfd = -EPERM;

	n = pread(parent_fd, first, sizeof(first), 0);
	nl = n > 0 ? memchr(first, '\n', (size_t)n) : NULL;
	if (!nl)
		return -ENOENT;
	rfd = nsroot_open_map(dfd, child->ns_pid, m->cfg.max_bytes, &st, &why);
	if (rfd < 0)
		return rfd;
	if (st.st_uid != child->uid)
		goto close_rfd;
	k = pread(rfd, have, (size_t)(nl - first) + 1, 0);
	if (k == nl - first + 1 && !memcmp(have, first, (size_t)k)) {
		wfd = -EALREADY;
		goto close_rfd;
	}
	if (st.st_size && (pread(rfd, &last, 1, st.st_size - 1) != 1 || last != '\n')) {
		wfd = -EAGAIN;
		goto close_rfd;
	}
	/* The inode checked, reopened for appending: nothing can be swapped in between. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", rfd);
	wfd = open(self, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (wfd < 0) {
		wfd = -errno;
	} else if (fstat(wfd, &wst) || wst.st_ino != st.st_ino || wst.st_dev != st.st_dev) {
		close(wfd);
		wfd = -EAGAIN;
	}
close_rfd:
	close(rfd);
	return wfd;
}

/*
 * The child's file in its own directory for the parent's entries, made or
 * opened as the child: a new one (its identity noted, so that an exec
 * finding it unwritten removes it), or its runtime's own, appended to. The
 * fd; -EPERM when nothing may be written there for it (refused: the
 * entries go to its mirror alone); -EEXIST when it has its map and needs
 * none; or -errno.
 */
static int copy_in_dir(struct mirrors *m, struct mirror *child, int parent_fd, mode_t mode)
{
	struct proc_creds cr;
	bool own = false;
	struct stat st;
	int dfd, fd;

	if (mirror__may_act(m, child, &cr, &dfd))
		return -EPERM;
	if (act_begin(&cr)) {
		close(dfd);
		return -EPERM;
	}
	fd = nsroot_create_map(dfd, child->ns_pid, mode);
	if (fd == -EEXIST) {
		/* Its runtime made its own first: the parent's entries follow its lines. */
		own = true;
		fd = open_own(m, child, dfd, parent_fd);
	}
	actas_end();
	close(dfd);
	if (own) {
		if (fd >= 0) {
			m->stats.ns_copies_appended++;
			return fd;
		}
		m->stats.ns_copies_existing++;
		/* -EPERM there: its map is another uid's; not a refusal to fall back from. */
		return fd == -EALREADY || fd == -EPERM ? -EEXIST : fd;
	}
	if (fd == -EACCES || fd == -EPERM || fd == -EROFS || fd == -EOVERFLOW) {
		mirror__act_refused(m, child, &cr, fd);
		return -EPERM;
	}
	if (fd < 0) {
		m->stats.ns_copies_failed++;
		return fd;
	}
	if (!fstat(fd, &st)) {
		child->copy_dev = st.st_dev;
		child->copy_ino = st.st_ino;
		child->copy_size = 0;
	}
	return fd;
}

int mirrors__copy(struct mirrors *m, pid_t parent_pid, const struct ns_req *rq,
		  uint64_t now_ns)
{
	bool in_dir = false;
	struct mirror *parent = (struct mirror *)pidmap_find(&m->by_pid, parent_pid);
	struct mirror *child = (struct mirror *)pidmap_find(&m->by_pid, rq->pid);
	struct ns_copy *c;
	struct stat st;
	int fd, err;

	if (!parent || !child || child->copy)
		return -ENOENT;
	/*
	 * The parent's map may be there before its directory's watch says so:
	 * the fork's event can be read first. Its map as it is now, as on the
	 * host; but only while the parent is still there (a zombie too): gone,
	 * its pid in the container may be another process's, and so the map
	 * at its name (not copied, counted).
	 */
	if (parent->src_fd < 0) {
		mirror__try_source(m, parent);
		if (parent->src_fd >= 0 && !procfs_is(parent->pid, parent->start_ticks)) {
			mirror__close_source(m, parent);
			m->stats.ns_copies_parent_gone++;
		}
	}
	if (parent->src_fd < 0)
		return -ENOENT;
	if (child->dir != parent->dir)
		return -EXDEV;  /* another root: the parent's map is not there */
	if (fstat(parent->src_fd, &st))
		return -errno;
	if (m->cfg.max_bytes && (uint64_t)st.st_size > m->cfg.max_bytes)
		return -EFBIG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->src_fd = fcntl(parent->src_fd, F_DUPFD_CLOEXEC, 0);
	c->end = (uint64_t)st.st_size;
	/* Each copy in progress holds its child's mappings: a few at a time. */
	if (m->inherit_held < NS_INHERIT_HELD) {
		inherit_read(rq->pid, rq->start_ticks, &c->in);
		m->inherit_held += c->in.known;
	}
	if (!c->in.known)
		m->stats.ns_copies_unfiltered++;
	c->parent = parent_pid;
	child->mode = st.st_mode & 0666;
	if (c->src_fd < 0) {
		err = -errno;
		goto free_copy;
	}
	/*
	 * In its own directory, as it would have made it; where nothing may be
	 * written for it (the host's directories, where perf-<its own pid>.map
	 * is a host pid's name; a directory not its namespace's; what its
	 * credentials do not allow), straight into its mirror: nothing is lost
	 * on the host, only the copy inside is not made.
	 */
	fd = copy_in_dir(m, child, c->src_fd, st.st_mode);
	if (fd >= 0) {
		in_dir = true;
		c->dst_fd = fd;
	} else if (fd == -EPERM) {
		err = child->dst_fd >= 0 ? -EEXIST : mirror__make_dest(m, child);
		if (err)
			goto close_src;
		c->dst_fd = child->dst_fd;
	} else {
		err = fd;
		goto close_src;
	}
	child->copy = c;
	m->stats.ns_copies++;
	pr_info("copy %d -> %d in %s: %s/perf-%d.map -> %s/perf-%d.map, %llu bytes", (int)parent_pid,
		(int)rq->pid, mirror__where(child), m->cfg.ns_map_dir, (int)parent->ns_pid,
		in_dir ? m->cfg.ns_map_dir : m->cfg.map_dir, in_dir ? (int)rq->ns_pid : (int)rq->pid,
		(unsigned long long)c->end);
	/* Most maps are copied whole here; a large one goes on at the ticks. */
	mirror__copy_step(m, child, 4 * PASS_BYTES, now_ns);
	if (in_dir) {
		/* Mirrored at once: the copy is in the host's mirror as it is in the container. */
		mirror__try_source(m, child);
		mirror__sync(m, child, FINAL_BYTES, false, now_ns);
	}
	return 0;
close_src:
	close(c->src_fd);
free_copy:
	if (c->in.known)
		m->inherit_held--;
	inherit_release(&c->in);
	free(c);
	return err;
}

/* ---- an exec's unwritten copy ---- */

bool mirror__drop_copy(struct mirrors *m, struct mirror *mi)
{
	struct stat st;
	char name[32];

	if (!mi->copy_ino || mi->src_fd < 0 || fstat(mi->src_fd, &st) ||
	    st.st_dev != mi->copy_dev || st.st_ino != mi->copy_ino ||
	    (uint64_t)st.st_size != mi->copy_size)
		return false;
	mirror__copy_free(m, mi);
	map_name(mi->ns_pid, name, sizeof(name));
	if (!unlink_unwritten(m, mi, name, mi->src_fd, &st))
		return false;
	m->stats.ns_copies_dropped++;
	pr_info("exec %d (%s): %s/%s in %s was only its parent's entries, copied at its fork; removed",
		(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name, mirror__where(mi));
	mirror__close_source(m, mi);
	mi->copy_ino = 0;
	mi->offset = 0;
	mi->src_ino = 0;
	return true;
}

/* ---- pid reuse inside a container ---- */

void mirror__keep_ended(struct mirrors *m, const struct mirror *mi)
{
	struct ended_rec *e;
	struct stat st;
	pid_t key;

	if (mi->src_fd < 0 || mi->dir->is_host || fstat(mi->src_fd, &st))
		return;
	/* Full: forgotten all at once (the next holders' maps are then mirrored whole, as before). */
	if (m->ended.count >= ENDED_MAX)
		pidmap_clear(&m->ended);
	key = ended_key(mi->dir, mi->ns_pid);
	e = (struct ended_rec *)pidmap_remove(&m->ended, key);
	if (!e)
		e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->node.pid = key;
	e->dir_dev = mi->dir->dev;
	e->dir_ino = mi->dir->ino;
	e->ns_pid = mi->ns_pid;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = (uint64_t)st.st_size;
	e->line_end = mi->offset < e->size ? mi->offset : e->size;
	if (file_times(mi->src_fd, &e->btime_ns, &e->ctime_ns)) {
		free(e);
		return;
	}
	pidmap_insert(&m->ended, &e->node);
}

bool mirror__earlier_holders(struct mirrors *m, struct mirror *mi, int fd, const struct stat *st)
{
	struct ended_rec *e = (struct ended_rec *)pidmap_find(&m->ended,
							      ended_key(mi->dir, mi->ns_pid));
	uint64_t btime, ctime;
	bool same, unwritten;
	char name[32];

	if (!e || e->dir_dev != mi->dir->dev || e->dir_ino != mi->dir->ino ||
	    e->ns_pid != mi->ns_pid || e->dev != st->st_dev || e->ino != st->st_ino)
		return false;
	pidmap_remove(&m->ended, e->node.pid);
	if (file_times(fd, &btime, &ctime))
		goto forget;
	/*
	 * The same file for sure only by its birth time (an inode number is
	 * reused); without one, only while unchanged since.
	 */
	unwritten = (uint64_t)st->st_size == e->size && ctime == e->ctime_ns;
	same = e->btime_ns ? btime == e->btime_ns : unwritten;
	if (!same)
		goto forget;
	map_name(mi->ns_pid, name, sizeof(name));
	if (unwritten && unlink_unwritten(m, mi, name, fd, st)) {
		m->stats.ns_stale_removed++;
		pr_info("mirror %d (%s): %s/%s in %s was an earlier process's, unwritten since it ended (its mirror has it); removed",
			(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name, mirror__where(mi));
		free(e);
		return true;
	}
	/* Written since (or open for writing): only what follows the earlier process's is this one's. */
	if (e->line_end <= (uint64_t)st->st_size) {
		m->stats.ns_stale_skipped++;
		mi->offset = e->line_end;
		pr_info("mirror %d (%s): %s/%s holds an earlier process's entries; mirrored from byte %llu on",
			(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name,
			(unsigned long long)mi->offset);
	}
forget:
	free(e);
	return false;
}

void mirror__ended_fini(struct mirrors *m)
{
	pidmap_fini(&m->ended);
}

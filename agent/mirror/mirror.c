/*
 * The mirrors of maps in other namespaces at the host's path: a process
 * placed (its directory found, a mirror made or kept), all of them polled at
 * the tick within bounds, an exec's and an exit's mirror let go of, new maps
 * from inotify, and what the policy, the archive and status ask. One mirror
 * kept up to date is mirror_sync.c's; a fork's copy in a container's own
 * directory, mirror_fork.c's. This file calls the room's others, which
 * never call it (mirror_internal.h has their order).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget.h"
#include "lib/clock.h"
#include "lib/mapname.h"
#include "mirror/mirror_internal.h"
#include "perfmap_tools.h"
#include "lib/procfs.h"
#include "lib/subids.h"

/* The container of an ended mirror, until its map is archived. */
struct tag_rec {
	struct pidmap_node node;
	uint64_t start_ticks;
	char tag[CONTAINER_SHORT_LEN + 2];
};

static struct mirror *mirror_of_name(struct pidmap_node *n)
{
	return (struct mirror *)((char *)n - offsetof(struct mirror, name_node));
}

static struct mirror *find(const struct mirrors *m, pid_t pid)
{
	return (struct mirror *)pidmap_find(&m->by_pid, pid);
}

static void close_mirror(struct mirrors *m, struct mirror *mi)
{
	struct uid_count *u = mirror__uid(m, mi->uid);

	if (u && u->waiting)
		u->waiting--;
	pidmap_remove(&mi->dir->by_name, mi->ns_pid);
	pidmap_remove(&m->by_pid, mi->pid);
	mirror__copy_free(m, mi);
	mirror__close_source(m, mi);
	if (mi->dst.fd >= 0)
		close(mi->dst.fd);
	nsdirs_put(&m->dirs, mi->dir);
	free(mi);
}

/* ---- the tick ---- */

/* One mirror at the tick: its fork copy goes on, its map is looked for or read. */
static size_t poll_one(struct mirrors *m, struct mirror *mi, size_t cap, uint64_t now_ns)
{
	size_t spent = mirror__copy_step(m, mi, cap, now_ns);

	/*
	 * Inotify says when a map appears or is renamed over; this catches what
	 * it could not (an overflow, a watch refused or gone).
	 */
	if (!mi->src.stopped && now_ns >= mi->src.retry_ns) {
		mi->src.retry_ns = now_ns + RETRY_NS;
		if (mi->src.fd < 0)
			mirror__try_source(m, mi);
		else
			mirror__follow_name(m, mi, now_ns);
	}
	if (spent < cap)
		spent += mirror__sync(m, mi, cap - spent, false, now_ns);
	return spent;
}

void mirrors__poll(struct mirrors *m, uint64_t now_ns)
{
	size_t i, polls = 0, bytes = 0, start = m->poll_bucket;
	struct pidmap_node *n, *next;

	for (i = 0; i < m->by_pid.nbuckets; i++) {
		size_t b = (start + i) % m->by_pid.nbuckets;

		for (n = m->by_pid.buckets[b]; n; n = next) {
			next = n->next;
			bytes += poll_one(m, (struct mirror *)n,
					  bytes < TICK_BYTES ? TICK_BYTES - bytes : 0, now_ns);
			polls++;
		}
		if (polls >= TICK_POLLS || bytes >= TICK_BYTES) {
			m->poll_bucket = b + 1;
			return;
		}
	}
}

/* ---- a process placed ---- */

/*
 * The uid it runs as now (a container's process forks as root and execs as
 * its user): its counts move, its mirror becomes that uid's file, and its
 * map is looked at again (it may have been refused as another uid's).
 */
static void set_owner(struct mirrors *m, struct mirror *mi, uid_t uid, gid_t gid)
{
	struct uid_count *from = mirror__uid(m, mi->uid), *to = mirror__uid(m, uid);
	struct stat st = { 0 };

	if (mi->uid == uid && mi->gid == gid)
		return;
	if (from && to && mi->uid != uid) {
		if (from->waiting)
			from->waiting--;
		to->waiting++;
		if (mi->src.fd >= 0) {
			if (from->open)
				from->open--;
			to->open++;
		}
	}
	mi->uid = uid;
	mi->gid = gid;
	/*
	 * Its open map must be the new uid's own (no exception for root's: a
	 * root map's tail must not reach a mirror of the uid it dropped to).
	 * Refused, it is looked at again at the retries, its next file too.
	 */
	mi->uid_changed = true;
	if (mi->src.fd >= 0 && (fstat(mi->src.fd, &st) || !mirror__owner_ok(mi, &st))) {
		mirror__refuse(m, mi, NSR_OWNER, &st);
		mirror__close_source(m, mi);
		return;
	}
	if (mi->dst.fd >= 0 && fchown(mi->dst.fd, uid, gid))
		pr_debug("mirror %d: cannot give its mirror to uid %u: %s", (int)mi->pid,
			 (unsigned int)uid, strerror(errno));
	mi->refused.ino = 0;
	mirror__try_source(m, mi);
}

/*
 * Is @rq's user namespace's root the host's root (a rootful container's)?
 * By its uid_map, or, gone already, by a live ancestor's in its mount
 * namespace (a mount namespace's processes share its owner's). Not known:
 * no (root's files are then not taken to be its).
 */
static bool root_is_host_root(const struct ns_req *rq)
{
	struct idmap map;
	size_t i;

	if (!idmap_read(rq->pid, "uid_map", &map) && procfs_is(rq->pid, rq->start_ticks))
		return idmap_root_is_host_root(&map);
	for (i = 0; i < sizeof(rq->kin) / sizeof(rq->kin[0]); i++)
		if (rq->kin[i] > 0 && !idmap_read(rq->kin[i], "uid_map", &map) &&
		    procfs_ns(rq->kin[i], "mnt") == rq->mnt_ns)
			return idmap_root_is_host_root(&map);
	return false;
}

static int new_mirror(struct mirrors *m, struct nsdir *d, const struct ns_req *rq,
		      enum ns_place *place, uint64_t now_ns)
{
	struct uid_count *u = mirror__uid(m, rq->uid);
	struct container_id cid;
	struct mirror *mi;

	if (!u || m->by_pid.count >= MIRRORS_MAX || (rq->uid && u->waiting >= WAITING_PER_UID)) {
		nsdirs_put(&m->dirs, d);
		m->stats.over_limit++;
		return 0;
	}
	if (pidmap_find(&d->by_name, rq->ns_pid)) {
		/* Two live processes' maps at one name (pid namespaces sharing a /tmp): the first keeps it. */
		m->stats.ambiguous++;
		pr_warn("mirror %d (%s): %s/perf-%d.map is another live process's too; left to that one",
			(int)rq->pid, rq->comm, m->cfg.ns_map_dir, (int)rq->ns_pid);
		nsdirs_put(&m->dirs, d);
		return 0;
	}
	mi = calloc(1, sizeof(*mi));
	if (!mi) {
		nsdirs_put(&m->dirs, d);
		return -ENOMEM;
	}
	mi->node.pid = rq->pid;
	mi->name_node.pid = rq->ns_pid;
	mi->dir = d;
	mi->pid = rq->pid;
	mi->ns_pid = rq->ns_pid;
	mi->start_ticks = rq->start_ticks;
	mi->uid = rq->uid;
	mi->gid = rq->gid;
	mi->root_ok = root_is_host_root(rq);
	mi->src.fd = -1;
	mi->dst.fd = -1;
	mi->src.polled_ns = now_ns;
	mi->src.retry_ns = now_ns + RETRY_NS;
	snprintf(mi->comm, sizeof(mi->comm), "%s", rq->comm);
	if (!container_of(rq->pid, &cid) && cid.id[0])
		snprintf(d->tag, sizeof(d->tag), "c%.*s", CONTAINER_SHORT_LEN, cid.id);
	/* Its directory's container (a process gone before it was read has no cgroup to read). */
	memcpy(mi->tag, d->tag, sizeof(mi->tag));
	if (mi->tag[0])
		snprintf(mi->where, sizeof(mi->where), "container %s", mi->tag + 1);
	else
		snprintf(mi->where, sizeof(mi->where), "its namespace");
	pidmap_insert(&m->by_pid, &mi->node);
	pidmap_insert(&d->by_name, &mi->name_node);
	u->waiting++;
	m->stats.started++;
	*place = NS_MIRRORED;
	mirror__try_source(m, mi);
	return 0;
}

/*
 * The directory of @mnt_ns as it is now: the one last resolved for it is
 * resolved again through the same process's root while that process is still
 * in @mnt_ns (a directory mounted since, as a container's /tmp, is then
 * found), else taken as it was. With a reference; NULL if none is known.
 */
/* @rq's directory through @kin's root, while @kin is in @rq's mount namespace; with a reference. */
static struct nsdir *dir_through(struct mirrors *m, const struct ns_req *rq, pid_t kin,
				 uint64_t now_ns)
{
	enum ns_refusal why;
	struct stat st;
	int fd;

	if (kin <= 0)
		return NULL;
	fd = nsroot_open_dir(kin, m->cfg.ns_map_dir, &st, &why);
	if (fd < 0)
		return NULL;
	/* Its pid may be another process's by now: only while it is in that namespace. */
	if (procfs_ns(kin, "mnt") != rq->mnt_ns) {
		close(fd);
		return NULL;
	}
	return nsdirs_get(&m->dirs, fd, &st, rq->uid, rq->mnt_ns, kin, now_ns);
}

/*
 * The directory of a process gone before it was looked at, as its mount
 * namespace has it now: through the root of a live ancestor of it in that
 * namespace, or of the process that last resolved one for it (a directory
 * mounted since, as a container's /tmp, is then found), else as that one
 * was. With a reference; NULL if none is known.
 */
static struct nsdir *dir_now(struct mirrors *m, const struct ns_req *rq, uint64_t now_ns)
{
	struct nsdir *d, *fresh;
	size_t i;

	for (i = 0; i < sizeof(rq->kin) / sizeof(rq->kin[0]); i++) {
		d = dir_through(m, rq, rq->kin[i], now_ns);
		if (d)
			return d;
	}
	d = nsdirs_by_mnt_ns(&m->dirs, rq->mnt_ns);
	if (!d)
		return NULL;
	fresh = dir_through(m, rq, d->resolver, now_ns);
	if (!fresh)
		return d;
	nsdirs_put(&m->dirs, d);
	return fresh;
}

/* A process gone before it was looked at: its mount namespace's directory, if one is known. */
static int attach_gone(struct mirrors *m, const struct ns_req *rq, enum ns_place *place,
		       uint64_t now_ns)
{
	struct nsdir *d = dir_now(m, rq, now_ns);

	if (!d)
		return -ESRCH;
	if (d->is_map_dir && rq->ns_pid == rq->pid) {
		nsdirs_put(&m->dirs, d);
		m->stats.shared++;
		*place = NS_OURS;
		return 0;
	}
	return new_mirror(m, d, rq, place, now_ns);
}

static void refuse_dir(struct mirrors *m, const struct ns_req *rq, enum ns_refusal why)
{
	m->stats.refused[why]++;
	m->stats.refused_total++;
	/* Said once per mount namespace: each of its processes meets the same directory. */
	if (log_first_time(rq->mnt_ns, 0, "mirror-dir"))
		pr_warn("mirror %d (%s): %s in its root %s (said once for its mount namespace)",
			(int)rq->pid, rq->comm, m->cfg.ns_map_dir, ns_refusal_str(why));
}

int mirrors__attach(struct mirrors *m, const struct ns_req *rq, enum ns_place *place,
		    uint64_t now_ns)
{
	struct mirror *mi = find(m, rq->pid);
	enum ns_refusal why;
	struct nsdir *d;
	struct stat st;
	int fd;

	*place = NS_REFUSED;
	fd = nsroot_open_dir(rq->pid, m->cfg.ns_map_dir, &st, &why);
	if (fd == -ESRCH && mi) {
		/* Gone since its exec: its mirror goes on where it was, until its exit ends it. */
		*place = NS_MIRRORED;
		return 0;
	}
	if (fd == -ESRCH)
		return attach_gone(m, rq, place, now_ns);
	if (fd < 0) {
		if (why)
			refuse_dir(m, rq, why);
		return why ? 0 : fd;
	}
	/* Placed again after an exec: the same directory and name, the same mirror goes on. */
	if (mi && mi->dir->dev == st.st_dev && mi->dir->ino == st.st_ino &&
	    mi->ns_pid == rq->ns_pid) {
		close(fd);
		snprintf(mi->comm, sizeof(mi->comm), "%s", rq->comm);  /* the new image's name */
		mi->dir->mnt_ns = rq->mnt_ns;
		mi->dir->resolved_ns = now_ns;
		mi->dir->resolver = rq->pid;
		set_owner(m, mi, rq->uid, rq->gid);
		*place = NS_MIRRORED;
		return 0;
	}
	/*
	 * Elsewhere by now (a container's init moved into its root): the old
	 * one ends, and what its exec began at the host path goes, being lines
	 * of a map that is no longer the process's.
	 */
	if (mi) {
		mirror__drop_dest(m, mi);
		m->stats.ended++;
		close_mirror(m, mi);
	}
	/* Its map directory is ours and its pid the host's: its map is where a host process's is. */
	if (st.st_dev == m->dirs.map_dev && st.st_ino == m->dirs.map_ino && rq->ns_pid == rq->pid) {
		close(fd);
		m->stats.shared++;
		*place = NS_OURS;
		return 0;
	}
	d = nsdirs_get(&m->dirs, fd, &st, rq->uid, rq->mnt_ns, rq->pid, now_ns);
	if (!d) {
		m->stats.over_limit++;
		return 0;
	}
	return new_mirror(m, d, rq, place, now_ns);
}

bool mirrors__has(const struct mirrors *m, pid_t pid)
{
	return find(m, pid) != NULL;
}

void mirrors__sync(struct mirrors *m, pid_t pid, uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);

	if (mi)
		mirror__sync(m, mi, PASS_BYTES, false, now_ns);
}

/* ---- exec and exit ---- */

int mirrors__exec(struct mirrors *m, pid_t pid, uint64_t at_ns, struct map_info *mi_out,
		  uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);
	uint64_t from;
	int err;

	if (!mi)
		return -ENOENT;
	/* A copy still being made at the exec is the old image's business: stopped. */
	mirror__copy_free(m, mi);
	mirror__sync(m, mi, FINAL_BYTES, true, now_ns);
	err = mirror__dest_info(mi, mi_out);
	if (!err) {
		mi->prev.dev = mi_out->dev;
		mi->prev.ino = mi_out->ino;
		mi->prev.offset = mi->src.offset;
	}
	if (mi->dst.fd >= 0)
		close(mi->dst.fd);
	mi->dst.fd = -1;
	mi->dst.bytes = 0;
	mi->src.stopped = false;
	if (mirror__drop_copy(m, mi)) {
		mi->prev.offset = 0;  /* the new image's map is a new file, read from its start */
		return err ?: 1;
	}
	if (err || mi->src.fd < 0)
		return err;
	/*
	 * Lines read after the exec may be the new image's: they begin its new
	 * mirror too, read again once the caller has moved the old one away.
	 */
	from = mirror__offset_before(mi, at_ns);
	if (from < mi->src.offset)
		mi->src.offset = from;
	mirror__remember(mi);
	return 0;
}

static void keep_tag(struct mirrors *m, const struct mirror *mi)
{
	struct tag_rec *t;

	if (!mi->tag[0])
		return;
	/* Full (archives lost or slow): forgotten all at once, later archives named without. */
	if (m->tags.count >= TAGS_MAX)
		pidmap_clear(&m->tags);
	t = (struct tag_rec *)pidmap_remove(&m->tags, mi->pid);
	if (!t)
		t = calloc(1, sizeof(*t));
	if (!t)
		return;
	t->node.pid = mi->pid;
	t->start_ticks = mi->start_ticks;
	memcpy(t->tag, mi->tag, sizeof(t->tag));
	pidmap_insert(&m->tags, &t->node);
}

/* After the exit's read: are complete lines left unread (not only a torn last line)? */
static bool cut_lines(struct mirrors *m, const struct mirror *mi)
{
	ssize_t n;

	if (!mi->src.behind || mi->src.fd < 0 || mi->src.stopped)
		return false;
	n = pread(mi->src.fd, m->buf, mi->src.behind < PASS_BYTES ? (size_t)mi->src.behind : PASS_BYTES,
		  (off_t)mi->src.offset);
	return n > 0 && memchr(m->buf, '\n', (size_t)n);
}

int mirrors__end(struct mirrors *m, pid_t pid, struct map_info *mi_out, uint64_t now_ns)
{
	struct mirror *mi = find(m, pid);
	int err;

	if (!mi)
		return -ENOENT;
	/* A map made just before the exit, before its creation was read: it is there still. */
	mirror__try_source(m, mi);
	/* The parent's entries it was given are its map too. */
	while (mi->copy.running && mirror__copy_step(m, mi, FINAL_BYTES, now_ns))
		;
	mirror__sync(m, mi, FINAL_BYTES, true, now_ns);
	if (cut_lines(m, mi)) {
		/* More than an exit's read was written in its last tick: the rest is not mirrored. */
		m->stats.cut_at_exit++;
		pr_warn("mirror %d (%s): %llu bytes of its map were not mirrored before its exit",
			(int)mi->pid, mi->comm, (unsigned long long)mi->src.behind);
	}
	err = mirror__dest_info(mi, mi_out);
	if (!err)
		keep_tag(m, mi);
	mirror__keep_ended(m, mi);
	m->stats.ended++;
	close_mirror(m, mi);
	return err;
}

/* ---- what the host's policy and archive ask ---- */

bool mirrors__claims(const struct mirrors *m, pid_t name_pid, dev_t dev, ino_t ino)
{
	const struct nsdir *d = m->dirs.map_dir;
	const struct mirror *mi;
	struct pidmap_node *n;

	if (!d || !(n = pidmap_find(&d->by_name, name_pid)))
		return false;
	mi = mirror_of_name(n);
	/* Only the file it opened (its owner's): a host process's map at that name stays that one's. */
	return mi->src.fd >= 0 && mi->src.dev == dev && mi->src.ino == ino;
}

const char *mirrors__tag(const struct mirrors *m, pid_t pid, uint64_t start_ticks)
{
	const struct tag_rec *t = (const struct tag_rec *)pidmap_find(&m->tags, pid);
	const struct mirror *mi = find(m, pid);

	/* A live one's (its exec's archive), else an ended one's. */
	if (mi && mi->start_ticks == start_ticks)
		return mi->tag;
	return t && t->start_ticks == start_ticks ? t->tag : "";
}

void mirrors__archived(struct mirrors *m, pid_t pid, uint64_t start_ticks)
{
	struct tag_rec *t = (struct tag_rec *)pidmap_find(&m->tags, pid);

	if (t && t->start_ticks == start_ticks)
		free(pidmap_remove(&m->tags, pid));
}

/* ---- new maps, from inotify ---- */

static void on_name(struct mirrors *m, struct nsdir *d, pid_t name_pid, uint64_t now_ns)
{
	struct pidmap_node *n = d ? pidmap_find(&d->by_name, name_pid) : NULL;

	if (n)
		mirror__follow_name(m, mirror_of_name(n), now_ns);
}

void mirrors__on_map_dir(struct mirrors *m, pid_t name_pid, uint64_t now_ns)
{
	on_name(m, m->dirs.map_dir, name_pid, now_ns);
}

/* The queue overflowed: every waiting mirror looks at its next poll. */
static void retry_all(struct mirrors *m)
{
	struct pidmap_node *n, *next;
	size_t i;

	pidmap_for_each(&m->by_pid, i, n, next)
		((struct mirror *)n)->src.retry_ns = 0;
}

void mirrors__on_inotify(struct mirrors *m, uint64_t now_ns)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *e;
	struct nsdir *d;
	ssize_t len;
	pid_t pid;
	char *p;

	/* A bounded batch per wake-up: a container making files in a loop cannot hold the loop. */
	for (int reads = 0; reads < 16; reads++) {
		len = read(m->dirs.ifd, buf, sizeof(buf));
		if (len <= 0)
			return;
		for (p = buf; p < buf + len; p += sizeof(*e) + e->len) {
			e = (const struct inotify_event *)p;
			if (e->mask & IN_Q_OVERFLOW) {
				retry_all(m);
				continue;
			}
			d = nsdirs_by_wd(&m->dirs, e->wd);
			if (!d)
				continue;
			if (e->mask & IN_IGNORED) {
				/* Unmounted or gone: its mirrors hold their files; the polls look for new ones. */
				pidmap_remove(&m->dirs.by_wd, d->wd);
				d->wd = -1;
				continue;
			}
			if (e->len && map_name_pid(e->name, &pid))
				on_name(m, d, pid, now_ns);
		}
	}
}

/* ---- what status shows ---- */

int mirrors__fd(const struct mirrors *m)
{
	return m->dirs.ifd;
}

size_t mirrors__active(const struct mirrors *m)
{
	return m->by_pid.count;
}

const struct mirror_stats *mirrors__stats(const struct mirrors *m)
{
	return &m->stats;
}

uint64_t mirrors__behind(const struct mirrors *m)
{
	struct pidmap_node *n, *next;
	uint64_t total = 0;
	size_t i;

	pidmap_for_each(&m->by_pid, i, n, next)
		total += ((const struct mirror *)n)->src.behind;
	return total;
}

uint64_t mirrors__lag_p99_ms(const struct mirrors *m)
{
	uint64_t total = 0, seen = 0;
	size_t i;

	for (i = 0; i < MIRROR_LAG_BINS; i++)
		total += m->stats.lag[i];
	if (!total)
		return 0;
	for (i = 0; i < MIRROR_LAG_BINS; i++) {
		seen += m->stats.lag[i];
		if (seen * 100 >= total * 99)
			return i;
	}
	return MIRROR_LAG_BINS - 1;
}

size_t mirrors__describe(const struct mirrors *m, char *buf, size_t len, size_t max)
{
	struct pidmap_node *n, *next;
	size_t i, used = 0, k = 0;
	int w;

	pidmap_for_each(&m->by_pid, i, n, next) {
		const struct mirror *mi = (const struct mirror *)n;

		if (k++ >= max || used >= len)
			break;
		w = snprintf(buf + used, len - used,
			     "mirror_%d: ns_pid=%d container=%s bytes=%llu behind=%llu%s\n",
			     (int)mi->pid, (int)mi->ns_pid, mi->tag[0] ? mi->tag + 1 : "-",
			     (unsigned long long)mi->dst.bytes, (unsigned long long)mi->src.behind,
			     mi->src.fd < 0 ? " waiting" : mi->src.stopped ? " stopped" : "");
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
	return used;
}

/* ---- the table ---- */

struct mirrors *mirrors__new(const struct mirror_config *cfg)
{
	struct mirrors *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->cfg = *cfg;
	m->dirs.ifd = -1;
	if (nsdirs_init(&m->dirs, cfg->map_dir_fd, cfg->ns_map_dir))
		goto free_m;
	m->buf = malloc(PASS_BYTES);
	m->budget = budget__new(cfg->rate, cfg->burst);
	if (!m->buf || !m->budget || pidmap_init(&m->by_pid, 64) || pidmap_init(&m->tags, 64) ||
	    pidmap_init(&m->ended, 64) || pidmap_init(&m->uids, 16))
		goto free_m;
	return m;
free_m:
	mirrors__free(m);
	return NULL;
}

void mirrors__set_budget(struct mirrors *m, uint64_t rate, uint64_t burst)
{
	budget__set(m->budget, rate, burst);
}

void mirrors__free(struct mirrors *m)
{
	struct pidmap_node *n, *next;
	size_t i;

	if (!m)
		return;
	if (m->by_pid.buckets)
		pidmap_for_each(&m->by_pid, i, n, next)
			close_mirror(m, (struct mirror *)n);
	nsdirs_fini(&m->dirs);
	if (m->by_pid.buckets)
		pidmap_fini(&m->by_pid);
	if (m->tags.buckets)
		pidmap_fini(&m->tags);
	if (m->ended.buckets)
		mirror__ended_fini(m);
	if (m->uids.buckets)
		pidmap_fini(&m->uids);
	budget__free(m->budget);
	free(m->buf);
	free(m);
}

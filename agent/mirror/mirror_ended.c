/*
 * Pid reuse inside a container: an ended process's map in its own directory
 * remembered, and removed when another process takes its pid there, unwritten
 * since; written since, only what follows the ended process's entries is the
 * new holder's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/mapname.h"
#include "mirror/mirror_internal.h"

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

void mirror__keep_ended(struct mirrors *m, const struct mirror *mi)
{
	struct ended_rec *e;
	struct stat st;
	pid_t key;

	if (mi->src.fd < 0 || mi->dir->is_host || fstat(mi->src.fd, &st))
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
	e->line_end = mi->src.offset < e->size ? mi->src.offset : e->size;
	if (file_times(mi->src.fd, &e->btime_ns, &e->ctime_ns)) {
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
	if (unwritten && mirror__unlink_unwritten(m, mi, name, fd, st)) {
		m->stats.ns_stale_removed++;
		pr_info("mirror %d (%s): %s/%s in %s was an earlier process's, unwritten since it ended (its mirror has it); removed",
			(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name, mirror__where(mi));
		free(e);
		return true;
	}
	/* Written since (or open for writing): only what follows the earlier process's is this one's. */
	if (e->line_end <= (uint64_t)st->st_size) {
		m->stats.ns_stale_skipped++;
		mi->src.offset = e->line_end;
		pr_info("mirror %d (%s): %s/%s holds an earlier process's entries; mirrored from byte %llu on",
			(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name,
			(unsigned long long)mi->src.offset);
	}
forget:
	free(e);
	return false;
}

void mirror__ended_fini(struct mirrors *m)
{
	pidmap_fini(&m->ended);
}

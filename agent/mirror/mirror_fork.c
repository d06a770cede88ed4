/*
 * A fork in a namespace: its copy started from the parent's map as it is
 * now, and mirrored at once; at the child's exec, that copy removed while
 * still only the parent's entries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/mapname.h"
#include "lib/procfs.h"
#include "mirror/mirror_internal.h"

int mirrors__copy(struct mirrors *m, pid_t parent_pid, const struct ns_req *rq,
		  uint64_t now_ns)
{
	bool in_dir = false;
	struct mirror *parent = (struct mirror *)pidmap_find(&m->by_pid, parent_pid);
	struct mirror *child = (struct mirror *)pidmap_find(&m->by_pid, rq->pid);
	struct ns_copy *c;
	struct stat st;
	int fd, err;

	if (!parent || !child || child->copy.running)
		return -ENOENT;
	/*
	 * The parent's map may be there before its directory's watch says so:
	 * the fork's event can be read first. Its map as it is now, as on the
	 * host; but only while the parent is still there (a zombie too): gone,
	 * its pid in the container may be another process's, and so the map
	 * at its name (not copied, counted).
	 */
	if (parent->src.fd < 0) {
		mirror__try_source(m, parent);
		if (parent->src.fd >= 0 && !procfs_is(parent->pid, parent->start_ticks)) {
			mirror__close_source(m, parent);
			m->stats.ns_copies_parent_gone++;
		}
	}
	if (parent->src.fd < 0)
		return -ENOENT;
	if (child->dir != parent->dir)
		return -EXDEV;  /* another root: the parent's map is not there */
	if (fstat(parent->src.fd, &st))
		return -errno;
	if (m->cfg.max_bytes && (uint64_t)st.st_size > m->cfg.max_bytes)
		return -EFBIG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->src_fd = fcntl(parent->src.fd, F_DUPFD_CLOEXEC, 0);
	c->end = (uint64_t)st.st_size;
	/* Each copy in progress holds its child's mappings: a few at a time. */
	if (m->inherit_held < NS_INHERIT_HELD) {
		inherit_read(rq->pid, rq->start_ticks, &c->in);
		m->inherit_held += c->in.known;
	}
	if (!c->in.known)
		m->stats.ns_copies_unfiltered++;
	c->parent = parent_pid;
	child->dst.mode = st.st_mode & 0666;
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
	fd = mirror__copy_in_dir(m, child, c->src_fd, st.st_mode);
	if (fd >= 0) {
		in_dir = true;
		c->dst_fd = fd;
	} else if (fd == -EPERM) {
		err = child->dst.fd >= 0 ? -EEXIST : mirror__make_dest(m, child);
		if (err)
			goto close_src;
		c->dst_fd = child->dst.fd;
	} else {
		err = fd;
		goto close_src;
	}
	child->copy.running = c;
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

bool mirror__drop_copy(struct mirrors *m, struct mirror *mi)
{
	struct stat st;
	char name[32];

	if (!mi->copy.ino || mi->src.fd < 0 || fstat(mi->src.fd, &st) ||
	    st.st_dev != mi->copy.dev || st.st_ino != mi->copy.ino ||
	    (uint64_t)st.st_size != mi->copy.size)
		return false;
	mirror__copy_free(m, mi);
	map_name(mi->ns_pid, name, sizeof(name));
	if (!mirror__unlink_unwritten(m, mi, name, mi->src.fd, &st))
		return false;
	m->stats.ns_copies_dropped++;
	pr_info("exec %d (%s): %s/%s in %s was only its parent's entries, copied at its fork; removed",
		(int)mi->pid, mi->comm, m->cfg.ns_map_dir, name, mirror__where(mi));
	mirror__close_source(m, mi);
	mi->copy.ino = 0;
	mi->src.offset = 0;
	mi->src.ino = 0;
	return true;
}

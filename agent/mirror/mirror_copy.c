/*
 * A fork's copy of its parent's entries in a namespace, made a bounded part
 * at a time: into the child's own map in its directory (made as the child),
 * or into its mirror on the host where nothing may be written for it.
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
#include "mirror/mirror_internal.h"
#include "perfmap_tools.h"

void mirror__copy_free(struct mirrors *m, struct mirror *mi)
{
	if (!mi->copy.running)
		return;
	close(mi->copy.running->src_fd);
	if (mi->copy.running->dst_fd != mi->dst.fd)
		close(mi->copy.running->dst_fd);
	if (mi->copy.running->in.known)
		m->inherit_held--;
	inherit_release(&mi->copy.running->in);
	free(mi->copy.running);
	mi->copy.running = NULL;
}

size_t mirror__copy_step(struct mirrors *m, struct mirror *mi, size_t cap, uint64_t now_ns)
{
	struct ns_copy *c = mi->copy.running;
	size_t want, whole, kept;
	long left_out = 0;
	ssize_t n;
	char *nl;

	if (!c)
		return 0;
	if (c->off >= c->end)
		goto free_copy;
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
			goto free_copy;
		return 0;  /* a small part of the tick was left: the next one reads a whole line */
	}
	/* Entries only, as they are in a mirror: the parent's map is any bytes its owner wrote. */
	kept = perfmap__canonical_lines(m->buf, whole, &m->stats.lines_dropped);
	kept = inherit_filter(&c->in, m->buf, kept, &left_out);
	m->stats.ns_copy_entries_left_out += (uint64_t)left_out;
	if (kept && perfmap__write_all(c->dst_fd, m->buf, kept)) {
		m->stats.ns_copies_failed++;
		goto free_copy;
	}
	c->off += whole;
	if (c->dst_fd == mi->dst.fd)
		mi->dst.bytes += kept;
	else
		mi->copy.size += kept;
	if (c->off < c->end)
		return whole;
free_copy:
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
int mirror__copy_in_dir(struct mirrors *m, struct mirror *child, int parent_fd, mode_t mode)
{
	struct proc_creds cr;
	bool own = false;
	struct stat st;
	int dfd, fd;

	if (mirror__may_act(m, child, &cr, &dfd))
		return -EPERM;
	if (mirror__act_begin(&cr)) {
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
		child->copy.dev = st.st_dev;
		child->copy.ino = st.st_ino;
		child->copy.size = 0;
	}
	return fd;
}

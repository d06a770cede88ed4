/*
 * Acting in a container's own map directory as the process it is done for:
 * with its own file-system ids, groups and capabilities (creds.c), only in a
 * directory its user namespace maps the owner of, so that the kernel allows
 * only what the process could have done itself; and never in the host's
 * directories (the map directory, the host's own /tmp), where a name may be
 * any host process's. A file is removed only while its name is still that
 * inode and no one has it open for writing (a read lease).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/actas.h"
#include "mirror/mirror_internal.h"

/* What the log says of each refusal; its count is a status key of perfmapd_counters.def's. */
static const struct {
	const char *words;
} write_refusals[NSW__COUNT] = {
	[NSW_NOT_ITS_DIR] = { "is owned by a uid its user namespace does not map: not the namespace's own directory" },
	[NSW_UNMAPPED] = { "would get ids its user namespace does not map" },
	[NSW_DENIED] = { "is not writable by it: its own credentials do not allow it" },
	[NSW_GONE] = { "was not written: it was gone" },
};

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
int mirror__act_begin(const struct proc_creds *c)
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
bool mirror__unlink_unwritten(struct mirrors *m, struct mirror *mi, const char *name, int fd,
			      const struct stat *st)
{
	struct proc_creds c;
	struct stat at;
	int dfd, err;

	if (mirror__may_act(m, mi, &c, &dfd))
		return false;
	err = fcntl(fd, F_SETLEASE, F_RDLCK) ? -errno : mirror__act_begin(&c);
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

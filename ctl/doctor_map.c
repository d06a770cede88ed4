/*
 * perfmapctl doctor: the process's map. The host's <map-dir>/perf-<pid>.map,
 * and for a process in another mount namespace the one in its own /tmp under
 * its own pid, reached through /proc/<pid>/root without following anything
 * the container planted (openat2 RESOLVE_IN_ROOT, no symlinks, no magic
 * links) and opened with the refusals the agent makes. Then whether the
 * process could write it, what each consumer makes of it, and how its
 * entries meet the process's mappings.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "doctor.h"

int doc_open_dir_in_root(int dirfd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* The map @name in the directory @dirfd, shown as @shown. */
static void look(int dirfd, const char *shown, const char *name, uint64_t max_bytes,
		 struct doc_mapfile *f)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .max_bytes = max_bytes);
	int fd;

	snprintf(f->path, sizeof(f->path), "%s", shown);
	f->looked = true;
	f->fd = -1;
	memset(&f->st, 0, sizeof(f->st));
	fd = perfmap__open_map_at(dirfd, name, O_RDONLY, &oopts, &f->st);
	if (fd == -ENOENT)
		return;
	f->exists = true;
	if (fd < 0)
		f->refused = fd;
	else
		f->fd = fd;
}

static bool in_group(const struct doc_proc *p, gid_t gid)
{
	size_t i;

	if (p->fsgid == gid)
		return true;
	for (i = 0; i < p->ngroups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

/* May the process's fs uid do @want (a mode's user bits: 2 write, 1 search) on @st? */
static bool may(const struct doc_proc *p, const struct stat *st, mode_t want)
{
	if (!p->fsuid)
		return true;  /* CAP_DAC_OVERRIDE, as runtimes run as root have */
	if (st->st_uid == p->fsuid)
		return ((st->st_mode >> 6) & want) == want;
	if (in_group(p, st->st_gid))
		return ((st->st_mode >> 3) & want) == want;
	return (st->st_mode & want) == want;
}

static int protected_regular(void)
{
	char buf[16] = "";
	int fd = open("/proc/sys/fs/protected_regular", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return atoi(buf);
}

/*
 * Runtimes open their map with O_CREAT (CPython O_APPEND, V8 "w+"): in a
 * sticky directory fs.protected_regular refuses that for a file another
 * user owns, whatever its mode, unless the directory is the opener's.
 */
static bool blocked_by_protected_regular(const struct doc_proc *p, const struct stat *dir,
					 const struct stat *file)
{
	int level = protected_regular();

	if (!p->fsuid || !level || !(dir->st_mode & S_ISVTX) || file->st_uid == p->fsuid ||
	    dir->st_uid == p->fsuid)
		return false;
	return (dir->st_mode & S_IWOTH) || (level >= 2 && (dir->st_mode & S_IWGRP));
}

static void judge_writable(const struct doc_proc *p, int dirfd, const struct doc_mapfile *f,
			   struct doc_map *m)
{
	struct stat dir;

	m->dir_writable = m->file_writable = true;
	if (dirfd < 0 || fstat(dirfd, &dir))
		return;
	m->dir_writable = may(p, &dir, 3);
	if (!f->exists) {
		if (!m->dir_writable)
			snprintf(m->why_not_writable, sizeof(m->why_not_writable),
				 "its directory (owner %u, mode %04o) is not writable by uid %u",
				 (unsigned int)dir.st_uid, (unsigned int)(dir.st_mode & 07777),
				 (unsigned int)p->fsuid);
		return;
	}
	if (!may(p, &f->st, 2)) {
		m->file_writable = false;
		snprintf(m->why_not_writable, sizeof(m->why_not_writable),
			 "it belongs to uid %u with mode %04o, and the process runs as uid %u",
			 (unsigned int)f->st.st_uid, (unsigned int)(f->st.st_mode & 07777),
			 (unsigned int)p->fsuid);
	} else if (blocked_by_protected_regular(p, &dir, &f->st)) {
		m->file_writable = false;
		snprintf(m->why_not_writable, sizeof(m->why_not_writable),
			 "it belongs to uid %u in a sticky directory and fs.protected_regular refuses uid %u an O_CREAT open of it",
			 (unsigned int)f->st.st_uid, (unsigned int)p->fsuid);
	}
}

/* The container's /tmp, through its root as the kernel resolves it for the process. */
static int ns_tmp(pid_t pid)
{
	char path[64];
	int root, fd;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = doc_open_dir_in_root(root, "tmp");
	close(root);
	return fd;
}

int doc_map_find(const struct doc_opts *o, const struct doc_proc *p, struct doc_map *m)
{
	char name[64], shown[PATH_MAX];
	int hostdir, nsdir = -1;

	memset(m, 0, sizeof(*m));
	m->host.fd = m->ns.fd = -1;
	hostdir = open(o->map_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hostdir < 0)
		return -errno;
	snprintf(name, sizeof(name), "perf-%d.map", (int)p->pid);
	snprintf(shown, sizeof(shown), "%s/%s", o->map_dir, name);
	look(hostdir, shown, name, o->max_bytes, &m->host);

	/*
	 * The runtime names its map by the pid it sees, in the /tmp it sees: in
	 * another mount namespace that /tmp is its own; in only another pid
	 * namespace it is ours, under the namespace's pid.
	 */
	snprintf(name, sizeof(name), "perf-%d.map", (int)p->ns_pid);
	if (p->other_mnt_ns) {
		nsdir = ns_tmp(p->pid);
		snprintf(shown, sizeof(shown), "/proc/%d/root/tmp/%s", (int)p->pid, name);
		if (nsdir >= 0)
			look(nsdir, shown, name, o->max_bytes, &m->ns);
	} else if (p->ns_pid != p->pid) {
		snprintf(shown, sizeof(shown), "%s/%s", o->map_dir, name);
		look(hostdir, shown, name, o->max_bytes, &m->ns);
	}
	m->used = m->host.fd >= 0 ? &m->host : m->ns.fd >= 0 ? &m->ns : NULL;
	/* Whether the process could write the map it writes: in its own /tmp when it has one. */
	if (p->other_mnt_ns)
		judge_writable(p, nsdir, &m->ns, m);
	else
		judge_writable(p, hostdir, m->ns.exists ? &m->ns : &m->host, m);
	if (nsdir >= 0)
		close(nsdir);
	close(hostdir);
	return 0;
}

static struct perfmap_reader *reader_at_start(int fd, uint64_t max_bytes)
{
	PERFMAP_OPTS(perfmap_reader_opts, ropts, .max_bytes = max_bytes);

	if (lseek(fd, 0, SEEK_SET) < 0)
		return NULL;
	return perfmap_reader__from_fd(fd, &ropts);
}

/* What `perfmapctl check` says of the map, and its entries against @vs. */
int doc_map_check(const struct doc_opts *o, const struct perfmap_vmas *vs, struct doc_map *m)
{
	struct perfmap_reader *r;
	int err;

	if (!m->used || m->used->fd < 0)
		return 0;
	r = reader_at_start(m->used->fd, o->max_bytes);
	if (!r)
		return -errno;
	err = perfmap_check(r, &m->report);
	perfmap_reader__free(r);
	if (err)
		return err;
	r = reader_at_start(m->used->fd, o->max_bytes);
	if (!r)
		return -errno;
	err = perfmap__correlate(r, vs, &m->corr);
	perfmap_reader__free(r);
	m->checked = !err;
	return err;
}

void doc_map_release(struct doc_map *m)
{
	if (!m)
		return;
	if (m->host.fd >= 0)
		close(m->host.fd);
	if (m->ns.fd >= 0)
		close(m->ns.fd);
	m->host.fd = m->ns.fd = -1;
}

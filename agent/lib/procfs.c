/* /proc readers: identity (start time), parent, owner and namespaces of a process. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "lib/procfs.h"

/* include/linux/sched.h: set at the start of do_exit(), before exit_mm(). */
#define PF_EXITING 0x00000004

static int read_small(const char *path, char *buf, size_t cap)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* What libperfmap read of /proc/<pid>/stat, into the agent's record of the process. */
static void from_stat(const struct perfmap_proc_stat *st, struct proc_info *pi)
{
	_Static_assert(sizeof(pi->comm) == sizeof(st->comm), "comm: TASK_COMM_LEN");
	memcpy(pi->comm, st->comm, sizeof(pi->comm));
	pi->state = st->state;
	pi->ppid = st->ppid;
	pi->flags = st->flags;
	pi->start_ticks = st->start_ticks;
}

/* libperfmap's parser, the one the profiler and perfmapctl use too. */
int procfs_parse_stat(const char *buf, struct proc_info *pi)
{
	struct perfmap_proc_stat st;
	int err;

	err = perfmap__proc_stat_parse(buf, &st);
	if (err)
		return err;
	from_stat(&st, pi);
	return 0;
}

int procfs_read_text(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	int err;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	err = read_small(path, buf, cap);
	return err == -ENOENT ? -ESRCH : err;
}

/* /proc/<pid>/stat, parsed into @pi; 0, -ENOENT when the process is gone, or -errno. */
static int read_stat(pid_t pid, struct proc_info *pi)
{
	struct perfmap_proc_stat st;
	int err;

	err = perfmap__proc_stat_read(pid, &st);
	if (err)
		return err == -ESRCH ? -ENOENT : err;
	from_stat(&st, pi);
	return 0;
}

/* The innermost of the "NSpid:" line's pids (one per nested pid namespace); 0 without one. */
static pid_t parse_nspid(const char *buf)
{
	const char *p = strstr(buf, "\nNSpid:");
	unsigned long v, last = 0;
	char *end;

	if (!p)
		return 0;
	for (p += 7; *p && *p != '\n'; p = end) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			break;
		v = strtoul(p, &end, 10);
		if (v > 0x3fffffff)
			return 0;
		last = v;
	}
	return (pid_t)last;
}

/* The effective ids from the "Uid:" and "Gid:" lines of /proc/<pid>/status, and NSpid. */
int procfs_parse_status(const char *buf, struct proc_info *pi)
{
	unsigned int r, e;
	const char *p;

	pi->ns_pid = parse_nspid(buf);
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u %u", &r, &e) != 2)
		return -EINVAL;
	pi->uid = e;
	p = strstr(buf, "\nGid:");
	if (!p || sscanf(p + 5, "%u %u", &r, &e) != 2)
		return -EINVAL;
	pi->gid = e;
	return 0;
}

uint64_t procfs_ns(pid_t pid, const char *ns)
{
	return perfmap__ns_inode(pid, ns);
}

int procfs_read(pid_t pid, struct proc_info *pi)
{
	char path[64], buf[4096];
	int err;

	memset(pi, 0, sizeof(*pi));
	pi->pid = pid;
	err = read_stat(pid, pi);
	if (err)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err == -ESRCH ? -ENOENT : err;
	err = procfs_parse_status(buf, pi);
	if (err)
		return err;
	if (!pi->ns_pid)
		pi->ns_pid = pid;
	pi->mnt_ns = procfs_ns(pid, "mnt");
	pi->pid_ns = procfs_ns(pid, "pid");
	return 0;
}

bool procfs_is(pid_t pid, uint64_t start_ticks)
{
	struct proc_info pi;

	/* PF_EXITING is set before an exit lets the memory go: not yet, and /proc/<pid>/maps was whole. */
	return !read_stat(pid, &pi) && pi.start_ticks == start_ticks && pi.state != 'Z' && pi.state != 'X' &&
	       !(pi.flags & PF_EXITING);
}

bool procfs_pid_held(pid_t pid, uint64_t start_ticks)
{
	struct proc_info pi;

	if (read_stat(pid, &pi))
		return !start_ticks && (!kill(pid, 0) || errno != ESRCH);
	return !start_ticks || pi.start_ticks != start_ticks;
}

int procfs_exe(pid_t pid, dev_t *dev, ino_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st))
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

int procfs_for_each(int (*fn)(pid_t pid, void *ctx), void *ctx)
{
	struct dirent *de;
	DIR *d;
	int err = 0;

	d = opendir("/proc");
	if (!d)
		return -errno;
	while (!err && (de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		err = fn((pid_t)strtol(de->d_name, NULL, 10), ctx);
	}
	closedir(d);
	return err;
}

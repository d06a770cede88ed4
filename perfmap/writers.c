/* Which processes have a given file open for writing, from /proc/<pid>/fd and fdinfo. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap_tools.h"

/*
 * The open flags of fd @fd of @pid, from the "flags:" line of its fdinfo
 * (octal); -errno when unreadable, -ENODATA without that line.
 */
static int fd_flags(int proc_fd, const char *pid, const char *fd)
{
	char path[2 * NAME_MAX + 16], line[128];
	long flags = -1;
	FILE *f;
	int dfd, err;

	snprintf(path, sizeof(path), "%s/fdinfo/%s", pid, fd);
	dfd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	f = fdopen(dfd, "r");
	if (!f) {
		err = -errno;
		close(dfd);
		return err;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "flags: %lo", &flags) == 1)
			break;
	fclose(f);
	return flags < 0 ? -ENODATA : (int)flags;
}

/* 1 when @pid writes (dev, ino), 0 when not, -errno when its fds cannot be read. */
static int process_writes(int proc_fd, const char *pid, dev_t dev, ino_t ino)
{
	char path[NAME_MAX + 8];
	struct dirent *de;
	struct stat st;
	int dfd, flags, ret = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/fd", pid);
	dfd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;  /* gone: not a writer */
	d = fdopendir(dfd);
	if (!d) {
		ret = -errno;
		close(dfd);
		return ret;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		/* stat follows the magic link to the open file itself. */
		if (fstatat(dfd, de->d_name, &st, 0) || st.st_dev != dev ||
		    st.st_ino != ino)
			continue;
		flags = fd_flags(proc_fd, pid, de->d_name);
		/* Unknown flags: assume the worst. */
		if (flags < 0 || (flags & O_ACCMODE) != O_RDONLY) {
			ret = 1;
			break;
		}
	}
	closedir(d);
	return ret;
}

int perfmap__writers_find(dev_t dev, ino_t ino, struct perfmap_writers *w)
{
	char self[16];
	struct dirent *de;
	int proc_fd, r;
	DIR *d;

	memset(w, 0, sizeof(*w));
	proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return -errno;
	d = fdopendir(dup(proc_fd));
	if (!d) {
		r = -errno;
		close(proc_fd);
		return r;
	}
	snprintf(self, sizeof(self), "%d", (int)getpid());
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]) || !strcmp(de->d_name, self))
			continue;
		r = process_writes(proc_fd, de->d_name, dev, ino);
		if (r < 0) {
			w->hidden++;
		} else if (r > 0) {
			if (w->count < sizeof(w->pid) / sizeof(w->pid[0]))
				w->pid[w->count] = (pid_t)atoi(de->d_name);
			w->count++;
		}
	}
	closedir(d);
	close(proc_fd);
	return 0;
}

void perfmap__writer_describe(pid_t pid, char *buf, size_t len)
{
	char path[64], comm[32] = "?";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, comm, sizeof(comm) - 1);
		comm[n > 0 ? n : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		close(fd);
	}
	snprintf(buf, len, "%d (%s)", (int)pid, comm);
}

/* /proc/<pid>/stat read and parsed: the one parser of it the agent, the profiler and perfmapctl share. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* A stat line is under 1 KiB: 52 numbers and a comm of at most 64 bytes (a kernel thread's). */
#define STAT_MAX 4096
/* The last field read: rss. */
#define STAT_FIELDS 24

/*
 * "pid (comm) state ppid ... starttime vsize rss ...": comm may hold spaces,
 * parentheses and newlines, but the fields after it hold no ')'; the last
 * one ends it.
 */
int perfmap__proc_stat_parse(const char *buf, struct perfmap_proc_stat *out)
{
	const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	struct perfmap_proc_stat st;
	const char *p;
	size_t len;
	int field;

	/* Field 3 (state) follows ") ": without both, the fields are not there. */
	if (!open || !close || close < open || close[1] != ' ' || !close[2])
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	len = (size_t)(close - open - 1);
	if (len >= sizeof(st.comm))
		len = sizeof(st.comm) - 1;
	memcpy(st.comm, open + 1, len);
	st.state = close[2];
	for (p = close + 2, field = 3; *p && field < STAT_FIELDS; p++) {
		if (*p != ' ')
			continue;
		switch (++field) {
		case 4:
			st.ppid = (pid_t)strtol(p + 1, NULL, 10);
			break;
		case 9:
			st.flags = strtoul(p + 1, NULL, 10);
			break;
		case 14:
			st.utime_ticks = strtoull(p + 1, NULL, 10);
			break;
		case 15:
			st.stime_ticks = strtoull(p + 1, NULL, 10);
			break;
		case 22:
			st.start_ticks = strtoull(p + 1, NULL, 10);
			break;
		case 23:
			st.vsize_bytes = strtoull(p + 1, NULL, 10);
			break;
		case 24:
			st.rss_pages = strtoull(p + 1, NULL, 10);
			break;
		}
	}
	if (field != STAT_FIELDS)
		return -EINVAL;
	*out = st;
	return 0;
}

static int read_path(int dirfd, const char *path, struct perfmap_proc_stat *out)
{
	char buf[STAT_MAX];
	ssize_t n;
	int fd, err;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* One read: the kernel writes the whole line at once. */
	n = read(fd, buf, sizeof(buf) - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	/* Nothing at all: the process went between the open and the read. */
	if (!n)
		return -ESRCH;
	buf[n] = '\0';
	return perfmap__proc_stat_parse(buf, out);
}

int perfmap__proc_stat_read(pid_t pid, struct perfmap_proc_stat *out)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return read_path(AT_FDCWD, path, out);
}

int perfmap__proc_stat_read_at(int dirfd, struct perfmap_proc_stat *out)
{
	return read_path(dirfd, "stat", out);
}

int perfmap__proc_stat_read_self(struct perfmap_proc_stat *out)
{
	/* Not /proc/<getpid()>: a /proc of another pid namespace knows us by another pid. */
	return read_path(AT_FDCWD, "/proc/self/stat", out);
}

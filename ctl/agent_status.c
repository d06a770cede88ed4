/*
 * What perfmapctl's commands ask the perfmapd running for a map directory:
 * its status text (status, doctor), and from it the archive it keeps
 * (restore, doctor), so that --archive-dir is needed only without one.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "perfmap_tools.h"
#include "status_view.h"

#define STATUS_MAX (64u << 10)
/* An agent stopped (SIGSTOP) or stuck answers never: the command must not wait forever. */
#define STATUS_TIMEOUT_S 10

int ctl_status_fetch(const char *map_dir, const char *run_dir, char **text, size_t *len,
		     char *sock, size_t sock_len)
{
	return ctl_status_ask(map_dir, run_dir, NULL, text, len, sock, sock_len);
}

int ctl_status_ask(const char *map_dir, const char *run_dir, const char *request, char **text,
		   size_t *len, char *sock, size_t sock_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = STATUS_TIMEOUT_S };
	char lock[PATH_MAX];
	char *buf;
	size_t have = 0;
	ssize_t n = 0;
	int fd, err;

	if (sock_len < sizeof(lock))
		return -EINVAL;
	err = perfmap__run_paths(run_dir, map_dir, lock, sock, sizeof(lock));
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The send timeout bounds connect() too, which waits while the agent's backlog is full. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		err = -errno;
		goto close_fd;
	}
	memcpy(sa.sun_path, sock, strlen(sock) + 1);  /* fits: instance_paths checked */
	/*
	 * A request is announced by binding first (autobind: a name the kernel
	 * picks): the agent then awaits its line, which may reach it after it
	 * accepted the connection, instead of answering the whole status at once.
	 */
	if (request && bind(fd, (struct sockaddr *)&(struct sockaddr_un){ .sun_family = AF_UNIX },
			    sizeof(sa_family_t))) {
		err = -errno;
		goto close_fd;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		goto close_fd;
	}
	/* In one write: a line split in two is no request. An agent that takes none answers all the same. */
	if (request && send(fd, request, strlen(request), MSG_NOSIGNAL) < 0 && errno != EPIPE &&
	    errno != ECONNRESET) {
		err = -errno;
		goto close_fd;
	}
	buf = malloc(STATUS_MAX + 1);
	if (!buf) {
		err = -ENOMEM;
		goto close_fd;
	}
	while (have < STATUS_MAX && (n = read(fd, buf + have, STATUS_MAX - have)) > 0)
		have += (size_t)n;
	/* Closed with our request unread: the kernel says reset after the whole answer. */
	if (n < 0 && errno == ECONNRESET && request)
		n = 0;
	if (n < 0) {
		err = errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		free(buf);
		goto close_fd;
	}
	buf[have] = '\0';
	*text = buf;
	*len = have;
close_fd:
	close(fd);
	return err;
}

/* The archive: @given, else the agent's @agent_dir (when @err is 0), else the default, and why. */
static void archive_choose(struct ctl_archive *a, const char *given, const char *map_dir, int err,
			   const char *agent_dir)
{
	memset(a, 0, sizeof(*a));
	if (given) {
		a->from = CTL_ARCHIVE_GIVEN;
		snprintf(a->dir, sizeof(a->dir), "%s", given);
		return;
	}
	/* The agent takes only an absolute --archive-dir; anything else is no answer. */
	if (!err && agent_dir && agent_dir[0] == '/' && strlen(agent_dir) < sizeof(a->dir)) {
		a->from = CTL_ARCHIVE_AGENT;
		snprintf(a->dir, sizeof(a->dir), "%s", agent_dir);
		snprintf(a->whose, sizeof(a->whose), " (perfmapd's, for %s)", map_dir);
		return;
	}
	snprintf(a->dir, sizeof(a->dir), "%s", CTL_ARCHIVE_DIR_DEFAULT);
	a->from = CTL_ARCHIVE_DEFAULT;
	if (err == -ENOENT || err == -ECONNREFUSED)
		snprintf(a->whose, sizeof(a->whose), " (the default: no perfmapd runs for %s)",
			 map_dir);
	else if (err == -EACCES || err == -EPERM)
		snprintf(a->whose, sizeof(a->whose),
			 " (the default: the status of perfmapd for %s may not be read by this user)",
			 map_dir);
	else if (err == -ETIMEDOUT)
		snprintf(a->whose, sizeof(a->whose),
			 " (the default: perfmapd for %s did not answer within %d s)", map_dir,
			 STATUS_TIMEOUT_S);
	else if (err)
		snprintf(a->whose, sizeof(a->whose),
			 " (the default: perfmapd for %s could not be asked: %s)", map_dir,
			 strerror(-err));
	else
		snprintf(a->whose, sizeof(a->whose),
			 " (the default: perfmapd for %s did not say its archive)", map_dir);
}

void ctl_archive_find(struct ctl_archive *a, const char *given, const char *map_dir,
		      const char *run_dir)
{
	struct status_view v = { 0 };
	char sock[PATH_MAX], *text = NULL;
	size_t len;
	int err = 0;

	if (!given) {
		err = ctl_status_fetch(map_dir, run_dir, &text, &len, sock, sizeof(sock));
		if (!err)
			err = status_view__parse(&v, text);
	}
	archive_choose(a, given, map_dir, err, err ? NULL : v.value[PMC_archive_dir]);
	status_view__free(&v);
	free(text);
}

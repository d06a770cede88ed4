/*
 * The profiler's side of perfmapd's hold socket (agent/in/holds.c): each
 * process it samples is held, so that the agent keeps its map at its path
 * past the retention until the stacks are named; a process gone by then is
 * released. Requests are queued and sent without blocking (an agent that
 * stops reading never stops the sampler); the connection's end releases
 * everything, so a profiler killed with -9 holds nothing. An agent not
 * there, or gone, is tried again every second, and what lives held again.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define QUEUE_MAX (1u << 20)   /* bytes of requests not yet sent; more are dropped, counted */

static void lost(struct agent_hold *h);

#define RETRY_MS 1000            /* an agent not (or no longer) there is tried again this often */

struct agent_hold {
	int fd;
	char *path;
	uint64_t tried_ms;
	char *q;
	size_t len, cap;
	uint64_t asked, dropped;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int hold_connect(struct agent_hold *h)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int err;

	memcpy(sa.sun_path, h->path, strlen(h->path));
	h->tried_ms = mono_ms();
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (h->fd < 0)
		return -errno;
	if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(h->fd);
		h->fd = -1;
		return err;
	}
	return 0;
}

/*
 * The hold socket at @path: connected when the agent is there, else kept to
 * be tried again (perfmap_prof__agent_hold_retry()): a profiler started
 * before the agent, or one whose agent restarts, holds again once it is
 * back. 0, or -errno of the first try (the object is made all the same).
 */
int perfmap_prof__agent_hold_open(const char *path, struct agent_hold **out)
{
	struct sockaddr_un sa;
	struct agent_hold *h;

	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->path = strdup(path);
	if (!h->path) {
		free(h);
		return -ENOMEM;
	}
	*out = h;
	return hold_connect(h);
}

/* The agent closed its end (stopped, restarted): it sends nothing else on this socket. */
static bool hung_up(struct agent_hold *h)
{
	struct pollfd pfd = { .fd = h->fd, .events = POLLIN | POLLRDHUP };
	char c;

	if (poll(&pfd, 1, 0) <= 0)
		return false;
	return (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
	       recv(h->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool perfmap_prof__agent_hold_retry(struct agent_hold *h)
{
	if (!h || mono_ms() - h->tried_ms < RETRY_MS)
		return false;
	if (h->fd >= 0) {
		h->tried_ms = mono_ms();
		if (!hung_up(h))
			return false;
		lost(h);
	}
	/* What was queued was for the agent that went: the caller asks again for what lives. */
	h->len = 0;
	return hold_connect(h) == 0;
}

void perfmap_prof__agent_hold_free(struct agent_hold *h)
{
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	free(h->path);
	free(h->q);
	free(h);
}

/* The agent went away: nothing more is held or sent until it is back (retry). */
static void lost(struct agent_hold *h)
{
	close(h->fd);
	h->fd = -1;
	h->len = 0;
}

void perfmap_prof__agent_hold_flush(struct agent_hold *h)
{
	size_t off = 0;
	ssize_t n;

	if (!h || h->fd < 0)
		return;
	while (off < h->len) {
		n = send(h->fd, h->q + off, h->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			lost(h);
			return;
		}
		off += (size_t)n;
	}
	memmove(h->q, h->q + off, h->len - off);
	h->len -= off;
}

static void say(struct agent_hold *h, const char *verb, pid_t pid, uint64_t start_ticks)
{
	char line[64];
	int n;

	if (!h || h->fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%s %d %llu\n", verb, (int)pid,
		     (unsigned long long)start_ticks);
	if (h->len + (size_t)n > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 4096;
		char *q;

		if (cap > QUEUE_MAX || !(q = realloc(h->q, cap))) {
			h->dropped++;
			return;
		}
		h->q = q;
		h->cap = cap;
	}
	memcpy(h->q + h->len, line, (size_t)n);
	h->len += (size_t)n;
	if (verb[0] == 'h')
		h->asked++;
	/* Most requests go at once: the queue stays short. */
	if (h->len >= 4096)
		perfmap_prof__agent_hold_flush(h);
}

void perfmap_prof__agent_hold_add(struct agent_hold *h, pid_t pid, uint64_t start_ticks)
{
	say(h, "hold", pid, start_ticks);
}

void perfmap_prof__agent_hold_release(struct agent_hold *h, pid_t pid, uint64_t start_ticks)
{
	say(h, "release", pid, start_ticks);
}

void perfmap_prof__agent_hold_stats(const struct agent_hold *h, uint64_t *asked, uint64_t *dropped,
				    bool *connected)
{
	*asked = h ? h->asked : 0;
	*dropped = h ? h->dropped : 0;
	*connected = h && h->fd >= 0;
}

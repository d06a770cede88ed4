/*
 * The hold socket: a line protocol, one request a line, no answers.
 *
 *	hold PID START_TICKS      keep (PID, START_TICKS)'s map at its path
 *	release PID START_TICKS   that hold is over
 *
 * START_TICKS is /proc/PID/stat field 22: a hold names a process, not a
 * pid. Closing the connection releases what it still holds, so a profiler
 * killed with -9 holds nothing. The socket is made 0600 and every peer is
 * checked to be root: a hold keeps maps at their paths past the retention,
 * which only the agent's owner may ask. Bounded work: HOLDERS_MAX
 * connections, a line at most LINE_MAX bytes (longer: closed), READ_MAX
 * bytes read per connection a round, TICK_ROUNDS rounds a tick, HELD_MAX
 * processes in all (policy).
 *
 * Nothing here wakes the agent: the socket is read at its tick and before
 * each retry (holds__tick()), right before the retention is looked at, the
 * one decision a hold changes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "in/holds.h"
#include "lib/log.h"
#include "policy/policy.h"

#define LINE_MAX_ 64
#define READ_MAX 65536
/*
 * Rounds of accepting and reading in one holds__tick(): a connection
 * accepted in a round is read in the next, and a holder with more than
 * READ_MAX waiting is read on. 1 MiB a holder a tick, as much as a
 * profiler queues.
 */
#define TICK_ROUNDS 16

struct hold_ref {
	pid_t pid;
	uint64_t start_ticks;
};

struct holder {
	int fd;                    /* -1: a free slot */
	char line[LINE_MAX_];
	size_t len;
	struct hold_ref *v;        /* what it holds, to release at its close */
	size_t n, cap;
};

struct holds {
	struct policy *policy;     /* NULL until holds__attach(): nothing is read before */
	int sock_fd, epfd;
	bool paused;               /* out of fds: not accepting until the next tick */
	struct holder c[HOLDERS_MAX];
	struct holds_stats stats;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static int listen_at(struct holds *h, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old_mask;
	int err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(h->path, sizeof(h->path), "%s", path);
	memcpy(sa.sun_path, h->path, sizeof(sa.sun_path));
	h->sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (h->sock_fd < 0)
		return -errno;
	/* The caller holds the map directory's lock: a socket left here is a dead agent's. */
	unlink(h->path);
	old_mask = umask(0177);
	err = bind(h->sock_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (err || listen(h->sock_fd, HOLDERS_MAX))
		return -errno;
	return 0;
}

static int watch(struct holds *h, int fd, uint32_t slot)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = slot };

	return epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

struct holds *holds__open(const char *path)
{
	struct holds *h = calloc(1, sizeof(*h));
	int err;

	if (!h)
		return NULL;
	h->sock_fd = -1;
	for (int i = 0; i < HOLDERS_MAX; i++)
		h->c[i].fd = -1;
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	err = h->epfd < 0 ? -errno : listen_at(h, path);
	err = err ?: watch(h, h->sock_fd, HOLDERS_MAX);
	if (err) {
		pr_err("hold socket %s: %s", path, strerror(-err));
		holds__free(h);
		errno = -err;
		return NULL;
	}
	return h;
}

/* Its holds released, its slot free. */
static void holder_close(struct holds *h, struct holder *c)
{
	for (size_t i = 0; i < c->n; i++)
		policy__release(h->policy, c->v[i].pid, c->v[i].start_ticks);
	free(c->v);
	close(c->fd);  /* out of the epoll set with it */
	*c = (struct holder){ .fd = -1 };
	h->stats.holders--;
}

void holds__free(struct holds *h)
{
	if (!h)
		return;
	for (int i = 0; i < HOLDERS_MAX; i++)
		if (h->c[i].fd >= 0)
			holder_close(h, &h->c[i]);
	if (h->sock_fd >= 0) {
		unlink(h->path);
		close(h->sock_fd);
	}
	if (h->epfd >= 0)
		close(h->epfd);
	free(h);
}

void holds__attach(struct holds *h, struct policy *p)
{
	h->policy = p;
}

void holds__stats(const struct holds *h, struct holds_stats *st)
{
	*st = h->stats;
}

static bool peer_is_root(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) && cr.uid == 0;
}

static void on_accept(struct holds *h)
{
	int fd = accept4(h->sock_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), i;

	if (fd < 0) {
		/* Out of fds or memory: the connection stays queued, and would be tried again at once, forever. */
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED &&
		    !epoll_ctl(h->epfd, EPOLL_CTL_DEL, h->sock_fd, NULL))
			h->paused = true;
		return;
	}
	for (i = 0; i < HOLDERS_MAX && h->c[i].fd >= 0; i++)
		;
	if (i == HOLDERS_MAX || !peer_is_root(fd) || watch(h, fd, (uint32_t)i)) {
		/* Closed at once: the holder sees the end of its connection, and holds nothing. */
		h->stats.holders_refused++;
		pr_warn("hold %s: a connection refused: %s", h->path,
			i == HOLDERS_MAX ? "HOLDERS_MAX holders connected already" : "not root's, or no fd");
		close(fd);
		return;
	}
	h->c[i].fd = fd;
	h->stats.holders++;
}

/* One request; false: not one, and the holder is closed. */
static bool request(struct holds *h, struct holder *c, const char *line)
{
	struct hold_ref r, *v;
	char verb[8], end;
	long long pid;
	unsigned long long ticks;

	if (sscanf(line, "%7s %lld %llu%c", verb, &pid, &ticks, &end) != 3 || pid <= 0 ||
	    pid > 0x3fffffff)
		return false;
	r = (struct hold_ref){ (pid_t)pid, ticks };
	if (!strcmp(verb, "release")) {
		for (size_t i = 0; i < c->n; i++) {
			if (c->v[i].pid == r.pid && c->v[i].start_ticks == r.start_ticks) {
				policy__release(h->policy, r.pid, r.start_ticks);
				c->v[i] = c->v[--c->n];
				break;
			}
		}
		return true;
	}
	if (strcmp(verb, "hold"))
		return false;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;

		if (cap > HELD_MAX)
			return true;  /* as many as the policy takes from all: this one is refused there too */
		v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return true;
		c->v = v;
		c->cap = cap;
	}
	if (!policy__hold(h->policy, r.pid, r.start_ticks))
		c->v[c->n++] = r;
	return true;
}

/* What @c sent: whole lines handled, a part line kept; false when it is to be closed. */
static bool on_data(struct holds *h, struct holder *c)
{
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	while (total < READ_MAX) {
		n = read(c->fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return false;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return true;  /* all read */
		total += (size_t)n;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (c->len == sizeof(c->line) - 1) {
					h->stats.bad_requests++;
					return false;  /* no request is this long */
				}
				c->line[c->len++] = buf[i];
				continue;
			}
			c->line[c->len] = '\0';
			c->len = 0;
			if (!request(h, c, c->line)) {
				h->stats.bad_requests++;
				return false;
			}
		}
	}
	return true;  /* more waits: the next round reads it */
}

void holds__tick(struct holds *h)
{
	struct epoll_event evs[HOLDERS_MAX + 1];
	int n;

	if (h->paused && !watch(h, h->sock_fd, HOLDERS_MAX))
		h->paused = false;
	for (int round = 0; round < TICK_ROUNDS; round++) {
		n = epoll_wait(h->epfd, evs, HOLDERS_MAX + 1, 0);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			uint32_t slot = evs[i].data.u32;
			struct holder *c;

			if (slot == HOLDERS_MAX) {
				on_accept(h);
				continue;
			}
			c = &h->c[slot];
			if (c->fd >= 0 && h->policy && !on_data(h, c))
				holder_close(h, c);
		}
	}
}

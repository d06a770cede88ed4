/*
 * The metrics endpoint's connections: whose each is, whether it may stay,
 * and its deadline. The HTTP library's thread opens and closes them; a
 * thread of this file's shuts down those past their deadlines. Both take
 * t->lock, for O(CONNS_MAX) work and one shutdown() at most: the event loop,
 * which reads the counts at its tick, waits no longer than that.
 *
 * Why the peer's uid: a local user can take any number of loopback
 * addresses (127/8), so counting by address bounds nothing for them; the
 * owner of a socket is what the kernel knows and nobody forges. A peer
 * that closes its socket hands it to the kernel (an orphan, then a
 * time-wait socket: no inode, and the latter's owner reads as root): it is
 * refused, it cannot read an answer anyway.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "report/metrics_conns.h"

struct metrics_conn {
	struct conn_peer peer;
	int fd;                    /* the library's: shut down here, never closed */
	uint64_t deadline_ns;      /* CLOCK_MONOTONIC */
	bool used, answering, expired;
};

struct metrics_conns {
	pthread_mutex_t lock;
	pthread_cond_t wake;       /* a deadline earlier than the reaper's next look, or stop */
	pthread_t reaper;
	bool stop;
	int diag_fd;               /* the HTTP library's thread's alone: no lock */
	uint32_t seq;
	uint64_t request_ns, answer_ns;
	uid_t (*owner_of)(uid_t uid);
	uint64_t next_ns;          /* when the reaper looks next; UINT64_MAX: when woken */
	struct metrics_conn slot[CONNS_MAX];
	struct metrics_conns_stats stats;
};

static const char *const class_names[CONN__COUNT] = {
	[CONN_ROOT] = "root", [CONN_SYSTEM] = "system", [CONN_USER] = "user",
	[CONN_REMOTE] = "remote",
};

/* The slots of each kind, and how many one uid or one address may hold of them. */
static const unsigned int class_max[CONN__COUNT] = {
	[CONN_ROOT] = CONNS_ROOT, [CONN_SYSTEM] = CONNS_SYSTEM, [CONN_USER] = CONNS_USER,
	[CONN_REMOTE] = CONNS_REMOTE,
};
static const unsigned int share_max[CONN__COUNT] = {
	[CONN_ROOT] = CONNS_ROOT, [CONN_SYSTEM] = CONNS_PER_UID, [CONN_USER] = CONNS_PER_UID,
	[CONN_REMOTE] = CONNS_PER_ADDR,
};

const char *conn_class_name(enum conn_class class)
{
	return class < CONN__COUNT ? class_names[class] : "?";
}

/* ---- pure: the decisions ---- */

static bool is_v4_mapped(const struct in6_addr *a)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->s6_addr, prefix, sizeof(prefix));
}

static bool is_loopback(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return ((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr)[0] == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) || (is_v4_mapped(a6) && a6->s6_addr[12] == 127);
}

/* An address as a remote peer is counted: IPv4 as ::ffff:a.b.c.d, IPv6 by its /64. */
static void addr_key(uint8_t key[16], const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	memset(key, 0, 16);
	if (sa->sa_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return;
	}
	if (sa->sa_family != AF_INET6)
		return;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	/* One host owns a /64 (SLAAC, privacy addresses): counted as one. */
	memcpy(key, a6->s6_addr, is_v4_mapped(a6) ? 16 : 8);
}

int conn_classify(struct conn_peer *p, const struct sockaddr *sa, int diag_err,
		  const struct conn_diag *diag)
{
	memset(p, 0, sizeof(*p));
	if (!diag_err) {
		/* Closed by its process: the kernel's now, its owner may read as root. */
		if (!diag->inode)
			return -ENOTCONN;
		p->uid = p->owner = diag->uid;
		p->class = !diag->uid ? CONN_ROOT :
			   diag->uid < CONNS_SYSTEM_UID_END ? CONN_SYSTEM : CONN_USER;
		return 0;
	}
	/* On loopback the peer's socket is in this namespace: not found, it is gone. */
	if (is_loopback(sa))
		return -ENOTCONN;
	p->class = CONN_REMOTE;
	addr_key(p->addr, sa);
	return 0;
}

static bool same_peer(const struct conn_peer *a, const struct conn_peer *b)
{
	if (a->class != b->class)
		return false;
	if (a->class == CONN_REMOTE)
		return !memcmp(a->addr, b->addr, sizeof(a->addr));
	return a->owner == b->owner;
}

enum conn_verdict conn_admit(const struct conn_peer *open, size_t n, const struct conn_peer *p)
{
	unsigned int in_class = 0, same = 0;

	if (p->class >= CONN__COUNT)
		return CONN_CLASS_FULL;
	for (size_t i = 0; i < n; i++) {
		in_class += open[i].class == p->class;
		same += same_peer(&open[i], p);
	}
	if (in_class >= class_max[p->class])
		return CONN_CLASS_FULL;
	if (same >= share_max[p->class])
		return CONN_SHARE_FULL;
	return CONN_ADMIT;
}

int conn_diag_parse(const void *buf, size_t len, uint32_t seq, struct conn_diag *out)
{
	const uint8_t *p = buf, *end = p + len;

	while ((size_t)(end - p) >= sizeof(struct nlmsghdr)) {
		const struct nlmsghdr *h = (const struct nlmsghdr *)p;
		size_t step = NLMSG_ALIGN(h->nlmsg_len);

		if (h->nlmsg_len < sizeof(*h) || h->nlmsg_len > (size_t)(end - p))
			return -EBADMSG;
		if (h->nlmsg_seq != seq)
			goto next;
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EBADMSG;
			/* An error of 0 is an acknowledgement: no socket was reported. */
			return e->error ? (e->error < 0 ? e->error : -e->error) : -ENOENT;
		}
		if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
				return -EBADMSG;
			*out = (struct conn_diag){
				.uid = m->idiag_uid, .inode = m->idiag_inode, .state = m->idiag_state,
			};
			return 0;
		}
		if (h->nlmsg_type == NLMSG_DONE)
			return -ENOENT;
next:
		if (step >= (size_t)(end - p))
			break;
		p += step;
	}
	return -EAGAIN;
}

/* ---- the kernel: whose is the peer's socket ---- */

static void diag_endpoint(struct inet_diag_req_v2 *r, bool peer, const struct sockaddr_storage *ss)
{
	__be16 *port = peer ? &r->id.idiag_sport : &r->id.idiag_dport;
	__be32 *addr = peer ? r->id.idiag_src : r->id.idiag_dst;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		*port = in->sin_port;
		memcpy(addr, &in->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		*port = in6->sin6_port;
		memcpy(addr, &in6->sin6_addr, 16);
		if (!peer)
			r->id.idiag_if = in6->sin6_scope_id;
	}
}

/*
 * The peer's socket is the one whose own address is our peer's and whose
 * peer is our own address: the kernel looks it up by that 4-tuple, in this
 * network namespace only. The answer is made while sendto() runs.
 */
static int diag_lookup(struct metrics_conns *t, const struct sockaddr_storage *local,
		       const struct sockaddr_storage *peer, struct conn_diag *out)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = {
			.nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = ++t->seq,
		},
		.r = {
			.sdiag_family = (uint8_t)peer->ss_family, .sdiag_protocol = IPPROTO_TCP,
			.idiag_states = ~0u,
			.id.idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE },
		},
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	/* Aligned for the headers read from it. */
	uint32_t buf[2048];
	ssize_t n;
	int err;

	diag_endpoint(&req.r, true, peer);
	diag_endpoint(&req.r, false, local);
	if (sendto(t->diag_fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0)
		return -errno;
	/* Answers to earlier requests, if any were left, are read past. */
	do {
		n = recv(t->diag_fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		err = conn_diag_parse(buf, (size_t)n, t->seq, out);
	} while (err == -EAGAIN);
	return err;
}

/* ---- the table and its reaper ---- */

/* "root uid 0", "user uid 100005 (of 1000)", "remote ::ffff:10.0.0.5": for debug lines. */
static const char *peer_name(const struct conn_peer *p, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";

	if (p->class == CONN_REMOTE) {
		inet_ntop(AF_INET6, p->addr, addr, sizeof(addr));
		snprintf(buf, len, "remote %s", addr);
	} else if (p->owner != p->uid) {
		snprintf(buf, len, "%s uid %u (of %u)", conn_class_name(p->class),
			 (unsigned int)p->uid, (unsigned int)p->owner);
	} else {
		snprintf(buf, len, "%s uid %u", conn_class_name(p->class), (unsigned int)p->uid);
	}
	return buf;
}

/* Under t->lock: the reaper looks again by @deadline_ns. */
static void wake_by(struct metrics_conns *t, uint64_t deadline_ns)
{
	if (deadline_ns < t->next_ns)
		pthread_cond_signal(&t->wake);
}

/* Under t->lock: the library sees the end of the stream, and closes it. */
static void expire(struct metrics_conns *t, struct metrics_conn *c)
{
	c->expired = true;
	shutdown(c->fd, SHUT_RDWR);
	if (c->answering)
		t->stats.expired_answer++;
	else
		t->stats.expired_request++;
}

/* Not under t->lock: a log line may wait for stderr's reader. */
static void say_expired(const struct metrics_conn *c, size_t n)
{
	char name[64];

	for (size_t i = 0; i < n; i++)
		pr_debug("metrics: closed a connection of %s: %s",
			 peer_name(&c[i].peer, name, sizeof(name)),
			 c[i].answering ? "its answer was not read in time" :
			 "no whole request in time");
}

static void *reaper_main(void *arg)
{
	struct metrics_conns *t = arg;
	struct metrics_conn said[CONNS_MAX];
	struct timespec ts;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		uint64_t now = clock_mono_ns(), next = UINT64_MAX;
		size_t n_said = 0;

		for (size_t i = 0; i < CONNS_MAX; i++) {
			struct metrics_conn *c = &t->slot[i];

			if (!c->used || c->expired)
				continue;
			if (c->deadline_ns <= now) {
				expire(t, c);
				said[n_said++] = *c;
			} else if (c->deadline_ns < next) {
				next = c->deadline_ns;
			}
		}
		if (n_said) {
			pthread_mutex_unlock(&t->lock);
			say_expired(said, n_said);
			pthread_mutex_lock(&t->lock);
			continue;
		}
		t->next_ns = next;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&t->wake, &t->lock);
			continue;
		}
		ts.tv_sec = (time_t)(next / 1000000000);
		ts.tv_nsec = (long)(next % 1000000000);
		pthread_cond_timedwait(&t->wake, &t->lock, &ts);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

struct metrics_conns *metrics_conns__new(uint32_t request_ms, uint32_t answer_ms,
					 uid_t (*owner_of)(uid_t uid))
{
	struct metrics_conns *t;
	pthread_condattr_t ca;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->request_ns = (uint64_t)request_ms * 1000000;
	t->answer_ns = (uint64_t)answer_ms * 1000000;
	t->owner_of = owner_of;
	t->next_ns = UINT64_MAX;
	pthread_mutex_init(&t->lock, NULL);
	/* Deadlines are on the monotonic clock, and so are the reaper's waits. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	t->diag_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (t->diag_fd < 0) {
		err = errno;
		goto free_t;
	}
	err = pthread_create(&t->reaper, NULL, reaper_main, t);
	if (err)
		goto close_diag;
	return t;
close_diag:
	close(t->diag_fd);
free_t:
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
	errno = err;
	return NULL;
}

void metrics_conns__free(struct metrics_conns *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->reaper, NULL);
	close(t->diag_fd);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The peer of @fd, as conn_classify() has it. */
static int peer_of(struct metrics_conns *t, int fd, struct conn_peer *p)
{
	struct sockaddr_storage local, peer;
	socklen_t llen = sizeof(local), plen = sizeof(peer);
	struct conn_diag diag = { 0 };
	int err;

	if (getsockname(fd, (struct sockaddr *)&local, &llen) ||
	    getpeername(fd, (struct sockaddr *)&peer, &plen))
		return -ENOTCONN;
	if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	err = diag_lookup(t, &local, &peer, &diag);
	if (err && err != -ENOENT)
		pr_debug("metrics: cannot ask the kernel whose a connection is: %s", strerror(-err));
	return conn_classify(p, (struct sockaddr *)&peer, err, &diag);
}

struct metrics_conn *metrics_conns__open(struct metrics_conns *t, int fd)
{
	struct conn_peer open[CONNS_MAX], p;
	struct metrics_conn *free_slot = NULL;
	char name[64];
	enum conn_verdict v;
	size_t n = 0;
	int err;

	/* The kernel is asked before the lock: the reaper and the loop never wait for it. */
	err = peer_of(t, fd, &p);
	/* A subordinate uid counts as its user; its kind stays its own (a user's). */
	if (!err && p.class != CONN_REMOTE && t->owner_of)
		p.owner = t->owner_of(p.uid);
	pthread_mutex_lock(&t->lock);
	if (err) {
		t->stats.refused_gone++;
		goto unlock;
	}
	for (size_t i = 0; i < CONNS_MAX; i++) {
		if (t->slot[i].used)
			open[n++] = t->slot[i].peer;
		else if (!free_slot)
			free_slot = &t->slot[i];
	}
	v = conn_admit(open, n, &p);
	if (v != CONN_ADMIT || !free_slot) {
		t->stats.refused[p.class]++;
		pthread_mutex_unlock(&t->lock);
		pr_debug("metrics: refused a connection of %s: %s", peer_name(&p, name, sizeof(name)),
			 v == CONN_SHARE_FULL ? "its share of the slots is taken" :
			 "the slots of its kind are taken");
		goto shut;
	}
	*free_slot = (struct metrics_conn){
		.peer = p, .fd = fd, .used = true,
		.deadline_ns = clock_mono_ns() + t->request_ns,
	};
	t->stats.open[p.class]++;
	wake_by(t, free_slot->deadline_ns);
	pthread_mutex_unlock(&t->lock);
	return free_slot;
unlock:
	pthread_mutex_unlock(&t->lock);
shut:
	/* The library reads the end of the stream and closes it. */
	shutdown(fd, SHUT_RDWR);
	return NULL;
}

void metrics_conns__answering(struct metrics_conns *t, struct metrics_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&t->lock);
	if (!c->answering && !c->expired) {
		c->answering = true;
		c->deadline_ns = clock_mono_ns() + t->answer_ns;
		wake_by(t, c->deadline_ns);
	}
	pthread_mutex_unlock(&t->lock);
}

void metrics_conns__close(struct metrics_conns *t, struct metrics_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&t->lock);
	t->stats.open[c->peer.class]--;
	/* Free: the reaper never touches its fd again, which the library closes next. */
	*c = (struct metrics_conn){ .fd = -1 };
	pthread_mutex_unlock(&t->lock);
}

void metrics_conns__stats(struct metrics_conns *t, struct metrics_conns_stats *st)
{
	pthread_mutex_lock(&t->lock);
	*st = t->stats;
	pthread_mutex_unlock(&t->lock);
}

/*
 * Who holds the metrics endpoint's connections, and for how long. Each
 * connection is counted against the uid that owns the peer's socket, which
 * the kernel tells for a peer in the agent's network namespace
 * (NETLINK_SOCK_DIAG), or against the peer's address when the peer is
 * elsewhere (a pod network, another host). Each kind of peer has slots of
 * its own: no number of other uids' connections takes root's. A connection
 * has CONN_REQUEST_MS from its accept to send a whole request, however it
 * trickles bytes, then CONN_ANSWER_MS to read the answer; at its deadline it
 * is shut down, and the HTTP library closes it.
 */
#ifndef PERFMAPD_METRICS_CONNS_H
#define PERFMAPD_METRICS_CONNS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/*
 * The slots. Root's are root's alone. System uids (below 1000) run services
 * such as a Prometheus of its own user; a user cannot act as one, not even
 * through a user namespace (the ranges of /etc/subuid start at 100000 by
 * default). Users' uids, nobody and subordinate uids share CONNS_USER, 2 an
 * owner: a uid with the subordinate uids of its ranges (the owner_of given
 * to metrics_conns__new()), so that a range of 65,536 uids counts as its
 * user. Peers whose uid is not known share CONNS_REMOTE, CONNS_PER_ADDR an
 * address (an IPv6 one by its /64).
 */
#define CONNS_ROOT 4
#define CONNS_SYSTEM 4
#define CONNS_USER 8
#define CONNS_REMOTE 8
#define CONNS_PER_UID 2
#define CONNS_PER_ADDR 4
#define CONNS_MAX (CONNS_ROOT + CONNS_SYSTEM + CONNS_USER + CONNS_REMOTE)
#define CONNS_SYSTEM_UID_END 1000
#define CONN_REQUEST_MS 3000   /* from the accept to the request's last header line */
#define CONN_ANSWER_MS 5000    /* from there to the answer's last byte handed to the kernel */

enum conn_class {
	CONN_ROOT,
	CONN_SYSTEM,
	CONN_USER,
	CONN_REMOTE,
	CONN__COUNT,
};

struct conn_peer {
	enum conn_class class;
	uint32_t uid;              /* ROOT, SYSTEM, USER: the owner of the peer's socket */
	uint32_t owner;            /* what its share is counted by: @uid, or its range's user */
	uint8_t addr[16];          /* REMOTE: ::ffff:a.b.c.d, or an IPv6 address's /64 */
};

/* What the kernel says of the peer's socket (inet_diag_msg). */
struct conn_diag {
	uint32_t uid;              /* in the agent's user namespace; 65534 when unmapped */
	uint32_t inode;            /* 0: no process holds it any more (closed) */
	uint8_t state;             /* TCP_ESTABLISHED, ... */
};

enum conn_verdict {
	CONN_ADMIT,
	CONN_CLASS_FULL,           /* the slots of its kind are all taken */
	CONN_SHARE_FULL,           /* its owner's, or its address's, share is taken */
};

/* "root", "system", "user", "remote": the label values of the metrics. */
const char *conn_class_name(enum conn_class class);

/*
 * @p from the peer's address @sa and the kernel's answer about its socket:
 * @diag_err 0 with @diag, or the lookup's negative errno (-ENOENT: no such
 * socket in this network namespace). 0; -ENOTCONN when the peer is gone:
 * its socket closed, or a loopback peer the kernel does not know (only a
 * socket of this network namespace can be one).
 */
int conn_classify(struct conn_peer *p, const struct sockaddr *sa, int diag_err,
		  const struct conn_diag *diag);

/* May @p have one more connection beside the @n admitted ones in @open? */
enum conn_verdict conn_admit(const struct conn_peer *open, size_t n, const struct conn_peer *p);

/*
 * The answer to request @seq in @len bytes of netlink messages at @buf: 0
 * with @out; the kernel's negative errno; -EAGAIN when no message answers
 * @seq (an earlier request's, read late).
 */
int conn_diag_parse(const void *buf, size_t len, uint32_t seq, struct conn_diag *out);

struct metrics_conns_stats {
	uint64_t open[CONN__COUNT];       /* admitted and not yet closed */
	uint64_t refused[CONN__COUNT];    /* at its accept: over its kind's slots or its share */
	uint64_t refused_gone;            /* the peer had closed its end, or could not be found */
	uint64_t expired_request;         /* no whole request within the request deadline */
	uint64_t expired_answer;          /* its answer not read within the answer deadline */
};

struct metrics_conn;
struct metrics_conns;

/*
 * The table of connections, its lookups (a NETLINK_SOCK_DIAG socket) and
 * the thread that shuts down connections past their deadlines. @owner_of
 * (NULL: each uid its own) says whose share a uid's connections count
 * against; it is called from the HTTP thread. NULL and errno when it
 * cannot be made.
 */
struct metrics_conns *metrics_conns__new(uint32_t request_ms, uint32_t answer_ms,
					 uid_t (*owner_of)(uid_t uid));
/* Stops the thread. Every connection must have been closed (metrics_conns__close()). */
void metrics_conns__free(struct metrics_conns *t);
/*
 * A connection just accepted on @fd (the HTTP library's, which closes it):
 * its slot, or NULL when it is refused, @fd then shut down. Not under a
 * lock of the caller's: it asks the kernel.
 */
struct metrics_conn *metrics_conns__open(struct metrics_conns *t, int fd);
/* Its request is whole: the answer's deadline from now on. */
void metrics_conns__answering(struct metrics_conns *t, struct metrics_conn *c);
/* The library closes its fd after this returns; NULL is fine. */
void metrics_conns__close(struct metrics_conns *t, struct metrics_conn *c);
void metrics_conns__stats(struct metrics_conns *t, struct metrics_conns_stats *st);

#endif /* PERFMAPD_METRICS_CONNS_H */

/*
 * The metrics endpoint. libmicrohttpd (Debian's, maintained) parses HTTP in
 * a thread of its own; metrics_conn.c says at each accept whose the
 * connection is and whether it may stay (root's slots are root's alone),
 * and closes it at its deadline however it trickles bytes: a client that
 * never reads, or a flood of connections from any number of uids, holds
 * that thread's slots of its own kind, never root's, nor the event loop.
 * One request a connection. The loop renders the text at its tick and swaps
 * it in under a mutex held for a pointer swap; a request copies the text
 * under the same mutex. Nothing else is shared.
 */
#include <dirent.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "report/metrics.h"
#include "report/metrics_conns.h"
#include "report/metrics_text.h"
#include "perfmap_tools.h"
#include "lib/subids.h"

#define METRICS_TEXT_MAX (64 * 1024)   /* some 10 KB today: room to grow */
/*
 * The library's own bound: the slots metrics_conn.c gives out, and room for
 * connections it refused, which the library closes at its next turn; it
 * accepts 10 a turn at most. Its bound by address is not used: on loopback
 * every local user would share root's 127.0.0.1, and take any other 127/8.
 */
#define CONNECTIONS_MAX (CONNS_MAX + 16)
#define CONNECTION_TIMEOUT_S 5         /* idle: the deadlines come first, this is a backstop */
#define PROCESS_EVERY_NS 1000000000ull /* process_*: /proc/self/fd is listed once a second at most */

struct metrics {
	struct MHD_Daemon *mhd;
	struct metrics_conns *conns;   /* whose the connections are, and their deadlines */
	pthread_mutex_t lock;
	char *text;                    /* published: read by requests under @lock */
	size_t len;
	char *next;                    /* the loop's own, rendered into, then swapped */
	char version[32];
	struct metrics_process proc;   /* last read, at most PROCESS_EVERY_NS ago */
	uint64_t proc_read_ns;         /* CLOCK_MONOTONIC; 0: never */
};

int metrics_parse_listen(const char *spec, struct sockaddr_storage *addr)
{
	const struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
	};
	struct addrinfo *res = NULL;
	char host[64];
	const char *colon = strrchr(spec, ':');
	const char *h = spec;
	size_t hlen;
	char *end;
	long port;
	int err = -EINVAL;

	if (!colon || !colon[1])
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return -EINVAL;
	hlen = (size_t)(colon - spec);
	/* [::1]:9848: the brackets keep the address's colons apart from the port's. */
	if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
		h = spec + 1;
		hlen -= 2;
	} else if (memchr(spec, ':', hlen)) {
		return -EINVAL;
	}
	if (!hlen || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &res) || !res)
		goto free_addrinfo;
	if (res->ai_addrlen > sizeof(*addr))
		goto free_addrinfo;
	memset(addr, 0, sizeof(*addr));
	memcpy(addr, res->ai_addr, res->ai_addrlen);
	err = 0;
free_addrinfo:
	if (res)
		freeaddrinfo(res);
	return err;
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int code, const char *text,
			       size_t len, const char *type)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* The HTTP library's thread: GET /metrics answers with the text last published. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **req)
{
	static const char plain[] = "text/plain; charset=utf-8";
	const union MHD_ConnectionInfo *info;
	struct metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)req;
	/* Refused at its accept, its request was already in: no answer, closed. */
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (!info || !info->socket_context)
		return MHD_NO;
	metrics_conns__answering(m->conns, info->socket_context);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", 19, plain);
	if (strcmp(url, "/metrics"))
		return respond(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n", 39,
			       plain);
	/* The copy is a memcpy of some kilobytes: the loop waits no longer than that to publish. */
	pthread_mutex_lock(&m->lock);
	r = MHD_create_response_from_buffer(m->len, m->text, MHD_RESPMEM_MUST_COPY);
	pthread_mutex_unlock(&m->lock);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	/*
	 * One request a connection: its whole life is then bounded by the two
	 * deadlines. A scrape comes every 15 s or so, long after the idle
	 * timeout, so a kept-alive connection was never used again anyway.
	 */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * The library's thread, at each accept and each close. The slot goes in the
 * connection's socket context; none: refused, and the library closes it.
 * The close comes before the library closes the fd: the reaper, which
 * shuts fds down under the same lock, never touches a closed or reused one.
 */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *info;
	struct metrics *m = cls;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		metrics_conns__close(m->conns, *socket_context);
		*socket_context = NULL;
		return;
	}
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	*socket_context = info ? metrics_conns__open(m->conns, info->connect_fd) : NULL;
}

/* The library's complaints (a connection refused at the limit, ...): a flood says them often. */
__attribute__((format(printf, 2, 0)))
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	pr_debug("metrics: %s", msg);
}

struct metrics *metrics__start(const char *spec)
{
	struct sockaddr_storage addr;
	struct metrics *m;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int err;

	err = metrics_parse_listen(spec, &addr);
	if (err) {
		errno = -err;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	snprintf(m->version, sizeof(m->version), "%d.%d", PERFMAP_VERSION_MAJOR,
		 PERFMAP_VERSION_MINOR);
	m->text = calloc(1, METRICS_TEXT_MAX);
	m->next = calloc(1, METRICS_TEXT_MAX);
	if (!m->text || !m->next) {
		errno = ENOMEM;
		goto free_metrics;
	}
	/* Per owner, as every per-uid bound of the agent's: a subordinate range counts as its user. */
	m->conns = metrics_conns__new(CONN_REQUEST_MS, CONN_ANSWER_MS, subids_owner);
	if (!m->conns)
		goto free_metrics;
	if (addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* epoll: the agent's fds go past FD_SETSIZE (raise_fd_limit()), where select() cannot look. */
	/* The logger first: the library says what comes before it on stderr, unbounded. */
	m->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m,
				  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONNECTIONS_MAX,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONNECTION_TIMEOUT_S,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
				  MHD_OPTION_END);
	if (!m->mhd) {
		/* The library says why only in its log; binding is what fails in practice. */
		errno = errno ?: EADDRNOTAVAIL;
		goto free_metrics;
	}
	return m;
free_metrics:
	err = errno;
	metrics__free(m);
	errno = err;
	return NULL;
}

/* utime and stime, vsize and rss of /proc/self/stat, by libperfmap's parser. */
static int read_self_stat(struct metrics_process *p)
{
	struct perfmap_proc_stat st;
	int err;

	err = perfmap__proc_stat_read_self(&st);
	if (err)
		return err;
	p->cpu_ticks = st.utime_ticks + st.stime_ticks;
	p->vm_bytes = st.vsize_bytes;
	p->rss_bytes = st.rss_pages * (uint64_t)sysconf(_SC_PAGESIZE);
	return 0;
}

static uint64_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n ? n - 1 : 0;  /* less the directory's own fd */
}

/* The process_* metrics, read again once a second at most: listing the fds costs one per fd. */
static void read_process(struct metrics *m, uint64_t now_ns, uint64_t uptime_s)
{
	struct metrics_process *p = &m->proc;
	struct rlimit rl;

	if (m->proc_read_ns && now_ns - m->proc_read_ns < PROCESS_EVERY_NS)
		return;
	m->proc_read_ns = now_ns;
	p->known = !read_self_stat(p);
	if (!p->known)
		return;
	p->ticks_per_s = (uint64_t)sysconf(_SC_CLK_TCK);
	p->open_fds = count_fds();
	p->max_fds = !getrlimit(RLIMIT_NOFILE, &rl) ? (uint64_t)rl.rlim_cur : 0;
	/* The wall clock when the agent started: now less the monotonic time since. */
	if (!p->start_time_s)
		p->start_time_s = (uint64_t)time(NULL) - uptime_s;
}

/* The endpoint's connections, from the table the HTTP thread keeps: a copy under its lock. */
static void gather_http(struct metrics *m, struct metrics_values *v)
{
	struct metrics_conns_stats st;

	metrics_conns__stats(m->conns, &st);
	for (int k = 0; k < CONN__COUNT; k++) {
		v->http_open[v->n_http_open++] = (struct metrics_reason){ conn_class_name(k), st.open[k] };
		v->http_refused[v->n_http_refused++] =
			(struct metrics_reason){ conn_class_name(k), st.refused[k] };
	}
	v->http_refused[v->n_http_refused++] = (struct metrics_reason){ "gone", st.refused_gone };
	v->http_expired_request = st.expired_request;
	v->http_expired_answer = st.expired_answer;
}

void metrics__update(struct metrics *m, struct metrics_values *v)
{
	size_t len;
	char *old;

	v->version = m->version;
	v->n_http_open = v->n_http_refused = 0;
	gather_http(m, v);
	read_process(m, clock_mono_ns(), v->v[PMC_uptime_s]);
	v->proc = m->proc;
	len = metrics_render(v, m->next, METRICS_TEXT_MAX);
	pthread_mutex_lock(&m->lock);
	old = m->text;
	m->text = m->next;
	m->len = len;
	pthread_mutex_unlock(&m->lock);
	m->next = old;
}

void metrics__free(struct metrics *m)
{
	if (!m)
		return;
	/* Joins the library's thread: no request reads the text after this, every connection is closed. */
	if (m->mhd)
		MHD_stop_daemon(m->mhd);
	metrics_conns__free(m->conns);
	pthread_mutex_destroy(&m->lock);
	free(m->text);
	free(m->next);
	free(m);
}

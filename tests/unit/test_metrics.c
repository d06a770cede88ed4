/*
 * metrics_text: the exposition is in Prometheus's text format: every family
 * has its HELP and TYPE, a histogram's buckets are cumulative and end in
 * +Inf with _count equal to it, label values are escaped, counters end in
 * _total, and a line that does not fit is left out whole, never cut.
 *
 * metrics_conn: the endpoint's connections. Which may stay (root's slots
 * are root's whatever other uids hold; a uid, an address, a kind of peer
 * hold their bounds; many uids fill users' slots only), what the kernel's
 * answer says of a peer, and, on real loopback sockets, that the kernel
 * names the peer's uid, a peer that closed its end is refused, and a
 * connection that trickles bytes is shut down at its deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "report/metrics_conns.h"
#include "report/metrics_text.h"
#include "testutil.h"

static char buf[65536];

static const struct metrics_values sample = {
	.version = "0.1", .bpf = "tp_btf", .exec_maps = "perf-mmap2",
	.v = {
		[PMC_events_fork] = 12, [PMC_events_exec] = 3, [PMC_events_exit] = 9,
		[PMC_copies_created] = 5, [PMC_copy_bytes] = 4096,
		[PMC_ambiguous_kept] = 4, [PMC_mirror_lag_p99_ms] = 250,
		[PMC_retention_s] = 600, [PMC_copies_queue_full] = 7,
		[PMC_refused_symlink] = 2, [PMC_refused_sparse] = 1,
		[PMC_orphan_traps] = 3,
	},
	/* 0.3 ms, 0.7 ms twice, 3 ms, 2 s */
	.copy_latency = { 1, 2, 0, 1, 0, 0, 0, 0, 0, 0, 1 },
	.copy_latency_sum_ns = 2004700000,
	.proc = { .known = true, .cpu_ticks = 250, .ticks_per_s = 100, .rss_bytes = 8 << 20,
		  .open_fds = 12, .max_fds = 65536, .start_time_s = 1790000000 },
	.http_open = { { "root", 1 }, { "user", 2 } }, .n_http_open = 2,
	.http_refused = { { "user", 6390 }, { "gone", 3 } }, .n_http_refused = 2,
	.http_expired_request = 14, .http_expired_answer = 1,
};

static void test_every_family_has_help_and_type(void **state)
{
	char name[128], type[32], want[256];
	const char *p;
	size_t families = 0;

	(void)state;
	metrics_render(&sample, buf, sizeof(buf));
	for (p = buf; (p = strstr(p, "# TYPE ")); p++) {
		assert_int_equal(sscanf(p, "# TYPE %127s %31s", name, type), 2);
		/* The agent's own, or the process metrics every client library names alike. */
		assert_true(!strncmp(name, "perfmapd_", 9) || !strncmp(name, "process_", 8));
		snprintf(want, sizeof(want), "# HELP %s ", name);
		assert_non_null(strstr(buf, want));
		/* Counters, and only they, end in _total. */
		if (!strcmp(type, "counter"))
			assert_string_equal(name + strlen(name) - 6, "_total");
		else
			assert_null(strstr(name, "_total"));
		families++;
	}
	assert_true(families > 25);
	assert_true(tu_has_line(buf, "perfmapd_build_info{version=\"0.1\",bpf=\"tp_btf\",exec_maps=\"perf-mmap2\"} 1"));
	assert_true(tu_has_line(buf, "perfmapd_events_total{kind=\"fork\"} 12"));
	assert_true(tu_has_line(buf, "perfmapd_decisions_total{kind=\"ambiguous_kept\"} 4"));
	assert_true(tu_has_line(buf, "perfmapd_mirror_lag_p99_seconds 0.25"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_bytes_total 4096"));
	assert_true(tu_has_line(buf, "perfmapd_retention_seconds 600"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copies_put_off_total{reason=\"queue_full\"} 7"));
	assert_true(tu_has_line(buf, "perfmapd_container_maps_refused_total{reason=\"symlink\"} 2"));
	assert_true(tu_has_line(buf, "perfmapd_container_maps_refused_total{reason=\"sparse\"} 1"));
	assert_true(tu_has_line(buf, "perfmapd_host_maps_refused_total{reason=\"trap\"} 3"));
	assert_true(tu_has_line(buf, "process_cpu_seconds_total 2.5"));
	assert_true(tu_has_line(buf, "process_resident_memory_bytes 8388608"));
	assert_true(tu_has_line(buf, "process_open_fds 12"));
	assert_true(tu_has_line(buf, "process_start_time_seconds 1790000000"));
	assert_true(tu_has_line(buf, "perfmapd_http_connections{peer=\"user\"} 2"));
	assert_true(tu_has_line(buf, "perfmapd_http_connections_refused_total{peer=\"user\"} 6390"));
	assert_true(tu_has_line(buf, "perfmapd_http_connections_refused_total{peer=\"gone\"} 3"));
	assert_true(tu_has_line(buf, "perfmapd_http_connections_expired_total{phase=\"request\"} 14"));
	assert_true(tu_has_line(buf, "perfmapd_http_connections_expired_total{phase=\"answer\"} 1"));
	/* No pid in any label. */
	assert_null(strstr(buf, "pid="));
}

static void test_histogram_buckets_are_cumulative(void **state)
{
	(void)state;
	metrics_render(&sample, buf, sizeof(buf));
	assert_true(tu_has_line(buf, "# TYPE perfmapd_fork_copy_seconds histogram"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.0005\"} 1"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.001\"} 3"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.0025\"} 3"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.005\"} 4"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"1\"} 4"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"+Inf\"} 5"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_count 5"));
	assert_true(tu_has_line(buf, "perfmapd_fork_copy_seconds_sum 2.0047"));
}

/* Without /proc/self, no process_* family at all: a 0 there would read as a real value. */
static void test_process_metrics_only_when_read(void **state)
{
	struct metrics_values v = sample;

	(void)state;
	v.proc.known = false;
	metrics_render(&v, buf, sizeof(buf));
	assert_null(strstr(buf, "process_"));
	assert_non_null(strstr(buf, "perfmapd_build_info"));
}

static void test_label_values_are_escaped(void **state)
{
	struct metrics_text m;

	(void)state;
	metrics_text__init(&m, buf, sizeof(buf));
	metrics_text__sample(&m, "perfmapd_x_total", "kind", "a\"b\\c\nd", 7);
	assert_string_equal(buf, "perfmapd_x_total{kind=\"a\\\"b\\\\c\\nd\"} 7\n");
	assert_false(m.cut);
}

static void test_a_line_that_does_not_fit_is_left_out_whole(void **state)
{
	struct metrics_text m;
	char small[48];

	(void)state;
	metrics_text__init(&m, small, sizeof(small));
	metrics_text__sample(&m, "perfmapd_a_total", NULL, NULL, 1);
	metrics_text__sample(&m, "perfmapd_much_longer_name_total", NULL, NULL, 123456789);
	assert_string_equal(small, "perfmapd_a_total 1\n");
	assert_true(m.cut);
	assert_int_equal(m.len, strlen(small));
}

static void test_the_whole_text_fits_its_buffer(void **state)
{
	size_t len;

	(void)state;
	len = metrics_render(&sample, buf, sizeof(buf));
	assert_int_equal(len, strlen(buf));
	/* metrics.c renders into 64 KiB: a fourth of it is the margin kept. */
	assert_true(len < sizeof(buf) / 4);
	assert_int_equal(buf[len - 1], '\n');
}


/* ---- metrics_conn: admission ---- */

static struct conn_peer local_peer(uint32_t uid)
{
	struct conn_peer p = { .uid = uid, .owner = uid };

	p.class = !uid ? CONN_ROOT : uid < CONNS_SYSTEM_UID_END ? CONN_SYSTEM : CONN_USER;
	return p;
}

static struct conn_peer remote_peer(const char *addr)
{
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct conn_peer p;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) == 1) {
		assert_int_equal(conn_classify(&p, (struct sockaddr *)&sa, -ENOENT, NULL), 0);
	} else {
		assert_int_equal(inet_pton(AF_INET6, addr, &sa6.sin6_addr), 1);
		assert_int_equal(conn_classify(&p, (struct sockaddr *)&sa6, -ENOENT, NULL), 0);
	}
	assert_int_equal(p.class, CONN_REMOTE);
	return p;
}

/* Admit @p as often as it may; how many got in, appended to @open. */
static size_t admit_all(struct conn_peer *open, size_t *n, struct conn_peer p, size_t tries)
{
	size_t in = 0;

	while (tries-- && conn_admit(open, *n, &p) == CONN_ADMIT) {
		open[(*n)++] = p;
		in++;
	}
	return in;
}

/* What a uid or an address gets, and why the next is refused. */
static void test_each_peer_holds_its_share(void **state)
{
	struct conn_peer open[CONNS_MAX], p;
	size_t n = 0;

	(void)state;
	assert_int_equal(admit_all(open, &n, local_peer(65534), 10), CONNS_PER_UID);
	p = local_peer(65534);
	assert_int_equal(conn_admit(open, n, &p), CONN_SHARE_FULL);
	assert_int_equal(admit_all(open, &n, local_peer(1000), 10), CONNS_PER_UID);
	assert_int_equal(admit_all(open, &n, local_peer(110), 10), CONNS_PER_UID);
	assert_int_equal(admit_all(open, &n, remote_peer("10.0.0.5"), 10), CONNS_PER_ADDR);
	/* Root: every one of its slots, and not one more. */
	assert_int_equal(admit_all(open, &n, local_peer(0), 10), CONNS_ROOT);
	p = local_peer(0);
	assert_int_equal(conn_admit(open, n, &p), CONN_CLASS_FULL);
}

/*
 * The worst case: 65,536 uids, one connection each (a subordinate range no
 * owner_of folds, or many users), and remote hosts by the hundred. Each kind
 * fills only its own slots; root's scrape, a system service's and a remote
 * Prometheus's still get in.
 */
static void test_root_is_admitted_beside_any_number_of_uids(void **state)
{
	struct conn_peer open[CONNS_MAX], p;
	size_t n = 0, users = 0, remotes = 0, systems = 0;
	char addr[32];

	(void)state;
	for (uint32_t uid = 100000; uid < 100000 + 65536; uid++)
		users += admit_all(open, &n, local_peer(uid), 1);
	assert_int_equal(users, CONNS_USER);
	for (int i = 0; i < 300; i++) {
		snprintf(addr, sizeof(addr), "10.1.%d.%d", i / 250, i % 250 + 1);
		remotes += admit_all(open, &n, remote_peer(addr), 8);
	}
	assert_int_equal(remotes, CONNS_REMOTE);
	for (uint32_t uid = 1; uid < CONNS_SYSTEM_UID_END; uid++)
		systems += admit_all(open, &n, local_peer(uid), 8);
	assert_int_equal(systems, CONNS_SYSTEM);
	assert_int_equal(n, CONNS_MAX - CONNS_ROOT);
	/* Every other slot is taken: root's are all there. */
	assert_int_equal(admit_all(open, &n, local_peer(0), 10), CONNS_ROOT);
	assert_int_equal(n, CONNS_MAX);

	/* Users and remote hosts alone: a system uid and a new host still get in. */
	n = 0;
	for (uint32_t uid = 100000; uid < 100100; uid++)
		admit_all(open, &n, local_peer(uid), 1);
	p = local_peer(65534);
	assert_int_equal(conn_admit(open, n, &p), CONN_CLASS_FULL);
	p = local_peer(998);
	assert_int_equal(conn_admit(open, n, &p), CONN_ADMIT);
	p = remote_peer("192.0.2.7");
	assert_int_equal(conn_admit(open, n, &p), CONN_ADMIT);
}

/*
 * A user with a subordinate range: its 65,536 uids count as the user
 * (owner_of, /etc/subuid's), so together they hold its 2 of users' slots,
 * and three other users still get theirs.
 */
static void test_a_subordinate_range_counts_as_its_user(void **state)
{
	struct conn_peer open[CONNS_MAX], p;
	size_t n = 0, in = 0;

	(void)state;
	for (uint32_t uid = 100000; uid < 100000 + 65536; uid++) {
		p = local_peer(uid);
		p.owner = 1000;
		in += admit_all(open, &n, p, 1);
	}
	in += admit_all(open, &n, local_peer(1000), 2);
	assert_int_equal(in, CONNS_PER_UID);
	for (uint32_t uid = 1001; uid < 1004; uid++)
		assert_int_equal(admit_all(open, &n, local_peer(uid), 2), CONNS_PER_UID);
	p = local_peer(1000);
	assert_int_equal(conn_admit(open, n, &p), CONN_CLASS_FULL);
}

/* A remote IPv6 host is counted by its /64; an IPv4-mapped address as the IPv4 one. */
static void test_remote_addresses_are_counted_by_host(void **state)
{
	struct conn_peer open[CONNS_MAX], p;
	size_t n = 0;

	(void)state;
	assert_int_equal(admit_all(open, &n, remote_peer("2001:db8:1:2::1"), 2), 2);
	assert_int_equal(admit_all(open, &n, remote_peer("2001:db8:1:2:ffff::9"), 10),
			 CONNS_PER_ADDR - 2);
	assert_int_equal(admit_all(open, &n, remote_peer("2001:db8:1:3::1"), 10), CONNS_PER_ADDR);
	n = 0;
	assert_int_equal(admit_all(open, &n, remote_peer("192.0.2.1"), 2), 2);
	p = remote_peer("::ffff:192.0.2.1");
	assert_memory_equal(p.addr, open[0].addr, sizeof(p.addr));
	assert_int_equal(admit_all(open, &n, p, 10), CONNS_PER_ADDR - 2);
}

/* What the kernel's answer makes of a peer. */
static void test_classify(void **state)
{
	struct sockaddr_in lo = { .sin_family = AF_INET }, far = { .sin_family = AF_INET };
	struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6 }, mapped = { .sin6_family = AF_INET6 };
	struct conn_diag d = { .uid = 0, .inode = 4242, .state = 1 };
	struct conn_peer p;

	(void)state;
	inet_pton(AF_INET, "127.0.0.5", &lo.sin_addr);
	inet_pton(AF_INET, "10.1.2.3", &far.sin_addr);
	inet_pton(AF_INET6, "::1", &lo6.sin6_addr);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.sin6_addr);
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo, 0, &d), 0);
	assert_int_equal(p.class, CONN_ROOT);
	d.uid = 999;
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo, 0, &d), 0);
	assert_int_equal(p.class, CONN_SYSTEM);
	d.uid = 1000;
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo, 0, &d), 0);
	assert_int_equal(p.class, CONN_USER);
	d.uid = 65534;
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&far, 0, &d), 0);
	assert_int_equal(p.class, CONN_USER);
	assert_int_equal(p.uid, 65534);
	assert_int_equal(p.owner, 65534);
	/* Closed by its process: the kernel's socket now (ss shows ino:0), its owner read as root. */
	d = (struct conn_diag){ .uid = 0, .inode = 0 };
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo, 0, &d), -ENOTCONN);
	/* Not in this network namespace: remote, unless on loopback (then it is gone). */
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo, -ENOENT, NULL), -ENOTCONN);
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&lo6, -ENOENT, NULL), -ENOTCONN);
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&mapped, -ENOENT, NULL), -ENOTCONN);
	assert_int_equal(conn_classify(&p, (struct sockaddr *)&far, -ENOENT, NULL), 0);
	assert_int_equal(p.class, CONN_REMOTE);
	assert_string_equal(conn_class_name(p.class), "remote");
}

/* Netlink messages as the kernel writes them: an answer, an error, a stale one, a cut one. */
static size_t put_msg(uint8_t *at, uint16_t type, uint32_t seq, const void *body, size_t len)
{
	struct nlmsghdr h = { .nlmsg_len = NLMSG_LENGTH(len), .nlmsg_type = type, .nlmsg_seq = seq };

	memcpy(at, &h, sizeof(h));
	memcpy(at + NLMSG_HDRLEN, body, len);
	return NLMSG_ALIGN(h.nlmsg_len);
}

static void test_diag_parse(void **state)
{
	static uint32_t words[1024];
	uint8_t *msgs = (uint8_t *)words;
	struct inet_diag_msg m = { .idiag_state = 1, .idiag_uid = 65534, .idiag_inode = 77 };
	struct nlmsgerr e = { .error = -ENOENT };
	struct conn_diag d = { 0 };
	size_t len;

	(void)state;
	len = put_msg(msgs, SOCK_DIAG_BY_FAMILY, 7, &m, sizeof(m));
	assert_int_equal(conn_diag_parse(msgs, len, 7, &d), 0);
	assert_int_equal(d.uid, 65534);
	assert_int_equal(d.inode, 77);
	assert_int_equal(conn_diag_parse(msgs, len, 8, &d), -EAGAIN);
	/* A late answer to request 6, then request 7's error. */
	len = put_msg(msgs, SOCK_DIAG_BY_FAMILY, 6, &m, sizeof(m));
	len += put_msg(msgs + len, NLMSG_ERROR, 7, &e, sizeof(e));
	assert_int_equal(conn_diag_parse(msgs, len, 7, &d), -ENOENT);
	/* Cut: a header that says more than there is, a body too short. */
	assert_int_equal(conn_diag_parse(msgs, len - 8, 7, &d), -EBADMSG);
	len = put_msg(msgs, SOCK_DIAG_BY_FAMILY, 9, &m, 8);
	assert_int_equal(conn_diag_parse(msgs, len, 9, &d), -EBADMSG);
	assert_int_equal(conn_diag_parse(msgs, 3, 9, &d), -EAGAIN);
}

/* ---- metrics_conn: real sockets ---- */

static int listen_lo(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static int connect_lo(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* A connection accepted on @lfd within 5 s. */
static int accept_lo(int lfd)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int fd;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* A child of uid @uid connects and waits for the end of the stream; its pid. No asserts in it. */
static pid_t connect_as(uid_t uid, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	pid_t pid = fork();
	char c;
	int fd;

	assert_true(pid >= 0);
	if (pid)
		return pid;
	alarm(10);
	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		_exit(2);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		_exit(3);
	_exit(read(fd, &c, 1) == 0 ? 0 : 4);
}

static struct metrics_conns_stats stats_of(struct metrics_conns *t)
{
	struct metrics_conns_stats st;

	metrics_conns__stats(t, &st);
	return st;
}

/* The kernel names the owner of the peer's socket: this process's uid, and another's. */
static void test_the_kernel_names_the_peer_uid(void **state)
{
	struct metrics_conns *t = metrics_conns__new(10000, 10000, NULL);
	struct metrics_conn *c;
	uint16_t port;
	int lfd, cfd, sfd;
	pid_t pid;

	(void)state;
	assert_non_null(t);
	lfd = listen_lo(&port);
	cfd = connect_lo(port);
	sfd = accept_lo(lfd);
	c = metrics_conns__open(t, sfd);
	assert_non_null(c);
	assert_int_equal(stats_of(t).open[local_peer(getuid()).class], 1);
	metrics_conns__close(t, c);
	close(sfd);
	close(cfd);
	if (geteuid()) {
		print_message("SKIPPED: not root: a peer of another uid cannot be made\n");
	} else {
		/* Another uid's: a user's, and its share is its own. */
		pid = connect_as(65534, port);
		sfd = accept_lo(lfd);
		c = metrics_conns__open(t, sfd);
		assert_non_null(c);
		assert_int_equal(stats_of(t).open[CONN_USER], 1);
		assert_int_equal(stats_of(t).open[CONN_ROOT], 0);
		/* The child reads the end of the stream once this side is closed. */
		metrics_conns__close(t, c);
		close(sfd);
		assert_int_equal(tu_wait(pid), 0);
	}
	close(lfd);
	metrics_conns__free(t);
}

/* A peer that closed its end before it was looked at is refused, even if read as root. */
static void test_a_closed_peer_is_refused(void **state)
{
	struct metrics_conns *t = metrics_conns__new(10000, 10000, NULL);
	uint16_t port;
	int lfd, cfd, sfd;
	char c;

	(void)state;
	assert_non_null(t);
	lfd = listen_lo(&port);
	cfd = connect_lo(port);
	close(cfd);
	sfd = accept_lo(lfd);
	assert_null(metrics_conns__open(t, sfd));
	assert_int_equal(stats_of(t).refused_gone, 1);
	/* Shut down: the library reads the end of the stream and closes it. */
	assert_int_equal(read(sfd, &c, 1), 0);
	close(sfd);
	close(lfd);
	metrics_conns__free(t);
}

static uint64_t ms_since(uint64_t t0)
{
	return (clock_mono_ns() - t0) / 1000000;
}

/*
 * The reaper shuts down a connection at its deadline, though a byte comes
 * every 20 ms: no whole request in 200 ms, then an answer not read in 300 ms.
 */
static void test_deadlines_close_a_trickling_peer(void **state)
{
	struct metrics_conns *t = metrics_conns__new(200, 300, NULL);
	struct metrics_conn *c;
	struct pollfd pfd;
	uint64_t t0, ms;
	uint16_t port;
	int lfd, cfd, sfd, phase;
	char b[64];

	(void)state;
	assert_non_null(t);
	lfd = listen_lo(&port);
	for (phase = 0; phase < 2; phase++) {
		cfd = connect_lo(port);
		sfd = accept_lo(lfd);
		t0 = clock_mono_ns();
		c = metrics_conns__open(t, sfd);
		assert_non_null(c);
		if (phase)
			metrics_conns__answering(t, c);
		/* Until the end of the stream reaches the peer, for 5 s at most. */
		pfd = (struct pollfd){ .fd = cfd, .events = POLLIN };
		while (ms_since(t0) < 5000) {
			assert_int_equal(write(cfd, "x", 1), 1);
			if (poll(&pfd, 1, 20) == 1 && read(cfd, b, sizeof(b)) <= 0)
				break;
		}
		ms = ms_since(t0);
		print_message("phase %d: shut down after %llu ms\n", phase, (unsigned long long)ms);
		assert_true(ms >= (phase ? 300 : 200));
		assert_true(ms < (phase ? 300 : 200) + 1000);
		assert_int_equal(phase ? stats_of(t).expired_answer : stats_of(t).expired_request, 1);
		metrics_conns__close(t, c);
		close(sfd);
		close(cfd);
	}
	assert_int_equal(stats_of(t).open[CONN_ROOT] + stats_of(t).open[CONN_USER] +
			 stats_of(t).open[CONN_SYSTEM], 0);
	close(lfd);
	metrics_conns__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_family_has_help_and_type),
		cmocka_unit_test(test_histogram_buckets_are_cumulative),
		cmocka_unit_test(test_process_metrics_only_when_read),
		cmocka_unit_test(test_label_values_are_escaped),
		cmocka_unit_test(test_a_line_that_does_not_fit_is_left_out_whole),
		cmocka_unit_test(test_the_whole_text_fits_its_buffer),
		cmocka_unit_test(test_each_peer_holds_its_share),
		cmocka_unit_test(test_root_is_admitted_beside_any_number_of_uids),
		cmocka_unit_test(test_a_subordinate_range_counts_as_its_user),
		cmocka_unit_test(test_remote_addresses_are_counted_by_host),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_diag_parse),
		cmocka_unit_test(test_the_kernel_names_the_peer_uid),
		cmocka_unit_test(test_a_closed_peer_is_refused),
		cmocka_unit_test(test_deadlines_close_a_trickling_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * One agent per map directory. Two agents on one directory would both copy
 * into each child and archive each other's maps, so the second refuses to
 * start: an flock() on a file named for the directory, which the kernel
 * drops when the holder dies, even by kill -9. Beside it, a unix socket
 * where `perfmapctl status` reads what the agent tracks (and `perfmapctl
 * doctor` one process's lines, by a one-line request): root's alone (or a
 * group's too, --status-group), and answered within a budget, so that not
 * even root's flood of connections starves the event loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "report/instance.h"
#include "lib/log.h"
#include "perfmap_tools.h"

/* A client that bound its socket: its request line is awaited until @until_ns. */
struct asking {
	int fd;
	uint64_t until_ns;            /* CLOCK_MONOTONIC */
};

struct instance {
	int lock_fd;
	int sock_fd;
	gid_t status_gid;
	/* The answers' budget: this second's began at @window_ns, @left remain. */
	uint64_t window_ns;
	unsigned int left;
	bool spent;                   /* this window's budget ran out */
	uint64_t served, throttled;
	int spare_fd;   /* given up to accept a status connection when the agent is out of fds */
	/* Clients whose request is awaited: readable in @ask_epfd when their line (or end) came. */
	int ask_epfd;
	struct asking asking[STATUS_ASKING_MAX];
	unsigned int nasking;
	char answer[STATUS_ANSWER_MAX];
	char lock_path[PATH_MAX];
	char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static int take_lock(struct instance *inst, const char *map_dir)
{
	char pid[32] = "";
	int n;

	inst->lock_fd = open(inst->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (inst->lock_fd < 0) {
		pr_err("lock %s: %s", inst->lock_path, strerror(errno));
		return -errno;
	}
	if (flock(inst->lock_fd, LOCK_EX | LOCK_NB)) {
		n = pread(inst->lock_fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		pr_err("another perfmapd (pid %s) already manages %s (lock %s); refusing to start",
		       pid[0] ? pid : "?", map_dir, inst->lock_path);
		return -EBUSY;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(inst->lock_fd, 0) || pwrite(inst->lock_fd, pid, n, 0) != n)
		pr_warn("lock %s: cannot record our pid: %s", inst->lock_path, strerror(errno));
	return 0;
}

/*
 * What the agent tracks (pids, commands, counts) is root's to read: the
 * socket is made 0600 (umask), and only then given to a group, if asked.
 */
static int listen_status(struct instance *inst)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old_mask;
	int err;

	inst->sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (inst->sock_fd < 0)
		return -errno;
	memcpy(sa.sun_path, inst->sock_path, sizeof(sa.sun_path));
	/* We hold the lock: a socket file left here is from an agent that died. */
	unlink(inst->sock_path);
	old_mask = umask(0177);
	err = bind(inst->sock_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (!err && inst->status_gid != STATUS_NO_GROUP) {
		err = chown(inst->sock_path, 0, inst->status_gid);
		if (!err)
			err = chmod(inst->sock_path, 0660);
	}
	if (err || listen(inst->sock_fd, 16)) {
		pr_err("status socket %s: %s", inst->sock_path, strerror(errno));
		return -errno;
	}
	return 0;
}

struct instance *instance__open(const char *run_dir, const char *map_dir, gid_t status_gid)
{
	struct instance *inst = calloc(1, sizeof(*inst));
	char sock[PATH_MAX];
	int err;

	if (!inst)
		return NULL;
	inst->lock_fd = inst->sock_fd = inst->ask_epfd = -1;
	inst->status_gid = status_gid;
	inst->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	inst->ask_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (inst->ask_epfd < 0) {
		pr_err("status socket: epoll: %s", strerror(errno));
		goto free_inst;
	}
	if (mkdir(run_dir, 0755) && errno != EEXIST) {
		pr_err("run directory %s: %s", run_dir, strerror(errno));
		goto free_inst;
	}
	err = perfmap__run_paths(run_dir, map_dir, inst->lock_path, sock,
			     sizeof(inst->lock_path));
	if (err) {
		pr_err("run directory %s: the lock and socket names for %s: %s", run_dir, map_dir,
		       strerror(-err));
		goto free_inst;
	}
	memcpy(inst->sock_path, sock, strlen(sock) + 1);  /* fits: perfmap__run_paths checked */
	if (take_lock(inst, map_dir) || listen_status(inst))
		goto free_inst;
	return inst;

free_inst:
	instance__free(inst);
	return NULL;
}

void instance__free(struct instance *inst)
{
	if (!inst)
		return;
	if (inst->sock_fd >= 0) {
		unlink(inst->sock_path);
		close(inst->sock_fd);
	}
	/* The lock file stays: unlinking it would let a third agent lock a new inode. */
	if (inst->lock_fd >= 0)
		close(inst->lock_fd);
	if (inst->spare_fd >= 0)
		close(inst->spare_fd);
	while (inst->nasking)
		close(inst->asking[--inst->nasking].fd);
	if (inst->ask_epfd >= 0)
		close(inst->ask_epfd);
	free(inst);
}

int instance__fd(const struct instance *inst)
{
	return inst->sock_fd;
}

int instance__asking_fd(const struct instance *inst)
{
	return inst->ask_epfd;
}

/*
 * Out of fds, accept() fails and the connection stays queued: the loop would
 * wake for it again at once, forever, and nobody could ask the agent what is
 * wrong. The spare fd is given up for the one connection and taken back.
 */
static int accept_status(struct instance *inst, bool *bound)
{
	struct sockaddr_un peer;
	socklen_t len = sizeof(peer);
	int fd = accept4(inst->sock_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0 && errno == EMFILE && inst->spare_fd >= 0) {
		close(inst->spare_fd);
		inst->spare_fd = -1;
		len = sizeof(peer);
		fd = accept4(inst->sock_fd, (struct sockaddr *)&peer, &len,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
	}
	/* An unbound peer's address is its family alone. */
	*bound = fd >= 0 && len > offsetof(struct sockaddr_un, sun_path);
	return fd;
}

unsigned int instance__budget(struct instance *inst, uint64_t now_ns)
{
	if (!inst->window_ns || now_ns - inst->window_ns >= 1000000000) {
		inst->window_ns = now_ns;
		inst->left = STATUS_PER_S;
		inst->spent = false;
	}
	if (!inst->left && !inst->spent) {
		inst->spent = true;
		inst->throttled++;
	}
	return inst->left < STATUS_PER_WAKEUP ? inst->left : STATUS_PER_WAKEUP;
}

void instance_parse_request(const char *buf, size_t len, struct status_request *rq)
{
	unsigned long long pid = 0;
	size_t i;

	*rq = (struct status_request){ .kind = STATUS_REQ_NONE };
	if (!len)
		return;
	rq->kind = STATUS_REQ_BAD;
	/* "pid N\n", N a decimal pid, and nothing after it: one request per connection. */
	if (len > STATUS_REQUEST_MAX || len < 6 || memcmp(buf, "pid ", 4) || buf[len - 1] != '\n')
		return;
	for (i = 4; i < len - 1; i++) {
		if (buf[i] < '0' || buf[i] > '9' || i - 4 >= 10)
			return;
		pid = pid * 10 + (unsigned long long)(buf[i] - '0');
	}
	if (!pid || pid > INT_MAX)
		return;
	rq->kind = STATUS_REQ_PID;
	rq->pid = (pid_t)pid;
}

/* Answer @fd with @text, or for what @got bytes of @req ask (@text NULL: asked nothing known); then close it. */
static void reply(struct instance *inst, int fd, const char *req, ssize_t got, const char *text,
		  size_t len, status_answer_fn *answer, void *ctx)
{
	struct status_request rq;

	instance_parse_request(req, got > 0 ? (size_t)got : 0, &rq);
	if (rq.kind != STATUS_REQ_NONE || !text) {
		if (rq.kind == STATUS_REQ_NONE)
			rq.kind = STATUS_REQ_BAD;
		len = answer(ctx, &rq, inst->answer, sizeof(inst->answer));
		text = inst->answer;
	}
	/* A small report into a fresh socket buffer: one write, never blocks. */
	if (write(fd, text, len) < 0)
		pr_debug("status: %s", strerror(errno));
	close(fd);
	inst->served++;
}

/* Await @fd's request (its client bound its socket): false when STATUS_ASKING_MAX wait already. */
static bool await_request(struct instance *inst, int fd, uint64_t now_ns)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP };

	if (inst->nasking == STATUS_ASKING_MAX)
		return false;
	e.data.fd = fd;
	if (epoll_ctl(inst->ask_epfd, EPOLL_CTL_ADD, fd, &e))
		return false;
	inst->asking[inst->nasking++] = (struct asking){ fd, now_ns + STATUS_ASK_WAIT_NS };
	return true;
}

void instance__serve(struct instance *inst, const char *text, size_t len, unsigned int max,
		     uint64_t now_ns, status_answer_fn *answer, void *ctx)
{
	char req[STATUS_REQUEST_MAX + 1];
	unsigned int n;
	ssize_t got;
	bool bound;
	int fd;

	for (n = 0; n < max && n < inst->left; n++) {
		fd = accept_status(inst, &bound);
		if (fd < 0)
			break;
		/*
		 * What came with the connection, never waited for: a client
		 * that sends nothing gets the whole status at once, as it always
		 * did. One that bound its socket first promised a line: it
		 * may come after the accept, and is awaited (instance.h).
		 */
		got = recv(fd, req, sizeof(req), MSG_DONTWAIT);
		if (got < 0 && errno == EAGAIN && bound && await_request(inst, fd, now_ns))
			continue;
		reply(inst, fd, req, got, text, len, answer, ctx);
	}
	inst->left -= n;
	if (inst->spare_fd < 0)
		inst->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void instance__serve_asking(struct instance *inst, uint64_t now_ns, status_answer_fn *answer,
			    void *ctx)
{
	char req[STATUS_REQUEST_MAX + 1];
	struct asking *a;
	unsigned int i;
	ssize_t got;

	for (i = 0; i < inst->nasking;) {
		a = &inst->asking[i];
		got = recv(a->fd, req, sizeof(req), MSG_DONTWAIT);
		if (got < 0 && errno == EAGAIN && now_ns < a->until_ns) {
			i++;
			continue;
		}
		/* Its line, its end, or its time is up (an error line). Closing leaves the epoll set. */
		reply(inst, a->fd, req, got, NULL, 0, answer, ctx);
		*a = inst->asking[--inst->nasking];
	}
}

void instance__stats(const struct instance *inst, uint64_t *served, uint64_t *throttled)
{
	*served = inst->served;
	*throttled = inst->throttled;
}

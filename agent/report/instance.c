/*
 * One agent per map directory. Two agents on one directory would both copy
 * into each child and archive each other's maps, so the second refuses to
 * start: an flock() on a file named for the directory, which the kernel
 * drops when the holder dies, even by kill -9. Beside it, a unix socket
 * where `perfmapctl status` reads what the agent tracks: root's alone (or a
 * group's too, --status-group), and answered within a budget, so that not
 * even root's flood of connections starves the event loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "report/instance.h"
#include "lib/log.h"
#include "perfmap_tools.h"

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
	inst->lock_fd = inst->sock_fd = -1;
	inst->status_gid = status_gid;
	inst->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
	free(inst);
}

int instance__fd(const struct instance *inst)
{
	return inst->sock_fd;
}

/*
 * Out of fds, accept() fails and the connection stays queued: the loop would
 * wake for it again at once, forever, and nobody could ask the agent what is
 * wrong. The spare fd is given up for the one connection and taken back.
 */
static int accept_status(struct instance *inst)
{
	int fd = accept4(inst->sock_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd >= 0 || errno != EMFILE || inst->spare_fd < 0)
		return fd;
	close(inst->spare_fd);
	inst->spare_fd = -1;
	return accept4(inst->sock_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
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

void instance__serve(struct instance *inst, const char *text, size_t len, unsigned int max)
{
	unsigned int n;
	int fd;

	for (n = 0; n < max && n < inst->left; n++) {
		fd = accept_status(inst);
		if (fd < 0)
			break;
		/* A small report into a fresh socket buffer: one write, never blocks. */
		if (write(fd, text, len) < 0)
			pr_debug("status: %s", strerror(errno));
		close(fd);
		inst->served++;
	}
	inst->left -= n;
	if (inst->spare_fd < 0)
		inst->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void instance__stats(const struct instance *inst, uint64_t *served, uint64_t *throttled)
{
	*served = inst->served;
	*throttled = inst->throttled;
}

/* The JIT author's writer: perfmap_init, perfmap_write_entry(ies), perfmap_fini. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

struct perfmap_writer perfmap__writer = { .fd = -1, .fork_size = -1 };
static pthread_once_t writer_once = PTHREAD_ONCE_INIT;
static int writer_errno;

static void writer_setup(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	err = pthread_rwlockattr_init(&w->lock_attr);
	/*
	 * Writer preference: a steady stream of appends from many threads must
	 * not starve perfmap_fini() or a fork.
	 */
	if (!err)
		err = pthread_rwlockattr_setkind_np(&w->lock_attr,
				PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!err)
		err = pthread_rwlock_init(&w->lock, &w->lock_attr);
	if (!err)
		err = perfmap__fork_register();
	writer_errno = err;
	if (!err)
		__atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
}

int perfmap__writer_ready(void)
{
	pthread_once(&writer_once, writer_setup);
	if (writer_errno) {
		errno = writer_errno;
		return -1;
	}
	return 0;
}

static int resolve_dir(struct perfmap_writer *w)
{
	/* secure_getenv: a setuid JIT must not be steered by its caller. */
	const char *dir = secure_getenv("PERFMAP_DIR");
	size_t len;

	if (!dir || !*dir)
		dir = "/tmp";
	len = strlen(dir);
	if (len >= sizeof(w->dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(w->dir, dir, len + 1);
	w->have_dir = true;
	return 0;
}

/* The map must be ours alone: a regular file, one link, owned by us. */
static int check_own_map(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return errno;
	return -perfmap__check_map_inode(&st, true, geteuid(), 0);
}

int perfmap__writer_open_locked(bool reuse_dir)
{
	struct perfmap_writer *w = &perfmap__writer;
	char path[PATH_MAX];
	int fd, err;

	if (w->fd >= 0)
		return 0;
	if ((!reuse_dir || !w->have_dir) && resolve_dir(w))
		return -1;
	err = perfmap__map_path(path, sizeof(path), w->dir, getpid());
	if (err) {
		errno = -err;
		return -1;
	}
	/*
	 * CPython's flags, plus O_NONBLOCK so a FIFO planted at the path fails
	 * (ENXIO) instead of hanging the JIT; it changes nothing for a file.
	 */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC |
			O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0)
		return -1;
	err = check_own_map(fd);
	if (err) {
		close(fd);
		errno = err;
		return -1;
	}
	w->fd = fd;
	w->pid = getpid();
	return 0;
}

int perfmap__writer_lock_open(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	if (perfmap__writer_ready())
		return -2;
	pthread_rwlock_rdlock(&w->lock);
	while (w->fd < 0) {
		pthread_rwlock_unlock(&w->lock);
		pthread_rwlock_wrlock(&w->lock);
		err = perfmap__writer_open_locked(false);
		pthread_rwlock_unlock(&w->lock);
		if (err)
			return -1;
		/* perfmap_fini() may close it again before we get the lock back. */
		pthread_rwlock_rdlock(&w->lock);
	}
	return 0;
}

void perfmap__writer_unlock(void)
{
	pthread_rwlock_unlock(&perfmap__writer.lock);
}

int perfmap_init(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	if (perfmap__writer_ready())
		return -2;
	pthread_rwlock_wrlock(&w->lock);
	err = perfmap__writer_open_locked(false);
	pthread_rwlock_unlock(&w->lock);
	return err;
}

void perfmap_fini(void)
{
	struct perfmap_writer *w = &perfmap__writer;

	if (!__atomic_load_n(&w->ready, __ATOMIC_ACQUIRE))
		return;
	pthread_rwlock_wrlock(&w->lock);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	pthread_rwlock_unlock(&w->lock);
}

static bool entry_valid(const void *code_addr, size_t code_size, const char *name)
{
	return perfmap__range_ok((uintptr_t)code_addr, code_size) && name && *name;
}

static size_t format_entry(char *dst, const void *code_addr, size_t code_size,
			   const char *name)
{
	/* strnlen: a runaway name costs at most the bound, not its length. */
	size_t len = strnlen(name, PERFMAP_NAME_MAX + 1);

	len = perfmap__name_cut(name, len, PERFMAP_NAME_MAX);
	return perfmap__format_line(dst, (uintptr_t)code_addr, code_size, name, len);
}

/* Write whole lines in @buf; the caller formats outside the lock. */
static int writer_append(const char *buf, size_t len)
{
	int err;

	err = perfmap__writer_lock_open();
	if (err)
		return err;
	err = perfmap__write_all(perfmap__writer.fd, buf, len);
	perfmap__writer_unlock();
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

int perfmap_write_entry(const void *code_addr, size_t code_size, const char *name)
{
	char line[PERFMAP_LINE_MAX];
	size_t len;

	if (!entry_valid(code_addr, code_size, name)) {
		errno = EINVAL;
		return -1;
	}
	len = format_entry(line, code_addr, code_size, name);
	return writer_append(line, len);
}

/* Lines per write() are bounded by this buffer, kept on the caller's stack. */
#define BATCH_BUF (16u << 10)

int perfmap_write_entries(const struct perfmap_entry *entries, size_t count)
{
	char buf[BATCH_BUF];
	size_t i, off = 0;
	int err;

	if (!entries && count) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < count; i++) {
		if (!entry_valid(entries[i].code_addr, entries[i].code_size,
				 entries[i].name)) {
			errno = EINVAL;
			return -1;
		}
	}
	err = perfmap__writer_lock_open();
	if (err)
		return err;
	for (i = 0; i < count; i++) {
		if (off + PERFMAP_LINE_MAX > sizeof(buf)) {
			err = perfmap__write_all(perfmap__writer.fd, buf, off);
			if (err)
				goto unlock;
			off = 0;
		}
		off += format_entry(buf + off, entries[i].code_addr,
				    entries[i].code_size, entries[i].name);
	}
	if (off)
		err = perfmap__write_all(perfmap__writer.fd, buf, off);
unlock:
	perfmap__writer_unlock();
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

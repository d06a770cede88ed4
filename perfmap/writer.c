/*
 * The JIT author's writer: perfmap_init, perfmap_write_entry(ies),
 * perfmap_set_persist_after_fork, perfmap_fini. The map is opened by
 * writer_open.c; the fork handlers set up here are fork.c's.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

static pthread_once_t writer_once = PTHREAD_ONCE_INIT;
static int writer_err;  /* of the setup: 0 or -errno */

static void writer_setup(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	/* pthread calls give a positive errno: negated once, at the end. */
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
	writer_err = -err;
	if (!writer_err)
		writer_err = perfmap__fork_register();
	if (!writer_err)
		__atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
}

int perfmap__writer_ready(void)
{
	pthread_once(&writer_once, writer_setup);
	return writer_err;
}

int perfmap__writer_lock_open(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	err = perfmap__writer_ready();
	if (err)
		return err;
	pthread_rwlock_rdlock(&w->lock);
	while (w->fd < 0) {
		pthread_rwlock_unlock(&w->lock);
		pthread_rwlock_wrlock(&w->lock);
		err = perfmap__writer_open_locked(false);
		pthread_rwlock_unlock(&w->lock);
		if (err)
			return err;
		/* perfmap_fini() may close it again before we get the lock back. */
		pthread_rwlock_rdlock(&w->lock);
	}
	return 0;
}

void perfmap__writer_unlock(void)
{
	pthread_rwlock_unlock(&perfmap__writer.lock);
}

/* The public convention from an internal -errno: -1 with errno set, or 0. */
static int public_ret(int err)
{
	if (!err)
		return 0;
	errno = -err;
	return -1;
}

int perfmap_init(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int err;

	/* perfmap.h: -2 when the lock cannot be made, -1 when the map cannot be opened. */
	err = perfmap__writer_ready();
	if (err) {
		errno = -err;
		return -2;
	}
	pthread_rwlock_wrlock(&w->lock);
	err = perfmap__writer_open_locked(false);
	pthread_rwlock_unlock(&w->lock);
	return public_ret(err);
}

int perfmap_set_persist_after_fork(int enable)
{
	int err;

	/* The fork handlers must be in place before a fork can need them. */
	err = perfmap__writer_ready();
	if (err)
		return public_ret(err);
	__atomic_store_n(&perfmap__writer.persist_after_fork, !!enable,
			 __ATOMIC_RELAXED);
	return 0;
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

/* Write whole lines in @buf; the caller formats outside the lock. 0 or -errno. */
static int writer_append(const char *buf, size_t len)
{
	int err;

	err = perfmap__writer_lock_open();
	if (err)
		return err;
	err = perfmap__write_all(perfmap__writer.fd, buf, len);
	perfmap__writer_unlock();
	return err;
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
	return public_ret(writer_append(line, len));
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
		return public_ret(err);
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
	return public_ret(err);
}

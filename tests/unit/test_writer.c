/* Writer tests: line format, names, errors, threads, processes, fork policy, traps at the path. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfmap.h"
#include "testutil.h"

static char *dir;

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	if (!dir)
		return -1;
	setenv("PERFMAP_DIR", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	perfmap_fini();
	perfmap_set_persist_after_fork(0);
	tu_rmdir(dir);
	dir = NULL;
	return 0;
}

static char *own_map(size_t *len)
{
	return tu_read(tu_map_path(dir, getpid()), len);
}

/* Every line of @buf is "START SIZE NAME\n" and there are @want of them. */
static void assert_intact_lines(const char *buf, size_t len, size_t want)
{
	struct perfmap_reader *r = perfmap_reader__from_mem(buf, len, NULL);
	const struct perfmap_reader_stats *s;
	struct perfmap_record rec;
	unsigned int i;

	assert_non_null(r);
	while (perfmap_reader__next(r, &rec) > 0)
		;
	s = perfmap_reader__stats(r);
	assert_int_equal(s->entries, want);
	assert_int_equal(s->lines, want);
	for (i = 1; i < __PERFMAP_REJECT_MAX; i++)
		assert_int_equal(s->rejected[i], 0);
	assert_int_equal(s->incomplete_bytes, 0);
	perfmap_reader__free(r);
}

static void test_format(void **state)
{
	size_t len;
	char *buf;

	(void)state;
	assert_int_equal(perfmap_write_entry((void *)0x7f0000001000, 0x40,
					     "py::foo:/app.py"), 0);
	assert_int_equal(perfmap_write_entry((void *)0x1, 0x1, "a b  c"), 0);
	buf = own_map(&len);
	assert_string_equal(buf, "7f0000001000 40 py::foo:/app.py\n1 1 a b  c\n");
	free(buf);
}

static void test_file_mode_and_flags(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(perfmap_init(), 0);
	assert_int_equal(stat(tu_map_path(dir, getpid()), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_uid, geteuid());
}

static void test_names_sanitized(void **state)
{
	size_t len;
	char *buf;

	(void)state;
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "a\nb\rc\x01" "d\x7f"), 0);
	assert_int_equal(perfmap_write_entry((void *)0x2000, 0x10, "caf\xc3\xa9 \xe2\x82\xac"), 0);
	assert_int_equal(perfmap_write_entry((void *)0x3000, 0x10, "bad\xff\xfe" "end"), 0);
	/* Overlong '/', a surrogate, a truncated sequence at the end. */
	assert_int_equal(perfmap_write_entry((void *)0x4000, 0x10, "x\xc0\xaf" "y\xed\xa0\x80" "z\xe2\x82"), 0);
	buf = own_map(&len);
	assert_string_equal(buf,
			    "1000 10 a?b?c?d?\n"
			    "2000 10 caf\xc3\xa9 \xe2\x82\xac\n"
			    "3000 10 bad??end\n"
			    "4000 10 x??y???z??\n");
	free(buf);
}

/* The obvious byte-at-a-time rule, to hold the word-at-a-time writer to. */
static size_t reference_utf8_len(const unsigned char *s, size_t len)
{
	uint32_t cp;
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	if (!n || n > len || s[0] > 0xf4)
		return 0;
	cp = s[0] & (0x7f >> n);
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

static void reference_sanitize(char *dst, const unsigned char *src, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		if (src[i] < 0x20 || src[i] == 0x7f) {
			dst[i++] = '?';
			continue;
		}
		n = reference_utf8_len(src + i, len - i);
		if (!n) {
			dst[i++] = '?';
			continue;
		}
		memcpy(dst + i, src + i, n);
		i += n;
	}
}

/* Bad bytes at every offset of the 8-byte words the writer checks at once. */
static void test_names_sanitized_random(void **state)
{
	static const unsigned char pool[] = {
		'a', 'b', 'z', ' ', '~', 0x7f, 0x01, '\n', '\r', '\t', 0x80, 0xbf,
		0xc2, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x90, 0x8d, 0xed, 0xa0,
		0xf4, 0x90, 0xff, 0xc0, 0xaf,
	};
	unsigned char name[80];
	char want[80], line[256];
	uint64_t x = 88172645463325252ull;
	size_t len, i, n, round;
	FILE *f;

	(void)state;
	for (round = 0; round < 3000; round++) {
		len = 1 + round % 70;
		for (i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* Mostly ASCII, as real names are, so fast paths get runs. */
			name[i] = x % 4 ? (unsigned char)('a' + x % 26) : pool[(x >> 8) % sizeof(pool)];
		}
		name[len] = '\0';
		n = strlen((char *)name);
		if (!n)
			continue;
		assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, (char *)name), 0);
		reference_sanitize(want, name, n);
		want[n] = '\0';
		f = fopen(tu_map_path(dir, getpid()), "r");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			;
		fclose(f);
		line[strlen(line) - 1] = '\0';
		assert_string_equal(line + strlen("1000 10 "), want);
	}
}

static void test_long_name_cut(void **state)
{
	char name[PERFMAP_NAME_MAX + 100];
	size_t len;
	char *buf, *sp;

	(void)state;
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, name), 0);
	/* A 2-byte character straddling the bound is dropped whole. */
	memset(name, 'y', PERFMAP_NAME_MAX - 1);
	memcpy(name + PERFMAP_NAME_MAX - 1, "\xc3\xa9tail", 7);
	assert_int_equal(perfmap_write_entry((void *)0x2000, 0x10, name), 0);

	buf = own_map(&len);
	assert_int_equal(tu_count_char(buf, len, '\n'), 2);
	sp = strchr(strchr(buf, ' ') + 1, ' ') + 1;
	assert_int_equal(strchr(sp, '\n') - sp, PERFMAP_NAME_MAX);
	sp = strchr(strchr(strchr(sp, '\n') + 1, ' ') + 1, ' ') + 1;
	assert_int_equal(strchr(sp, '\n') - sp, PERFMAP_NAME_MAX - 1);
	assert_int_equal(sp[PERFMAP_NAME_MAX - 2], 'y');
	assert_true(len < 2 * PERFMAP_LINE_MAX);
	free(buf);
}

static void test_invalid_entries(void **state)
{
	struct perfmap_entry batch[2] = {
		{ (void *)0x1000, 0x10, "good_one" },
		{ (void *)0x2000, 0, "zero_size" },
	};
	size_t len = 1;
	char *buf;

	(void)state;
	errno = 0;
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0, "name"), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(perfmap_write_entry(NULL, 0x10, "name"), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, NULL), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, ""), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(perfmap_write_entry((void *)(UINTPTR_MAX - 4), 0x10, "wraps"), -1);
	assert_int_equal(errno, EINVAL);
	/* One bad entry fails the whole batch before anything is written. */
	errno = 0;
	assert_int_equal(perfmap_write_entries(batch, 2), -1);
	assert_int_equal(errno, EINVAL);

	buf = own_map(&len);
	assert_true(!buf || len == 0);
	free(buf);
}

static void test_init_fini_idempotent(void **state)
{
	size_t len;
	char *buf;

	(void)state;
	assert_int_equal(perfmap_init(), 0);
	assert_int_equal(perfmap_init(), 0);
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "first"), 0);
	perfmap_fini();
	perfmap_fini();
	/* Writing after fini opens the map again and appends. */
	assert_int_equal(perfmap_write_entry((void *)0x2000, 0x10, "second"), 0);
	buf = own_map(&len);
	assert_string_equal(buf, "1000 10 first\n2000 10 second\n");
	free(buf);
}

#define THREADS 8
#define PER_THREAD 20000

/* Thread t's entry i: a unique address and a name that says which it is. */
static uint64_t entry_addr(unsigned int t, unsigned int i)
{
	return 0x7f0000000000ull + ((uint64_t)t << 32) + (uint64_t)i * 16;
}

static void *thread_writer(void *arg)
{
	unsigned int t = (unsigned int)(uintptr_t)arg, i;
	char name[64];

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(name, sizeof(name), "jit::t%u_entry_%u_padding_to_make_lines_longer", t, i);
		if (perfmap_write_entry((void *)(uintptr_t)entry_addr(t, i), 16, name))
			return (void *)1;
	}
	return NULL;
}

/* Every (t, i) exactly once, with the name that belongs to its address. */
static void assert_all_entries(const char *buf, size_t len, unsigned int writers,
			       unsigned int per_writer)
{
	struct perfmap_reader *r = perfmap_reader__from_mem(buf, len, NULL);
	unsigned char *seen = calloc((size_t)writers * per_writer, 1);
	struct perfmap_record rec;
	unsigned int t, i;
	char want[64];

	assert_non_null(r);
	assert_non_null(seen);
	while (perfmap_reader__next(r, &rec) > 0) {
		t = (unsigned int)((rec.start - 0x7f0000000000ull) >> 32);
		i = (unsigned int)(((rec.start - 0x7f0000000000ull) & 0xffffffffull) / 16);
		assert_true(t < writers && i < per_writer);
		snprintf(want, sizeof(want), "jit::t%u_entry_%u_padding_to_make_lines_longer", t, i);
		assert_int_equal(rec.name_len, strlen(want));
		assert_memory_equal(rec.name, want, rec.name_len);
		assert_int_equal(seen[(size_t)t * per_writer + i], 0);
		seen[(size_t)t * per_writer + i] = 1;
	}
	assert_int_equal(perfmap_reader__stats(r)->entries, (uint64_t)writers * per_writer);
	assert_int_equal(perfmap_reader__stats(r)->lines, (uint64_t)writers * per_writer);
	perfmap_reader__free(r);
	free(seen);
}

static void test_threads_never_tear(void **state)
{
	pthread_t tid[THREADS];
	void *ret;
	size_t len;
	char *buf;
	unsigned int t;

	(void)state;
	for (t = 0; t < THREADS; t++)
		assert_int_equal(pthread_create(&tid[t], NULL, thread_writer,
						(void *)(uintptr_t)t), 0);
	for (t = 0; t < THREADS; t++) {
		assert_int_equal(pthread_join(tid[t], &ret), 0);
		assert_null(ret);
	}
	buf = own_map(&len);
	assert_non_null(buf);
	assert_all_entries(buf, len, THREADS, PER_THREAD);
	free(buf);
}

#define PROCS 4

/*
 * Several processes appending to one map happens for real when processes
 * in different pid namespaces share a /tmp: each is pid 1 and writes
 * perf-1.map. Reproduce exactly that.
 */
static pid_t spawn_pid1_writer(unsigned int t, int go_fd)
{
	pid_t child = fork();
	char c;

	if (child)
		return child;
	if (unshare(CLONE_NEWPID) && unshare(CLONE_NEWUSER | CLONE_NEWPID))
		_exit(77);
	child = fork();
	if (child < 0)
		_exit(2);
	if (child) {
		int st = tu_wait(child);
		_exit(st);
	}
	if (getpid() != 1)
		_exit(3);
	/* Start together so the appends really race. */
	if (read(go_fd, &c, 1) != 1)
		_exit(4);
	_exit(thread_writer((void *)(uintptr_t)t) ? 5 : 0);
}

static void test_processes_never_tear(void **state)
{
	pid_t pids[PROCS];
	int go[2], st;
	unsigned int t;
	size_t len;
	char *buf;

	(void)state;
	perfmap_fini();
	assert_int_equal(pipe(go), 0);
	for (t = 0; t < PROCS; t++)
		pids[t] = spawn_pid1_writer(t, go[0]);
	assert_int_equal(write(go[1], "gggg", PROCS), PROCS);
	for (t = 0; t < PROCS; t++) {
		st = tu_wait(pids[t]);
		if (st == 77)
			skip();  /* no pid namespaces for us here */
		assert_int_equal(st, 0);
	}
	close(go[0]);
	close(go[1]);
	buf = tu_read(tu_map_path(dir, 1), &len);
	assert_non_null(buf);
	assert_all_entries(buf, len, PROCS, PER_THREAD);
	free(buf);
}

static void test_batch(void **state)
{
	enum { N = 10000 };
	struct perfmap_entry *e = calloc(N, sizeof(*e));
	char (*names)[32] = calloc(N, 32);
	size_t len, i, off = 0;
	char *buf, line[128];
	int n;

	(void)state;
	for (i = 0; i < N; i++) {
		snprintf(names[i], 32, "batch_%zu", i);
		e[i] = (struct perfmap_entry){ (void *)(0x10000 + i * 0x20), 0x20, names[i] };
	}
	assert_int_equal(perfmap_write_entries(e, N), 0);
	assert_int_equal(perfmap_write_entries(e, 0), 0);
	buf = own_map(&len);
	assert_non_null(buf);
	for (i = 0; i < N; i++) {
		n = snprintf(line, sizeof(line), "%zx 20 batch_%zu\n", 0x10000 + i * 0x20, i);
		assert_memory_equal(buf + off, line, (size_t)n);
		off += (size_t)n;
	}
	assert_int_equal(off, len);
	free(buf);
	free(names);
	free(e);
}

/* Child checks end in _exit(step): cmocka's asserts must not run in a fork. */
#define CHILD_CHECK(step, cond) do { if (!(cond)) _exit(step); } while (0)

static void test_fork_default_child_gets_own_map(void **state)
{
	size_t len;
	char *buf;
	pid_t child;

	(void)state;
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "parent_one"), 0);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		/* Nothing under the child's pid until it writes. */
		CHILD_CHECK(10, access(tu_map_path(dir, getpid()), F_OK) != 0);
		CHILD_CHECK(11, !perfmap_write_entry((void *)0x2000, 0x10, "child_one"));
		buf = tu_read(tu_map_path(dir, getpid()), &len);
		CHILD_CHECK(12, buf && !strcmp(buf, "2000 10 child_one\n"));
		_exit(0);
	}
	assert_int_equal(tu_wait(child), 0);
	assert_int_equal(perfmap_write_entry((void *)0x3000, 0x10, "parent_two"), 0);
	/* The child never wrote into the parent's map. */
	buf = own_map(&len);
	assert_string_equal(buf, "1000 10 parent_one\n3000 10 parent_two\n");
	free(buf);
}

static void test_fork_persist_child_starts_with_parent_entries(void **state)
{
	enum { N = 3000 };
	int ready[2], resume[2];
	size_t len, plen;
	char *buf, *pbuf, c;
	pid_t child;
	unsigned int i;
	char name[32];

	(void)state;
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "parent_%u", i);
		assert_int_equal(perfmap_write_entry((void *)(uintptr_t)(0x100000 + i * 16), 16, name), 0);
	}
	assert_int_equal(perfmap_set_persist_after_fork(1), 0);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(resume), 0);
	pbuf = own_map(&plen);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		/* Right at the fork, before the child writes anything. */
		buf = tu_read(tu_map_path(dir, getpid()), &len);
		CHILD_CHECK(20, buf && len == plen && !memcmp(buf, pbuf, len));
		CHILD_CHECK(21, write(ready[1], "r", 1) == 1);
		CHILD_CHECK(22, read(resume[0], &c, 1) == 1);
		CHILD_CHECK(23, !perfmap_write_entry((void *)0x9000000, 0x10, "child_own"));
		buf = tu_read(tu_map_path(dir, getpid()), &len);
		/* The parent's entries after the fork are not the child's. */
		CHILD_CHECK(24, buf && len == plen + strlen("9000000 10 child_own\n"));
		CHILD_CHECK(25, !memcmp(buf + plen, "9000000 10 child_own\n", len - plen));
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(perfmap_write_entry((void *)0x8000000, 0x10, "parent_after_fork"), 0);
	assert_int_equal(write(resume[1], "g", 1), 1);
	assert_int_equal(tu_wait(child), 0);
	free(pbuf);
	close(ready[0]);
	close(ready[1]);
	close(resume[0]);
	close(resume[1]);
}

/*
 * test_fork_while_writing: a writer thread writes in bursts, one burst per
 * fork, each ended when its fork returns, and every fork lands while the
 * writer is inside perfmap_write_entry(). What it writes stays small:
 * writing flat out, it grew the map (which every persisting child copies
 * whole) as fast as a loaded host slowed the forks down, to 200 MB and
 * 4-5 GB copied in one run. Here a burst slows to a write a millisecond
 * after BURST_FAST writes, when the forking thread is kept from running.
 */
enum { FORKS = 200, BURST_FAST = 256 };

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned int granted;	/* bursts the forking thread asked for */
	unsigned int done;	/* bursts finished */
	bool quit;
	int forked;		/* atomic: this burst's fork has returned */
	int in_write;		/* atomic: the writer is in perfmap_write_entry() */
	int burst_over;		/* atomic: the writer stopped this burst */
	unsigned int burst_written; /* atomic: entries written in this burst */
	size_t written;		/* entries written in all */
	int err;		/* errno of a failed write */
	bool watch;		/* at_fork_prepare() is on */
	unsigned int overlapped; /* forks while the writer was inside a write */
	off_t fork_size;	/* our map's size at the last fork */
} hm;

static void *hammer(void *arg)
{
	const struct timespec slow = { 0, 1000000 };
	size_t k;

	(void)arg;
	pthread_mutex_lock(&hm.mu);
	for (;;) {
		while (hm.done == hm.granted && !hm.quit)
			pthread_cond_wait(&hm.cv, &hm.mu);
		if (hm.done == hm.granted)
			break;
		pthread_mutex_unlock(&hm.mu);
		for (k = 0; !__atomic_load_n(&hm.forked, __ATOMIC_ACQUIRE); k++) {
			if (k >= BURST_FAST)
				nanosleep(&slow, NULL);
			__atomic_store_n(&hm.in_write, 1, __ATOMIC_RELEASE);
			if (perfmap_write_entry((void *)(uintptr_t)(0x10000000 + (hm.written + k) * 16),
						16, "hammer_thread_entry"))
				hm.err = errno;
			__atomic_store_n(&hm.in_write, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&hm.burst_written, 1, __ATOMIC_RELEASE);
			if (hm.err)
				break;
			/* The forking thread may be waiting for this CPU. */
			sched_yield();
		}
		__atomic_store_n(&hm.burst_over, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&hm.mu);
		hm.written += k;
		hm.done++;
		pthread_cond_broadcast(&hm.cv);
		if (hm.err)
			break;
	}
	pthread_mutex_unlock(&hm.mu);
	return NULL;
}

/*
 * Registered in main() before the library registers its own fork handlers
 * (on first use), so it runs after the library's prepare handler, which
 * holds the writer's lock: prepare handlers run in the reverse order of
 * registration. With the lock held, a writer that enters
 * perfmap_write_entry() stays in it until the fork is over: wait for that
 * (unless a write failed). And our map's size is what the child copies.
 */
static void at_fork_prepare(void)
{
	struct stat st;

	if (!hm.watch)
		return;
	while (!__atomic_load_n(&hm.in_write, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&hm.burst_over, __ATOMIC_ACQUIRE))
		sched_yield();
	hm.overlapped += __atomic_load_n(&hm.in_write, __ATOMIC_ACQUIRE);
	hm.fork_size = stat(tu_map_path(dir, getpid()), &st) ? -1 : st.st_size;
}

/*
 * The child's map is its copy of ours, then its own line; the copy is all
 * our map held when it forked, which starts with the first entry.
 */
static void assert_child_copy(pid_t child)
{
	static const char own[] = "2000 10 child_line\n";
	const size_t own_len = sizeof(own) - 1;
	size_t len, plen, copy;
	char *buf, *pbuf;

	buf = tu_read(tu_map_path(dir, child), &len);
	assert_non_null(buf);
	pbuf = own_map(&plen);
	assert_non_null(pbuf);
	assert_true(len >= own_len);
	copy = len - own_len;
	assert_memory_equal(buf + copy, own, own_len);
	assert_int_equal(copy, hm.fork_size);
	assert_true(copy >= 23 && copy <= plen);
	assert_memory_equal(buf, "1000 10 before_threads\n", 23);
	assert_memory_equal(buf, pbuf, copy);
	free(pbuf);
	free(buf);
	/* Kept, 200 copies would add up. */
	assert_int_equal(unlink(tu_map_path(dir, child)), 0);
}

/* Forks land while another thread writes: no deadlock, children copy whole lines. */
static void test_fork_while_writing(void **state)
{
	pthread_t tid;
	size_t len;
	char *buf;
	pid_t child;
	int i;

	(void)state;
	memset(&hm, 0, sizeof(hm));
	pthread_mutex_init(&hm.mu, NULL);
	pthread_cond_init(&hm.cv, NULL);
	alarm(120);  /* a deadlock fails the test instead of hanging make test */
	assert_int_equal(perfmap_set_persist_after_fork(1), 0);
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "before_threads"), 0);
	assert_int_equal(pthread_create(&tid, NULL, hammer, NULL), 0);
	hm.watch = true;
	for (i = 0; i < FORKS; i++) {
		pthread_mutex_lock(&hm.mu);
		__atomic_store_n(&hm.forked, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&hm.burst_over, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&hm.burst_written, 0, __ATOMIC_RELAXED);
		hm.granted++;
		pthread_cond_broadcast(&hm.cv);
		pthread_mutex_unlock(&hm.mu);
		/*
		 * Fork before the writer's first write, or after a few: the
		 * fork then also waits for a write that holds the lock.
		 */
		while (__atomic_load_n(&hm.burst_written, __ATOMIC_ACQUIRE) < (unsigned int)i % 4 &&
		       !__atomic_load_n(&hm.burst_over, __ATOMIC_ACQUIRE))
			sched_yield();
		child = fork();
		if (!child) {
			alarm(20);
			/* A fork handler that left the lock taken would hang here. */
			_exit(perfmap_write_entry((void *)0x2000, 0x10, "child_line") ? 30 : 0);
		}
		__atomic_store_n(&hm.forked, 1, __ATOMIC_RELEASE);
		assert_true(child > 0);
		assert_int_equal(tu_wait(child), 0);
		pthread_mutex_lock(&hm.mu);
		while (hm.done != hm.granted)
			pthread_cond_wait(&hm.cv, &hm.mu);
		pthread_mutex_unlock(&hm.mu);
		assert_int_equal(hm.err, 0);
		assert_child_copy(child);
	}
	hm.watch = false;
	pthread_mutex_lock(&hm.mu);
	hm.quit = true;
	pthread_cond_broadcast(&hm.cv);
	pthread_mutex_unlock(&hm.mu);
	assert_int_equal(pthread_join(tid, NULL), 0);
	alarm(0);
	print_message("%u of %d forks with a write under way; %zu writes\n",
		      hm.overlapped, FORKS, hm.written);
	assert_int_equal(hm.overlapped, FORKS);
	buf = own_map(&len);
	assert_non_null(buf);
	assert_intact_lines(buf, len, 1 + hm.written);
	free(buf);
	pthread_cond_destroy(&hm.cv);
	pthread_mutex_destroy(&hm.mu);
}

static void test_unwritable_dir(void **state)
{
	pid_t child;
	int st;

	(void)state;
	setenv("PERFMAP_DIR", "/nonexistent/perfmap-test", 1);
	errno = 0;
	assert_int_equal(perfmap_init(), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "lost"), -1);
	assert_int_equal(errno, ENOENT);

	/* Root writes anywhere: check as an unprivileged user. */
	setenv("PERFMAP_DIR", dir, 1);
	assert_int_equal(chmod(dir, 0555), 0);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		if (geteuid() == 0 && (setresgid(65534, 65534, 65534) ||
				       setresuid(65534, 65534, 65534)))
			_exit(99);
		_exit(perfmap_init() == -1 ? errno : 0);
	}
	st = tu_wait(child);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(st, EACCES);
}

static void test_symlink_refused(void **state)
{
	char target[4096];
	size_t len;
	char *buf;

	(void)state;
	snprintf(target, sizeof(target), "%s/victim", dir);
	tu_write(target, "precious\n", 9);
	assert_int_equal(symlink(target, tu_map_path(dir, getpid())), 0);
	errno = 0;
	assert_int_equal(perfmap_init(), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(perfmap_write_entry((void *)0x1000, 0x10, "evil"), -1);
	buf = tu_read(target, &len);
	assert_string_equal(buf, "precious\n");
	free(buf);
}

static void test_fifo_and_hardlink_refused(void **state)
{
	char other[4096];
	struct stat st;

	(void)state;
	alarm(10);  /* a FIFO must not hang the writer */
	assert_int_equal(mkfifo(tu_map_path(dir, getpid()), 0600), 0);
	errno = 0;
	assert_int_equal(perfmap_init(), -1);
	assert_int_equal(errno, ENXIO);
	alarm(0);
	assert_int_equal(unlink(tu_map_path(dir, getpid())), 0);

	snprintf(other, sizeof(other), "%s/other", dir);
	tu_write(other, "", 0);
	assert_int_equal(link(other, tu_map_path(dir, getpid())), 0);
	errno = 0;
	assert_int_equal(perfmap_init(), -1);
	assert_int_equal(errno, EMLINK);
	assert_int_equal(stat(other, &st), 0);
	assert_int_equal(st.st_size, 0);
}

static void test_other_owner_refused(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();  /* only root can give a file away */
	tu_write(tu_map_path(dir, getpid()), "", 0);
	assert_int_equal(chown(tu_map_path(dir, getpid()), 65534, 65534), 0);
	errno = 0;
	assert_int_equal(perfmap_init(), -1);
	assert_int_equal(errno, EPERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_mode_and_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_sanitized, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_sanitized_random, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_name_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_fini_idempotent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_never_tear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_processes_never_tear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_default_child_gets_own_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_persist_child_starts_with_parent_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_while_writing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritable_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_and_hardlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_owner_refused, setup, teardown),
	};

	/* Before the library's own: see at_fork_prepare(). */
	if (pthread_atfork(at_fork_prepare, NULL, NULL))
		return 1;
	/* A fini without any init before it must be harmless. */
	perfmap_fini();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

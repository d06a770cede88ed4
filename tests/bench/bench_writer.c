/* make bench: the writer's cost per entry beside a plain write() and CPython's own writer. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perfmap.h"

/*
 * Every configuration runs once per round, rounds interleave them, and the
 * median round is reported: on a shared, noisy machine the ratios between
 * configurations measured side by side are what means something.
 */
#define ROUNDS 5
#define MAX_THREADS 8
#define BATCH 256

enum kind { PLAIN_WRITE, PERFMAP_ONE, PERFMAP_BATCH, CPYTHON };

struct config {
	const char *label;
	enum kind kind;
	int threads;
	double ns[ROUNDS];
};

typedef int (*py_write_fn)(const void *, unsigned int, const char *);
typedef int (*py_init_fn)(void);
typedef void (*py_fini_fn)(void);

static py_write_fn py_write;
static py_init_fn py_init;
static py_fini_fn py_fini;
static char py_label[512];
static char bench_dir[256];
static long per_thread;
static int plain_fd = -1;

struct worker {
	enum kind kind;
	int id;
	pthread_barrier_t *go;
};

/*
 * A JIT has its names already: the benchmark cycles through names made
 * beforehand, so formatting them is not counted as the writer's cost.
 */
#define NAMES 1024
static char names[MAX_THREADS][NAMES][64];

static void make_names(void)
{
	int t, i;

	/* CPython's shape of name: py::qualname:file. */
	for (t = 0; t < MAX_THREADS; t++)
		for (i = 0; i < NAMES; i++)
			snprintf(names[t][i], sizeof(names[t][i]),
				 "py::handler_%d_%d:/srv/app/views.py", t, i);
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct perfmap_entry batch[BATCH];
	char (*name)[64] = names[w->id];
	uintptr_t base = 0x7f0000000000u + ((uintptr_t)w->id << 36);
	char line[160];
	long i, k;
	int n;

	pthread_barrier_wait(w->go);
	for (i = 0; i < per_thread; i++) {
		switch (w->kind) {
		case PLAIN_WRITE:
			/* What a runtime without a library does: format, write(). */
			n = snprintf(line, sizeof(line), "%lx %x %s\n",
				     (unsigned long)(base + (uintptr_t)i * 64), 64,
				     name[i % NAMES]);
			if (write(plain_fd, line, (size_t)n) != n)
				abort();
			break;
		case PERFMAP_ONE:
			if (perfmap_write_entry((void *)(base + (uintptr_t)i * 64), 64,
						name[i % NAMES]))
				abort();
			break;
		case CPYTHON:
			if (py_write((void *)(base + (uintptr_t)i * 64), 64, name[i % NAMES]))
				abort();
			break;
		case PERFMAP_BATCH:
			for (k = 0; k < BATCH && i + k < per_thread; k++)
				batch[k] = (struct perfmap_entry){
					(void *)(base + (uintptr_t)(i + k) * 64), 64,
					name[(i + k) % NAMES] };
			if (perfmap_write_entries(batch, (size_t)k))
				abort();
			i += k - 1;
			break;
		}
	}
	return NULL;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Wall time per entry over all threads: the inverse of throughput. */
static double run_once(enum kind kind, int threads)
{
	struct worker w[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	pthread_barrier_t go;
	char path[512];
	double t0, t1;
	int i;

	snprintf(path, sizeof(path), "%s/plain.map", bench_dir);
	if (kind == PLAIN_WRITE)
		plain_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	/*
	 * CPython opens its map on the main thread at start-up. Its lazy
	 * open inside PyUnstable_WritePerfMapEntry is not thread-safe: threads
	 * racing into it each make a lock, and the benchmark deadlocked on it.
	 */
	if (kind == CPYTHON && py_init())
		abort();
	pthread_barrier_init(&go, NULL, (unsigned int)threads + 1);
	for (i = 0; i < threads; i++) {
		w[i] = (struct worker){ kind, i, &go };
		pthread_create(&tid[i], NULL, worker, &w[i]);
	}
	t0 = now_ns();
	pthread_barrier_wait(&go);
	for (i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t1 = now_ns();
	pthread_barrier_destroy(&go);

	/* Start every run from an empty file. */
	if (kind == PLAIN_WRITE) {
		close(plain_fd);
		unlink(path);
	} else if (kind == CPYTHON) {
		py_fini();
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		unlink(path);
	} else {
		perfmap_fini();
		snprintf(path, sizeof(path), "%s/perf-%d.map", bench_dir, (int)getpid());
		unlink(path);
	}
	return (t1 - t0) / ((double)per_thread * threads);
}

/* A CPython 3.12+ shared library: $PERFMAP_BENCH_LIBPYTHON, else the usual places. */
static void load_cpython(void)
{
	static const char *const patterns[] = {
		"/root/.pyenv/versions/3.1[2-9]*/lib/libpython3.1[2-9].so",
		"/usr/local/lib/libpython3.1[2-9].so",
		"/usr/lib/x86_64-linux-gnu/libpython3.1[2-9].so*",
	};
	const char *env = getenv("PERFMAP_BENCH_LIBPYTHON");
	char pattern[512];
	const char *home = getenv("HOME");
	glob_t g = { 0 };
	void *h = NULL;
	size_t i;

	if (env && (h = dlopen(env, RTLD_NOW | RTLD_LOCAL)))
		snprintf(py_label, sizeof(py_label), "%s", env);
	for (i = 0; !h && i <= sizeof(patterns) / sizeof(patterns[0]); i++) {
		if (i == 0 && !home)
			continue;
		if (i == 0)
			snprintf(pattern, sizeof(pattern),
				 "%s/.pyenv/versions/3.1[2-9]*/lib/libpython3.1[2-9].so", home);
		else
			snprintf(pattern, sizeof(pattern), "%s", patterns[i - 1]);
		if (!glob(pattern, 0, NULL, &g) && g.gl_pathc &&
		    (h = dlopen(g.gl_pathv[0], RTLD_NOW | RTLD_LOCAL)))
			snprintf(py_label, sizeof(py_label), "%s", g.gl_pathv[0]);
		globfree(&g);
	}
	if (!h)
		return;
	py_write = (py_write_fn)dlsym(h, "PyUnstable_WritePerfMapEntry");
	py_init = (py_init_fn)dlsym(h, "PyUnstable_PerfMapState_Init");
	py_fini = (py_fini_fn)dlsym(h, "PyUnstable_PerfMapState_Fini");
	if (!py_write || !py_init || !py_fini) {
		py_write = NULL;
		return;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(struct config *c)
{
	double v[ROUNDS];

	memcpy(v, c->ns, sizeof(v));
	qsort(v, ROUNDS, sizeof(v[0]), cmp_double);
	return v[ROUNDS / 2];
}

static struct config *find(struct config *c, size_t n, enum kind kind, int threads)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i].kind == kind && c[i].threads == threads)
			return &c[i];
	return NULL;
}

static void goal(const char *what, double ratio, double want)
{
	printf("  %-52s %6.2fx  (goal >= %.0fx)  %s\n", what, ratio, want,
	       ratio >= want ? "MET" : "MISSED");
}

int main(int argc, char **argv)
{
	struct config configs[8];
	struct config *one, *eight, *batch, *py8, *py1;
	size_t n = 0, i;
	int round;

	per_thread = argc > 1 ? atol(argv[1]) : 200000;
	snprintf(bench_dir, sizeof(bench_dir), "/tmp/perfmap-bench.XXXXXX");
	/* Beside /tmp/perf-<pid>.map, where CPython writes: same filesystem. */
	if (!mkdtemp(bench_dir)) {
		perror("mkdtemp");
		return 1;
	}
	setenv("PERFMAP_DIR", bench_dir, 1);
	make_names();
	load_cpython();

	configs[n++] = (struct config){ "plain write() per line", PLAIN_WRITE, 1, { 0 } };
	configs[n++] = (struct config){ "perfmap_write_entry", PERFMAP_ONE, 1, { 0 } };
	configs[n++] = (struct config){ "perfmap_write_entries (256 per call)", PERFMAP_BATCH, 1, { 0 } };
	if (py_write)
		configs[n++] = (struct config){ "CPython", CPYTHON, 1, { 0 } };
	configs[n++] = (struct config){ "plain write() per line", PLAIN_WRITE, 8, { 0 } };
	configs[n++] = (struct config){ "perfmap_write_entry", PERFMAP_ONE, 8, { 0 } };
	configs[n++] = (struct config){ "perfmap_write_entries (256 per call)", PERFMAP_BATCH, 8, { 0 } };
	if (py_write)
		configs[n++] = (struct config){ "CPython", CPYTHON, 8, { 0 } };

	for (round = 0; round < ROUNDS; round++)
		for (i = 0; i < n; i++)
			configs[i].ns[round] = run_once(configs[i].kind, configs[i].threads);
	rmdir(bench_dir);

	printf("writer: %ld entries per thread, median of %d interleaved rounds, %ld CPUs\n",
	       per_thread, ROUNDS, sysconf(_SC_NPROCESSORS_ONLN));
	printf("  %-40s %7s %10s %12s\n", "", "threads", "ns/entry", "entries/s");
	for (i = 0; i < n; i++)
		printf("  %-40s %7d %10.1f %12.0f\n", configs[i].kind == CPYTHON ?
		       "CPython PyUnstable_WritePerfMapEntry" : configs[i].label,
		       configs[i].threads, median(&configs[i]), 1e9 / median(&configs[i]));
	if (py_write)
		printf("  (CPython from %s, loaded with dlopen)\n", py_label);
	else
		printf("  CPython 3.12+ shared library not found: CPython rows skipped "
		       "(set PERFMAP_BENCH_LIBPYTHON)\n");

	printf("goals:\n");
	one = find(configs, n, PERFMAP_ONE, 1);
	eight = find(configs, n, PERFMAP_ONE, 8);
	batch = find(configs, n, PERFMAP_BATCH, 1);
	py1 = find(configs, n, CPYTHON, 1);
	py8 = find(configs, n, CPYTHON, 8);
	if (py8)
		goal("8 threads: perfmap_write_entry vs CPython throughput",
		     median(py8) / median(eight), 2);
	if (py1)
		printf("  %-52s %6.2fx\n", "1 thread: perfmap_write_entry vs CPython throughput",
		       median(py1) / median(one));
	goal("batch vs single-entry writes, 1 thread", median(one) / median(batch), 10);
	return 0;
}

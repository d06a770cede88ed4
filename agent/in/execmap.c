/*
 * Executable mappings as the kernel reports them to perf. A dummy software
 * event on each CPU, with attr.mmap and attr.mmap2, has the kernel write a
 * PERF_RECORD_MMAP2 into our ring at every executable mmap() and at every
 * mprotect() that adds PROT_EXEC, in every process, and costs nothing on
 * any other system call: unlike a syscall tracepoint, it does not send every
 * task's every system call down the slow path. It says nothing of munmap():
 * what is mapped now is /proc/<pid>/maps's to tell. Records are read at the
 * ring's watermark or at the agent's tick, whichever comes first: nothing
 * here needs them within a millisecond, and a wake-up per exec would cost
 * more than the records do.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "in/execmap.h"
#include "lib/mapname.h"
#include "perfmap_tools.h"

/* The sample id perf appends to every record: sample_type TID | TIME. */
struct sample_id {
	uint32_t pid, tid;
	uint64_t time;
};

struct mmap2_head {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	/* char filename[], NUL-padded to 8 bytes; then struct sample_id */
};

struct lost_rec {
	struct perf_event_header h;
	uint64_t id, lost;
};

struct ring {
	int fd;
	void *base;
	size_t size;          /* data pages, a power of two */
	uint64_t mark;        /* execmap__mark(): records up to here are read next */
	bool marked;
};

struct execmap {
	struct ring *rings;
	unsigned int n;
	size_t page;
	int epfd;
	execmap_fn fn;
	void *ctx;
	uint64_t lost, seen, bad;
	char tmp[1u << 16];   /* a record that wraps around the ring's end */
};

const char *execmap_source_name(enum execmap_source src)
{
	switch (src) {
	case EXECMAP_SRC_PERF: return "perf-mmap2";
	case EXECMAP_SRC_PROCFS: return "procfs";
	case EXECMAP_SRC_OFF: return "off";
	default: return "auto";
	}
}

static bool has_prefix(const char *s, size_t len, const char *p)
{
	size_t n = strlen(p);

	return len >= n && !memcmp(s, p, n);
}

enum execmap_kind execmap_kind_of(const char *name, size_t len, bool shared)
{
	/*
	 * perf's own test (tools/perf/util/map.c, is_anon_memory() and
	 * is_no_dso_memory()): these names are looked up in perf-<pid>.map.
	 * The kernel names a file-less mapping "//anon", "[heap]" or "[stack]".
	 */
	if ((len == 6 && !memcmp(name, "//anon", 6)) || has_prefix(name, len, "/dev/zero") ||
	    has_prefix(name, len, "/anon_hugepage") || has_prefix(name, len, "[heap]") ||
	    has_prefix(name, len, "[stack") || has_prefix(name, len, "/SYSV"))
		return EXECMAP_ANON;
	/*
	 * A memfd is a file to perf: it never reads a map for it. Shared, it is
	 * code a JIT writes through another view (.NET's double mapping); private,
	 * it is an ELF file executed from memory (runc, sandboxes): not JIT code.
	 */
	if (has_prefix(name, len, "/memfd:"))
		return shared ? EXECMAP_MEMFD : EXECMAP_FILE;
	return EXECMAP_FILE;
}

static int parse_mmap2(const unsigned char *p, size_t len, struct execmap_rec *out)
{
	struct mmap2_head m;
	struct sample_id sid;
	size_t name_len;
	const char *name;

	if (len < sizeof(m) + sizeof(sid) || len % 8)
		return -EINVAL;
	memcpy(&m, p, sizeof(m));
	memcpy(&sid, p + len - sizeof(sid), sizeof(sid));
	name = (const char *)p + sizeof(m);
	name_len = strnlen(name, len - sizeof(m) - sizeof(sid));
	if (name_len == len - sizeof(m) - sizeof(sid))
		return -EINVAL;  /* no NUL: not a record the kernel wrote */
	if (!(m.prot & PROT_EXEC) || !m.len || m.addr + m.len < m.addr)
		return 0;
	*out = (struct execmap_rec){
		.pid = (pid_t)m.pid, .addr = m.addr, .len = m.len, .prot = m.prot,
		.kind = execmap_kind_of(name, name_len, m.flags & MAP_SHARED), .ts_ns = sid.time,
	};
	/* A jitdump producer maps its dump executable so that perf finds it (perf's jitdump.c). */
	if (out->kind == EXECMAP_FILE && perfmap__jitdump_name_pid(name, name_len)) {
		out->kind = EXECMAP_JITDUMP;
		out->path = name;
		out->maj = m.maj;
		out->min = m.min;
		out->ino = m.ino;
	}
	return out->kind == EXECMAP_FILE ? 0 : 1;
}

int execmap_parse(const void *rec, size_t len, struct execmap_rec *out, uint64_t *lost)
{
	struct perf_event_header h;
	struct lost_rec l;

	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (h.size != len)
		return -EINVAL;
	switch (h.type) {
	case PERF_RECORD_MMAP2:
		return parse_mmap2(rec, len, out);
	case PERF_RECORD_LOST:
		if (len < sizeof(l))
			return -EINVAL;
		memcpy(&l, rec, sizeof(l));
		*lost += l.lost;
		return 0;
	default:
		/* FORK and EXIT come with attr.mmap; the BPF program has those. */
		return 0;
	}
}

static int perf_open(struct perf_event_attr *a, int cpu)
{
	return (int)syscall(SYS_perf_event_open, a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static int ring_open(struct execmap *em, struct ring *r, int cpu, unsigned int pages)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_DUMMY,
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
		.mmap = 1,
		.mmap2 = 1,
		.sample_id_all = 1,
		.watermark = 1,
		/* Half the ring: woken rarely, and the tick reads the rest. */
		.wakeup_watermark = (uint32_t)(pages * em->page / 2),
		.use_clockid = 1,
		.clockid = CLOCK_BOOTTIME,
	};
	struct epoll_event e = { .events = EPOLLIN };

	r->fd = perf_open(&a, cpu);
	if (r->fd < 0)
		return -errno;
	r->size = pages * em->page;
	r->base = mmap(NULL, r->size + em->page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		r->base = NULL;
		return -errno;
	}
	return epoll_ctl(em->epfd, EPOLL_CTL_ADD, r->fd, &e) ? -errno : 0;
}

static void ring_close(struct execmap *em, struct ring *r)
{
	if (r->base)
		munmap(r->base, r->size + em->page);
	if (r->fd >= 0)
		close(r->fd);
}

struct execmap *execmap__open(unsigned int ring_pages, execmap_fn fn, void *ctx)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	struct execmap *em;
	unsigned int i;
	int err = 0;

	if (ncpu < 1 || ring_pages & (ring_pages - 1)) {
		errno = EINVAL;
		return NULL;
	}
	em = calloc(1, sizeof(*em));
	if (!em)
		return NULL;
	em->fn = fn;
	em->ctx = ctx;
	em->page = (size_t)sysconf(_SC_PAGESIZE);
	em->epfd = epoll_create1(EPOLL_CLOEXEC);
	em->rings = calloc((size_t)ncpu, sizeof(*em->rings));
	if (em->epfd < 0 || !em->rings) {
		err = -errno ?: -ENOMEM;
		goto free_em;
	}
	for (i = 0; i < (unsigned int)ncpu; i++) {
		em->rings[em->n].fd = -1;
		err = ring_open(em, &em->rings[em->n], (int)i, ring_pages);
		if (err == -ENODEV) {  /* an offline CPU */
			ring_close(em, &em->rings[em->n]);
			err = 0;
			continue;
		}
		em->n++;
		if (err)
			goto free_em;
	}
	if (!em->n) {
		err = -ENODEV;
		goto free_em;
	}
	return em;
free_em:
	execmap__free(em);
	errno = -err;
	return NULL;
}

void execmap__free(struct execmap *em)
{
	unsigned int i;

	if (!em)
		return;
	for (i = 0; i < em->n; i++)
		ring_close(em, &em->rings[i]);
	free(em->rings);
	if (em->epfd >= 0)
		close(em->epfd);
	free(em);
}

int execmap__fd(const struct execmap *em)
{
	return em->epfd;
}

static void handle(struct execmap *em, const void *rec, size_t len)
{
	struct execmap_rec out;
	int ret = execmap_parse(rec, len, &out, &em->lost);

	if (ret < 0) {
		em->bad++;
		return;
	}
	if (ret > 0) {
		em->seen++;
		em->fn(em->ctx, &out);
	}
}

static int ring_drain(struct execmap *em, struct ring *r)
{
	struct perf_event_mmap_page *pg = r->base;
	const unsigned char *data = (const unsigned char *)r->base + em->page;
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = pg->data_tail;

	/* What was queued before the process events the caller read since the mark. */
	if (r->marked && r->mark < head)
		head = r->mark;
	r->marked = false;
	struct perf_event_header h;
	size_t off, first;
	int n = 0;

	while (tail + sizeof(h) <= head) {
		off = tail & (r->size - 1);
		first = r->size - off;
		if (first >= sizeof(h)) {
			memcpy(&h, data + off, sizeof(h));
		} else {
			memcpy(&h, data + off, first);
			memcpy((char *)&h + first, data, sizeof(h) - first);
		}
		if (h.size < sizeof(h) || tail + h.size > head) {
			/* The kernel writes whole records: what is left is not one. */
			em->bad++;
			tail = head;
			break;
		}
		if (first >= h.size) {
			handle(em, data + off, h.size);
		} else {
			memcpy(em->tmp, data + off, first);
			memcpy(em->tmp + first, data, h.size - first);
			handle(em, em->tmp, h.size);
		}
		tail += h.size;
		n++;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

void execmap__mark(struct execmap *em)
{
	struct perf_event_mmap_page *pg;
	unsigned int i;

	for (i = 0; i < em->n; i++) {
		pg = em->rings[i].base;
		em->rings[i].mark = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		em->rings[i].marked = true;
	}
}

int execmap__consume(struct execmap *em)
{
	struct epoll_event evs[16];
	unsigned int i;
	int n = 0;

	/* The epoll fd is only a doorbell: every ring is read each time. */
	while (epoll_wait(em->epfd, evs, 16, 0) > 0)
		;
	for (i = 0; i < em->n; i++)
		n += ring_drain(em, &em->rings[i]);
	return n;
}

uint64_t execmap__lost(const struct execmap *em)
{
	return em->lost;
}

uint64_t execmap__seen(const struct execmap *em)
{
	return em->seen;
}

unsigned int execmap__cpus(const struct execmap *em)
{
	return em->n;
}

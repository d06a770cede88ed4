/*
 * A perf.data reader for `perfmapctl restore --perf-data`: the file header,
 * the attributes (how samples are laid out), the data section's records
 * (COMM, FORK, EXIT, MMAP, MMAP2, SAMPLE) and the HEADER_CLOCK_DATA feature.
 * The layout is perf's (tools/perf/Documentation/perf.data-file-format.txt,
 * include/uapi/linux/perf_event.h). Any bytes at all may come in: every read
 * is bounds-checked, and the memory used is bounded (perfdata.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perfdata.h"

#define PERF_MAGIC2 0x32454c4946524550ULL           /* "PERFILE2", little-endian */
#define PERF_MAGIC2_SWAPPED 0x50455246494c4532ULL
#define FILE_HEADER_SIZE 104                         /* perf_file_header, 256 feature bits */
#define PIPE_HEADER_SIZE 16
#define ATTR_SIZE_VER0 64
#define FILE_SECTION_SIZE 16
#define HEADER_CLOCK_DATA 29
#define HEADER_FEAT_BITS 256

enum {
	REC_MMAP = 1,
	REC_COMM = 3,
	REC_EXIT = 4,
	REC_FORK = 7,
	REC_SAMPLE = 9,
	REC_MMAP2 = 10,
	REC_COMPRESSED = 81,
	REC_COMPRESSED2 = 83,
};

#define MISC_MMAP_DATA (1u << 13)
#define PROT_EXEC_BIT 4u
#define SAMPLE_IP (1ull << 0)
#define SAMPLE_TID (1ull << 1)
#define SAMPLE_IDENTIFIER (1ull << 16)
/* The sample_type bits that place the pid in a sample. */
#define SAMPLE_PID_BITS (SAMPLE_IP | SAMPLE_TID | SAMPLE_IDENTIFIER)
#define MAX_ANCESTORS 32

struct cursor {
	const uint8_t *buf;
	size_t len;
};

static bool get_u64(const struct cursor *c, uint64_t off, uint64_t *v)
{
	if (off > c->len || c->len - off < 8)
		return false;
	memcpy(v, c->buf + off, 8);
	return true;
}

static bool get_u32(const struct cursor *c, uint64_t off, uint32_t *v)
{
	if (off > c->len || c->len - off < 4)
		return false;
	memcpy(v, c->buf + off, 4);
	return true;
}

/* A section {offset, size} at @at that lies inside the buffer. */
static bool get_section(const struct cursor *c, uint64_t at, uint64_t *off, uint64_t *size)
{
	return get_u64(c, at, off) && get_u64(c, at + 8, size) && *off <= c->len &&
	       *size <= c->len - *off;
}

/* ---- pids: open addressing, pid 0 marks a free slot ---- */

static size_t slot_of(const struct perfdata *pd, int32_t pid)
{
	size_t i = ((uint32_t)pid * 2654435761u) & (pd->cap - 1);

	while (pd->pids[i].pid && pd->pids[i].pid != pid)
		i = (i + 1) & (pd->cap - 1);
	return i;
}

static int grow(struct perfdata *pd)
{
	struct perfdata_pid *old = pd->pids;
	size_t i, old_cap = pd->cap;

	pd->cap = old_cap ? old_cap * 2 : 64;
	pd->pids = calloc(pd->cap, sizeof(*pd->pids));
	if (!pd->pids) {
		pd->pids = old;
		pd->cap = old_cap;
		return -ENOMEM;
	}
	for (i = 0; i < old_cap; i++)
		if (old[i].pid)
			pd->pids[slot_of(pd, old[i].pid)] = old[i];
	free(old);
	return 0;
}

/* The entry of @pid, made if new; NULL with @err set when it cannot be. */
static struct perfdata_pid *pid_entry(struct perfdata *pd, int32_t pid, int *err)
{
	size_t i;

	if (pd->cap && pd->pids[i = slot_of(pd, pid)].pid)
		return &pd->pids[i];
	if (pd->npids >= PERFDATA_MAX_PIDS) {
		*err = -E2BIG;
		return NULL;
	}
	if (pd->npids * 2 >= pd->cap) {
		*err = grow(pd);
		if (*err)
			return NULL;
	}
	i = slot_of(pd, pid);
	pd->pids[i].pid = pid;
	pd->npids++;
	return &pd->pids[i];
}

const struct perfdata_pid *perfdata_find(const struct perfdata *pd, int32_t pid)
{
	size_t i;

	if (!pd->cap || pid <= 0)
		return NULL;
	i = slot_of(pd, pid);
	return pd->pids[i].pid ? &pd->pids[i] : NULL;
}

static int add_pid(struct perfdata *pd, int32_t pid)
{
	int err = 0;

	if (pid <= 0)
		return 0;
	return pid_entry(pd, pid, &err) ? 0 : err;
}

static int add_region(struct perfdata *pd, int32_t pid, uint64_t start, uint64_t len)
{
	struct perfdata_region *nr;
	struct perfdata_pid *p;
	int err = 0;
	uint32_t cap;

	if (pid <= 0 || !len || start + len < start)
		return 0;
	p = pid_entry(pd, pid, &err);
	if (!p)
		return err;
	if (p->nregions >= PERFDATA_MAX_REGIONS) {
		pd->regions_dropped++;
		return 0;
	}
	if (p->nregions == p->cap) {
		cap = p->cap ? p->cap * 2 : 4;
		nr = realloc(p->regions, cap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		p->regions = nr;
		p->cap = cap;
	}
	p->regions[p->nregions++] = (struct perfdata_region){ start, len };
	return 0;
}

bool perfdata_anon_name(const char *name, size_t len)
{
	/* What perf takes for anonymous memory, and so looks up in /tmp/perf-<pid>.map. */
	static const char *const prefixes[] = { "/dev/zero", "/anon_hugepage", "[anon:" };
	size_t i;

	if (len == 6 && !memcmp(name, "//anon", 6))
		return true;
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (len >= strlen(prefixes[i]) && !memcmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* ---- records ---- */

struct layout {
	bool known;           /* every attr places the pid alike */
	uint64_t bits;        /* their SAMPLE_PID_BITS */
};

static int on_mmap(struct perfdata *pd, const struct cursor *c, uint64_t off, uint32_t size,
		   bool v2, uint16_t misc)
{
	uint64_t addr, len, name_off = off + (v2 ? 72 : 40);
	uint32_t pid, prot = 0;
	const char *name;
	size_t n;
	bool exec;
	int err;

	if (name_off > off + size || !get_u32(c, off + 8, &pid) || !get_u64(c, off + 16, &addr) ||
	    !get_u64(c, off + 24, &len) || (v2 && !get_u32(c, off + 64, &prot)))
		return -EINVAL;
	err = add_pid(pd, (int32_t)pid);
	if (err)
		return err;
	exec = v2 ? prot & PROT_EXEC_BIT : !(misc & MISC_MMAP_DATA);
	name = (const char *)c->buf + name_off;
	n = strnlen(name, off + size - name_off);
	if (!exec || !perfdata_anon_name(name, n))
		return 0;
	return add_region(pd, (int32_t)pid, addr, len);
}

static int on_fork(struct perfdata *pd, const struct cursor *c, uint64_t off)
{
	struct perfdata_pid *p;
	uint32_t pid, ppid;
	int err = 0;

	if (!get_u32(c, off + 8, &pid) || !get_u32(c, off + 12, &ppid))
		return -EINVAL;
	if ((int32_t)pid <= 0)
		return 0;
	p = pid_entry(pd, (int32_t)pid, &err);
	if (!p)
		return err;
	/* A new thread forks within its process: only a new process has a parent to inherit from. */
	if (pid != ppid && (int32_t)ppid > 0)
		p->ppid = (int32_t)ppid;
	return 0;
}

static int on_sample(struct perfdata *pd, const struct cursor *c, uint64_t off, uint32_t size,
		     const struct layout *lo)
{
	uint64_t at = off + 8;
	struct perfdata_pid *p;
	uint32_t pid;
	int err = 0;

	if (!lo->known || !(lo->bits & SAMPLE_TID)) {
		pd->samples_unattributed++;
		return 0;
	}
	at += lo->bits & SAMPLE_IDENTIFIER ? 8 : 0;
	at += lo->bits & SAMPLE_IP ? 8 : 0;
	if (at + 4 > off + size || !get_u32(c, at, &pid))
		return -EINVAL;
	if ((int32_t)pid <= 0)
		return 0;
	p = pid_entry(pd, (int32_t)pid, &err);
	if (!p)
		return err;
	p->samples++;
	return 0;
}

static int on_record(struct perfdata *pd, const struct cursor *c, uint64_t off, uint32_t type,
		     uint16_t misc, uint32_t size, const struct layout *lo)
{
	uint32_t pid;

	switch (type) {
	case REC_MMAP:
	case REC_MMAP2:
		return on_mmap(pd, c, off, size, type == REC_MMAP2, misc);
	case REC_COMM:
	case REC_EXIT:
		if (!get_u32(c, off + 8, &pid) || size < 16)
			return -EINVAL;
		return add_pid(pd, (int32_t)pid);
	case REC_FORK:
		return size < 24 ? -EINVAL : on_fork(pd, c, off);
	case REC_SAMPLE:
		return on_sample(pd, c, off, size, lo);
	case REC_COMPRESSED:
	case REC_COMPRESSED2:
		return -EOPNOTSUPP;
	}
	return 0;
}

static int read_records(struct perfdata *pd, const struct cursor *c, uint64_t off, uint64_t end,
			const struct layout *lo, const char **why)
{
	uint32_t type, hdr;
	uint16_t misc, size;
	int err;

	while (off < end) {
		if (end - off < 8 || !get_u32(c, off, &type) || !get_u32(c, off + 4, &hdr)) {
			*why = "a record is cut short by the end of the data section";
			return pd->truncated ? 0 : -EINVAL;
		}
		misc = (uint16_t)hdr;
		size = (uint16_t)(hdr >> 16);
		if (size < 8 || size > end - off) {
			*why = size < 8 ? "a record shorter than its header" :
					  "a record runs past the end of the data section";
			/* A recording that was not stopped cleanly ends in a partial record. */
			return pd->truncated && size >= 8 ? 0 : -EINVAL;
		}
		if (++pd->records > PERFDATA_MAX_RECORDS) {
			*why = "more records than perfmapctl reads (64M)";
			return -E2BIG;
		}
		err = on_record(pd, c, off, type, misc, size, lo);
		if (err) {
			*why = err == -EOPNOTSUPP ? "its records are compressed (perf record -z); "
						    "'perf inject -i FILE -o OUT' writes them plain" :
			       err == -E2BIG ? "more processes than perfmapctl reads (1M)" :
			       err == -ENOMEM ? "out of memory" : "a malformed record";
			return err;
		}
		off += size;
	}
	return 0;
}

/* ---- the header ---- */

static int read_attrs(const struct cursor *c, uint64_t attr_size, struct layout *lo,
		      const char **why)
{
	uint64_t off, size, n, i, st;

	if (!get_section(c, 24, &off, &size)) {
		*why = "its attribute section lies outside the file";
		return -EINVAL;
	}
	if (attr_size < ATTR_SIZE_VER0 + FILE_SECTION_SIZE || attr_size > 4096 ||
	    size % attr_size) {
		*why = "its attributes have an unknown size";
		return -EINVAL;
	}
	n = size / attr_size;
	if (n > PERFDATA_MAX_ATTRS) {
		*why = "more event attributes than perfmapctl reads (4096)";
		return -E2BIG;
	}
	lo->known = n > 0;
	for (i = 0; i < n; i++) {
		/* perf_event_attr.sample_type, 24 bytes in. */
		if (!get_u64(c, off + i * attr_size + 24, &st))
			return -EINVAL;
		if (i && (st & SAMPLE_PID_BITS) != lo->bits)
			lo->known = false;
		lo->bits = st & SAMPLE_PID_BITS;
	}
	return 0;
}

/* HEADER_CLOCK_DATA: u32 version, u32 clockid, u64 wall-clock ns, u64 clockid ns. */
static void read_clock(struct perfdata *pd, const struct cursor *c, uint64_t feat_off)
{
	uint64_t bits[HEADER_FEAT_BITS / 64], off, size, wall;
	unsigned int i, nth = 0;

	for (i = 0; i < HEADER_FEAT_BITS / 64; i++)
		if (!get_u64(c, 72 + 8 * i, &bits[i]))
			return;
	if (!(bits[HEADER_CLOCK_DATA / 64] & (1ull << (HEADER_CLOCK_DATA % 64))))
		return;
	/* Its section is the nth of those of the features present, in bit order. */
	for (i = 0; i < HEADER_CLOCK_DATA; i++)
		nth += !!(bits[i / 64] & (1ull << (i % 64)));
	if (!get_section(c, feat_off + (uint64_t)nth * FILE_SECTION_SIZE, &off, &size) ||
	    size < 24 || !get_u64(c, off + 8, &wall))
		return;
	pd->has_clock = true;
	pd->clock_wall_ns = wall;
}

static int cmp_region(const void *a, const void *b)
{
	const struct perfdata_region *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorted and merged, so that a lookup is a binary search. */
static void merge_regions(struct perfdata_pid *p)
{
	uint32_t i, n = 0;
	uint64_t end;

	if (!p->nregions)
		return;
	qsort(p->regions, p->nregions, sizeof(*p->regions), cmp_region);
	for (i = 1; i < p->nregions; i++) {
		end = p->regions[n].start + p->regions[n].len;
		if (p->regions[i].start <= end) {
			if (p->regions[i].start + p->regions[i].len > end)
				p->regions[n].len = p->regions[i].start + p->regions[i].len -
						    p->regions[n].start;
			continue;
		}
		p->regions[++n] = p->regions[i];
	}
	p->nregions = n + 1;
}

int perfdata_parse(const void *buf, size_t len, struct perfdata *pd, const char **why)
{
	struct cursor c = { buf, len };
	uint64_t magic, hsize, attr_size, off, size;
	struct layout lo = { 0 };
	size_t i;
	int err;

	memset(pd, 0, sizeof(*pd));
	*why = "not a perf.data file";
	if (!get_u64(&c, 0, &magic) || !get_u64(&c, 8, &hsize))
		return -EINVAL;
	if (magic == PERF_MAGIC2_SWAPPED) {
		*why = "written on a machine of the other byte order";
		return -EPROTONOSUPPORT;
	}
	if (magic != PERF_MAGIC2)
		return -EINVAL;
	if (hsize == PIPE_HEADER_SIZE) {
		*why = "written to a pipe ('perf record -o -'); 'perf inject -i FILE -o OUT' makes a file of it";
		return -EPROTONOSUPPORT;
	}
	if (hsize < FILE_HEADER_SIZE || !get_u64(&c, 16, &attr_size)) {
		*why = "its header has an unknown size";
		return -EINVAL;
	}
	err = read_attrs(&c, attr_size, &lo, why);
	if (err)
		return err;
	if (!get_u64(&c, 40, &off) || !get_u64(&c, 48, &size) || off > len) {
		*why = "its data section lies outside the file";
		return -EINVAL;
	}
	/* A data size of 0: perf record did not finish the header; perf reads to the end. */
	if (!size) {
		pd->truncated = true;
		size = len - off;
	}
	if (size > len - off) {
		*why = "its data section lies outside the file";
		return -EINVAL;
	}
	err = read_records(pd, &c, off, off + size, &lo, why);
	if (err)
		return err;
	if (!pd->truncated)
		read_clock(pd, &c, off + size);
	for (i = 0; i < pd->cap; i++)
		if (pd->pids[i].pid)
			merge_regions(&pd->pids[i]);
	*why = NULL;
	return 0;
}

void perfdata_free(struct perfdata *pd)
{
	size_t i;

	for (i = 0; i < pd->cap; i++)
		free(pd->pids[i].regions);
	free(pd->pids);
	memset(pd, 0, sizeof(*pd));
}

static bool own_covers(const struct perfdata_pid *p, uint64_t start, uint64_t len)
{
	uint32_t lo = 0, hi = p->nregions, mid;

	/* The last region starting at or before @start. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->regions[mid].start <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	return start + len >= start &&
	       start + len <= p->regions[lo - 1].start + p->regions[lo - 1].len;
}

bool perfdata_covers(const struct perfdata *pd, int32_t pid, uint64_t start, uint64_t len)
{
	const struct perfdata_pid *p = perfdata_find(pd, pid);
	unsigned int depth;

	/* A forked child runs code it inherited, which perf recorded in the parent. */
	for (depth = 0; p && depth < MAX_ANCESTORS; depth++) {
		if (own_covers(p, start, len))
			return true;
		p = p->ppid ? perfdata_find(pd, p->ppid) : NULL;
	}
	return false;
}

bool perfdata_has_regions(const struct perfdata *pd, int32_t pid, bool inherited)
{
	const struct perfdata_pid *p = perfdata_find(pd, pid);
	unsigned int depth;

	for (depth = 0; p && depth < (inherited ? MAX_ANCESTORS : 1); depth++) {
		if (p->nregions)
			return true;
		p = p->ppid ? perfdata_find(pd, p->ppid) : NULL;
	}
	return false;
}

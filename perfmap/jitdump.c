/* A jitdump (jit-<pid>.dump) read as it grows, as untrusted input: the live functions it names. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* perf's tools/perf/util/jitdump.h: the sizes of the fixed parts, in bytes. */
#define JD_MAGIC 0x4A695444u
#define JD_MAGIC_SWAPPED 0x4454694Au
#define JD_HEADER_SIZE 40u    /* magic version total_size elf_mach pad1 pid timestamp flags */
#define JD_PREFIX_SIZE 16u    /* id total_size timestamp */
#define JD_LOAD_SIZE 56u      /* prefix pid tid vma code_addr code_size code_index */
#define JD_MOVE_SIZE 64u      /* prefix pid tid vma old_code_addr new_code_addr code_size code_index */
#define JD_DEBUG_SIZE 32u     /* prefix code_addr nr_entry */
#define JD_DEBUG_ENTRY_SIZE 16u /* addr lineno discrim, then a NUL-terminated file name */

enum {
	JIT_CODE_LOAD = 0,
	JIT_CODE_MOVE = 1,
	JIT_CODE_DEBUG_INFO = 2,
	JIT_CODE_CLOSE = 3,
};

/* The kernel's PID_MAX_LIMIT (4M on 64-bit): no pid is above it. */
#define JD_PID_MAX (4u << 20)

/* One line entry of a function's table: code at @off bytes into it and on is @line of @file. */
struct jd_line {
	uint32_t off;        /* code sizes are at most PERFMAP_JITDUMP_RECORD_MAX: 32 bits */
	uint32_t line;
	uint32_t file;       /* offset of its NUL-terminated name in the table's pool */
};

/*
 * A function's line table, one allocation: the entries sorted by offset,
 * then the pool of file names. Offsets from the function's start, so that
 * a move keeps it.
 */
struct jd_lines {
	uint64_t bytes;      /* the whole allocation, as counted in stats.lines_bytes */
	uint32_t n;
	struct jd_line e[];  /* then the pool */
};

/*
 * A live function, in a treap ordered by (pid, start): each pid's functions
 * sorted and never overlapping, so a new range finds what it covers by two
 * splits. Random priorities keep it shallow whatever order addresses come in.
 */
struct jd_func {
	struct jd_func *l, *r;
	uint64_t start, size;
	uint64_t seq;        /* when it was loaded or moved: perfmap__jitdump_write_since() */
	struct jd_lines *lines; /* its JIT_CODE_DEBUG_INFO, when kept; NULL */
	uint32_t prio, pid;
	uint32_t name_len;   /* at most PERFMAP_NAME_MAX: what the writer keeps */
	char name[];         /* NUL-terminated, for lookups */
};

/* A load or move, in the order they came: what an append writes, found again in the tree. */
struct jd_logent {
	uint64_t seq, start;
	uint32_t pid;
};

struct perfmap_jitdump {
	struct jd_func *root;
	/*
	 * The loads and moves since the log was last made again, in seq
	 * order: an append walks only the new ones, not every live function.
	 * Made again from the tree when it holds twice as many as live.
	 */
	struct jd_logent *log;
	size_t log_len, log_cap;
	bool log_broken;        /* out of memory once: appends walk the tree */
	uint64_t rand;
	struct perfmap_jitdump_stats st;
	uint64_t seq;
	uint64_t max_funcs, max_name_bytes;
	struct perfmap_jitdump_budget *shared[2]; /* bounds over many readers; NULL: none */
	uint32_t expect_pid;
	char name[PERFMAP_JITDUMP_NAME_MAX + 1];
	unsigned char *debug;   /* a debug info record, read whole */
	size_t debug_cap;
	/*
	 * Line tables are kept up to this many bytes in all (0: not kept).
	 * A debug record comes before the load of its code (perf's order):
	 * it waits in @debug, pending, for a load at its code_addr. One
	 * naming the code of the function loaded just before it (a producer
	 * writing it after the load) goes to that function at once
	 * (@debug_attached), and still waits for a load there.
	 */
	uint64_t max_lines_bytes;
	bool debug_pending, debug_attached;
	uint32_t debug_len;
	uint64_t debug_addr;
	bool last_load;          /* a load made the function at (@last_pid, @last_start) */
	uint32_t last_pid;
	uint64_t last_start;
};

static const char *const stop_str[__PERFMAP_JITDUMP_STOP_MAX] = {
	[PERFMAP_JITDUMP_OK] = "ok",
	[PERFMAP_JITDUMP_BAD_MAGIC] = "not a jitdump (bad magic)",
	[PERFMAP_JITDUMP_BAD_VERSION] = "jitdump version not 1",
	[PERFMAP_JITDUMP_BAD_HEADER_SIZE] = "header size below 40 bytes or above 4096",
	[PERFMAP_JITDUMP_BAD_PID] = "pid 0 or above the kernel's limit",
	[PERFMAP_JITDUMP_RECORD_TOO_SMALL] = "record size below what its kind holds",
	[PERFMAP_JITDUMP_RECORD_TOO_LARGE] = "record size above 64 MiB",
	[PERFMAP_JITDUMP_NAME_UNTERMINATED] = "function name without its NUL",
	[PERFMAP_JITDUMP_NAME_TOO_LONG] = "function name longer than 65535 bytes",
	[PERFMAP_JITDUMP_CODE_SIZE] = "code size larger than its record",
	[PERFMAP_JITDUMP_BAD_RANGE] = "code at address 0 or past the end of the address space",
	[PERFMAP_JITDUMP_BAD_DEBUG_INFO] = "debug info entries do not fit their record",
	[PERFMAP_JITDUMP_TOO_MANY] = "more live functions than the bound",
	[PERFMAP_JITDUMP_PID_MISMATCH] = "its header names another pid than its file's name",
};

static const char *const stop_key[__PERFMAP_JITDUMP_STOP_MAX] = {
	[PERFMAP_JITDUMP_OK] = "ok",
	[PERFMAP_JITDUMP_BAD_MAGIC] = "bad_magic",
	[PERFMAP_JITDUMP_BAD_VERSION] = "bad_version",
	[PERFMAP_JITDUMP_BAD_HEADER_SIZE] = "bad_header_size",
	[PERFMAP_JITDUMP_BAD_PID] = "bad_pid",
	[PERFMAP_JITDUMP_RECORD_TOO_SMALL] = "record_too_small",
	[PERFMAP_JITDUMP_RECORD_TOO_LARGE] = "record_too_large",
	[PERFMAP_JITDUMP_NAME_UNTERMINATED] = "name_unterminated",
	[PERFMAP_JITDUMP_NAME_TOO_LONG] = "name_too_long",
	[PERFMAP_JITDUMP_CODE_SIZE] = "code_size",
	[PERFMAP_JITDUMP_BAD_RANGE] = "bad_range",
	[PERFMAP_JITDUMP_BAD_DEBUG_INFO] = "bad_debug_info",
	[PERFMAP_JITDUMP_TOO_MANY] = "too_many",
	[PERFMAP_JITDUMP_PID_MISMATCH] = "pid_mismatch",
};

const char *perfmap__jitdump_stop_key(enum perfmap_jitdump_stop stop)
{
	if ((unsigned int)stop >= __PERFMAP_JITDUMP_STOP_MAX)
		return "unknown";
	return stop_key[stop];
}

const char *perfmap__jitdump_stop_str(enum perfmap_jitdump_stop stop)
{
	if ((unsigned int)stop >= __PERFMAP_JITDUMP_STOP_MAX)
		return "unknown";
	return stop_str[stop];
}

/* Fields in the writer's byte order, which the header's magic gave. */
static uint32_t get32(const struct perfmap_jitdump *j, const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return j->st.swapped ? __builtin_bswap32(v) : v;
}

static uint64_t get64(const struct perfmap_jitdump *j, const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return j->st.swapped ? __builtin_bswap64(v) : v;
}

static uint32_t next_prio(struct perfmap_jitdump *j)
{
	/* xorshift64: priorities only shape the tree, never its contents. */
	j->rand ^= j->rand << 13;
	j->rand ^= j->rand >> 7;
	j->rand ^= j->rand << 17;
	return (uint32_t)(j->rand >> 32);
}

struct perfmap_jitdump *perfmap__jitdump_new(void)
{
	struct perfmap_jitdump *j = calloc(1, sizeof(*j));
	struct timespec ts;

	if (!j)
		return NULL;
	/* Unpredictable, so that no order of addresses can make the tree a list. */
	if (getrandom(&j->rand, sizeof(j->rand), GRND_NONBLOCK) != sizeof(j->rand)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		j->rand = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uintptr_t)j;
	}
	j->rand |= 1;
	j->max_funcs = PERFMAP_JITDUMP_FUNCS_MAX;
	j->max_name_bytes = PERFMAP_JITDUMP_NAME_BYTES_MAX;
	return j;
}

static void funcs_free(struct jd_func *f)
{
	/* Depth is the tree's height, logarithmic with random priorities. */
	if (!f)
		return;
	funcs_free(f->l);
	funcs_free(f->r);
	free(f->lines);
	free(f);
}

void perfmap__jitdump_free(struct perfmap_jitdump *j)
{
	unsigned int i;

	if (!j)
		return;
	/* What it kept is given back to the budgets it shared. */
	for (i = 0; i < 2; i++)
		if (j->shared[i]) {
			j->shared[i]->funcs -= j->st.funcs;
			j->shared[i]->name_bytes -= j->st.name_bytes;
		}
	funcs_free(j->root);
	free(j->log);
	free(j->debug);
	free(j);
}

const struct perfmap_jitdump_stats *perfmap__jitdump_stats(const struct perfmap_jitdump *j)
{
	return &j->st;
}

void perfmap__jitdump_set_limits(struct perfmap_jitdump *j, uint64_t max_funcs,
				 uint64_t max_name_bytes)
{
	if (max_funcs && max_funcs < PERFMAP_JITDUMP_FUNCS_MAX)
		j->max_funcs = max_funcs;
	if (max_name_bytes && max_name_bytes < PERFMAP_JITDUMP_NAME_BYTES_MAX)
		j->max_name_bytes = max_name_bytes;
}

void perfmap__jitdump_expect_pid(struct perfmap_jitdump *j, uint32_t pid)
{
	j->expect_pid = pid;
}

void perfmap__jitdump_keep_lines(struct perfmap_jitdump *j, uint64_t max_bytes)
{
	j->max_lines_bytes = max_bytes < PERFMAP_JITDUMP_LINES_BYTES_MAX ? max_bytes
									 : PERFMAP_JITDUMP_LINES_BYTES_MAX;
}

uint64_t perfmap__jitdump_seq(const struct perfmap_jitdump *j)
{
	return j->seq;
}

static bool key_less(uint32_t pid, uint64_t start, uint32_t kpid, uint64_t kstart)
{
	return pid < kpid || (pid == kpid && start < kstart);
}

/* @t into the functions before (@pid, @start) and the rest. */
static void split(struct jd_func *t, uint32_t pid, uint64_t start, struct jd_func **l,
		  struct jd_func **r)
{
	if (!t) {
		*l = *r = NULL;
	} else if (key_less(t->pid, t->start, pid, start)) {
		split(t->r, pid, start, &t->r, r);
		*l = t;
	} else {
		split(t->l, pid, start, l, &t->l);
		*r = t;
	}
}

/* Every key of @l is below every key of @r. */
static struct jd_func *merge(struct jd_func *l, struct jd_func *r)
{
	if (!l || !r)
		return l ? l : r;
	if (l->prio > r->prio) {
		l->r = merge(l->r, r);
		return l;
	}
	r->l = merge(l, r->l);
	return r;
}

/* @f's line table goes: its bytes are free for others'. */
static void drop_lines(struct perfmap_jitdump *j, struct jd_func *f)
{
	if (!f->lines)
		return;
	j->st.lines_tables--;
	j->st.lines_bytes -= f->lines->bytes;
	free(f->lines);
	f->lines = NULL;
}

/* A function kept: counted in the reader's stats and in the budgets it shares. */
static void count(struct perfmap_jitdump *j, uint32_t name_len)
{
	unsigned int i;

	j->st.funcs++;
	j->st.name_bytes += name_len;
	for (i = 0; i < 2; i++)
		if (j->shared[i]) {
			j->shared[i]->funcs++;
			j->shared[i]->name_bytes += name_len;
		}
}

static void uncount(struct perfmap_jitdump *j, uint32_t name_len)
{
	unsigned int i;

	j->st.funcs--;
	j->st.name_bytes -= name_len;
	for (i = 0; i < 2; i++)
		if (j->shared[i]) {
			j->shared[i]->funcs--;
			j->shared[i]->name_bytes -= name_len;
		}
}

/* Would one more function, of @name_len bytes, pass a bound of the reader's or of a shared budget? */
static bool over(const struct perfmap_jitdump *j, size_t name_len)
{
	const struct perfmap_jitdump_budget *b;
	unsigned int i;

	if (j->st.funcs >= j->max_funcs || j->st.name_bytes + name_len > j->max_name_bytes)
		return true;
	for (i = 0; i < 2; i++) {
		b = j->shared[i];
		if (b && (b->funcs >= b->max_funcs || b->name_bytes + name_len > b->max_name_bytes))
			return true;
	}
	return false;
}

void perfmap__jitdump_share(struct perfmap_jitdump *j, struct perfmap_jitdump_budget *a,
			    struct perfmap_jitdump_budget *b)
{
	j->shared[0] = a;
	j->shared[1] = b;
}

static void log_collect(struct perfmap_jitdump *j, const struct jd_func *f)
{
	if (!f)
		return;
	log_collect(j, f->l);
	j->log[j->log_len++] = (struct jd_logent){ f->seq, f->start, f->pid };
	log_collect(j, f->r);
}

static int logent_cmp(const void *a, const void *b)
{
	const struct jd_logent *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Note @f's load. Past twice the live functions, the log is made again
 * from the tree (what was replaced since drops out): its memory stays
 * within a few times the functions'. Without memory, no log: appends then
 * walk the tree (write_since() falls back).
 */
static void log_add(struct perfmap_jitdump *j, const struct jd_func *f)
{
	struct jd_logent *n;
	size_t cap;

	if (j->log_len == j->log_cap && j->log_len > 2 * j->st.funcs + 1024) {
		j->log_len = 0;
		log_collect(j, j->root);
		qsort(j->log, j->log_len, sizeof(*j->log), logent_cmp);
		/* @f is in the tree already: collected. */
		return;
	}
	if (j->log_len == j->log_cap) {
		cap = j->log_cap ? j->log_cap * 2 : 1024;
		n = realloc(j->log, cap * sizeof(*n));
		if (!n) {
			free(j->log);
			j->log = NULL;
			j->log_len = j->log_cap = 0;
			j->log_broken = true;
			return;
		}
		j->log = n;
		j->log_cap = cap;
	}
	if (!j->log_broken)
		j->log[j->log_len++] = (struct jd_logent){ f->seq, f->start, f->pid };
}

static void forget(struct perfmap_jitdump *j, struct jd_func *f)
{
	uncount(j, f->name_len);
	drop_lines(j, f);
	free(f);
}

static void forget_all(struct perfmap_jitdump *j, struct jd_func *t)
{
	if (!t)
		return;
	forget_all(j, t->l);
	forget_all(j, t->r);
	j->st.replaced++;
	j->st.removed++;
	forget(j, t);
}

/*
 * Put @f in the tree, after removing the functions of its pid it overlaps:
 * code at their addresses was replaced, so their names no longer hold.
 */
static void insert(struct perfmap_jitdump *j, struct jd_func *f)
{
	struct jd_func *l, *mid, *r, **pp, *last;

	split(j->root, f->pid, f->start, &l, &r);
	/* Those starting inside [start, end). */
	split(r, f->pid, f->start + f->size, &mid, &r);
	forget_all(j, mid);
	/* One starting before it may reach into it: the last one before, alone. */
	if (l) {
		pp = &l;
		while ((*pp)->r)
			pp = &(*pp)->r;
		last = *pp;
		if (last->pid == f->pid && last->start + last->size > f->start) {
			*pp = last->l;
			j->st.replaced++;
			j->st.removed++;
			forget(j, last);
		}
	}
	f->l = f->r = NULL;
	f->prio = next_prio(j);
	f->seq = ++j->seq;
	j->root = merge(merge(l, f), r);
	count(j, f->name_len);
	log_add(j, f);
}

/* Take the function at exactly (@pid, @start) out of the tree: it or NULL. */
static struct jd_func *take(struct perfmap_jitdump *j, uint32_t pid, uint64_t start)
{
	struct jd_func **pp = &j->root, *f;

	while (*pp && ((*pp)->pid != pid || (*pp)->start != start))
		pp = key_less(pid, start, (*pp)->pid, (*pp)->start) ? &(*pp)->l : &(*pp)->r;
	f = *pp;
	if (!f)
		return NULL;
	*pp = merge(f->l, f->r);
	uncount(j, f->name_len);
	return f;
}

static int stop(struct perfmap_jitdump *j, enum perfmap_jitdump_stop why)
{
	j->st.stop = why;
	j->st.stop_offset = j->st.offset;
	return -EBADMSG;
}

/* pread() all @len bytes at @off: 0, -EAGAIN when the file ends first (it shrank), or -errno. */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	while (len) {
		n = pread(fd, buf, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EAGAIN;
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int read_header(struct perfmap_jitdump *j, int fd, uint64_t end)
{
	unsigned char h[JD_HEADER_SIZE];
	uint32_t magic, size, pid;
	int err;

	/* The magic alone is enough to refuse a file that is no dump. */
	if (end < 4)
		return -EAGAIN;
	err = read_at(fd, h, end < sizeof(h) ? 4 : sizeof(h), 0);
	if (err)
		return err;
	memcpy(&magic, h, 4);
	if (magic == JD_MAGIC_SWAPPED)
		j->st.swapped = true;
	else if (magic != JD_MAGIC)
		return stop(j, PERFMAP_JITDUMP_BAD_MAGIC);
	if (end < sizeof(h))
		return -EAGAIN;
	if (get32(j, h + 4) != 1)
		return stop(j, PERFMAP_JITDUMP_BAD_VERSION);
	size = get32(j, h + 8);
	if (size < JD_HEADER_SIZE || size > PERFMAP_JITDUMP_HEADER_MAX)
		return stop(j, PERFMAP_JITDUMP_BAD_HEADER_SIZE);
	pid = get32(j, h + 20);
	if (!pid || pid >= JD_PID_MAX)
		return stop(j, PERFMAP_JITDUMP_BAD_PID);
	if (j->expect_pid && pid != j->expect_pid)
		return stop(j, PERFMAP_JITDUMP_PID_MISMATCH);
	/* A header longer than perf's: its tail is skipped, as perf does. */
	if (end < size)
		return -EAGAIN;
	j->st.pid = pid;
	j->st.header = true;
	j->st.offset = size;
	return 0;
}

static struct jd_func *func_new(struct perfmap_jitdump *j, uint32_t pid, uint64_t start,
				uint64_t size, const char *name, size_t name_len)
{
	struct jd_func *f;

	/* Every consumer skips the blanks before a name: a line keeping them reads as another name. */
	while (name_len && *name == ' ') {
		name++;
		name_len--;
	}
	name_len = perfmap__name_cut(name, name_len, PERFMAP_NAME_MAX);
	if (over(j, name_len)) {
		errno = E2BIG;
		return NULL;
	}
	f = malloc(sizeof(*f) + name_len + 1);
	if (!f)
		return NULL;
	f->pid = pid;
	f->start = start;
	f->size = size;
	f->lines = NULL;
	f->name_len = (uint32_t)name_len;
	/* As the map's line has it: a lookup gives the very name a map of this dump does. */
	perfmap__sanitize_name(f->name, name, name_len);
	f->name[name_len] = '\0';
	return f;
}

static int range_check(struct perfmap_jitdump *j, uint32_t pid, uint64_t start, uint64_t size)
{
	if (!pid || pid >= JD_PID_MAX)
		return stop(j, PERFMAP_JITDUMP_BAD_PID);
	if (size > PERFMAP_JITDUMP_RECORD_MAX)
		return stop(j, PERFMAP_JITDUMP_CODE_SIZE);
	if (size && !perfmap__range_ok(start, size))
		return stop(j, PERFMAP_JITDUMP_BAD_RANGE);
	return 0;
}

/*
 * The pending debug record's entries in @f's range, walked within the
 * record read whole (each name's NUL was found there before): counted into
 * *@kept and *@pool (the bytes of the file names, consecutive repeats
 * once), and written into @t when given (its @n and pool laid out from a
 * first walk). "\xff" names the previous entry's file, as perf writes it.
 */
static void walk_lines(const struct perfmap_jitdump *j, const struct jd_func *f,
		       struct jd_lines *t, size_t *kept, size_t *pool)
{
	const unsigned char *b = j->debug;
	const char *file, *prev = "", *last = NULL;
	size_t off = JD_DEBUG_SIZE, len, prev_len = 0, last_len = 0, at = 0;
	char *pp = t ? (char *)(t->e + t->n) : NULL;
	uint64_t nr = get64(j, b + 24), i, addr;
	uint32_t line;

	*kept = *pool = 0;
	for (i = 0; i < nr && off + JD_DEBUG_ENTRY_SIZE < j->debug_len; i++) {
		addr = get64(j, b + off);
		line = get32(j, b + off + 8);
		off += JD_DEBUG_ENTRY_SIZE;
		file = (const char *)b + off;
		len = strnlen(file, j->debug_len - off);
		off += len + 1;
		if (len == 1 && (unsigned char)file[0] == 0xff) {
			file = prev;
			len = prev_len;
		} else {
			len = len > PERFMAP_JITDUMP_FILE_MAX ? PERFMAP_JITDUMP_FILE_MAX : len;
			prev = file;
			prev_len = len;
		}
		/* Another function's code, or none: no sample of this one lands there. */
		if (addr < f->start || addr - f->start >= f->size)
			continue;
		if (!last || len != last_len || memcmp(file, last, len)) {
			if (pp) {
				memcpy(pp + *pool, file, len);
				pp[*pool + len] = '\0';
			}
			at = *pool;
			*pool += len + 1;
			last = file;
			last_len = len;
		}
		if (t)
			t->e[*kept] = (struct jd_line){ .off = (uint32_t)(addr - f->start),
							.line = line, .file = (uint32_t)at };
		(*kept)++;
	}
}

static int line_cmp(const void *a, const void *b)
{
	const struct jd_line *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->file < y->file ? -1 : x->file > y->file;
}

/*
 * The pending debug record's table onto @f (in place of one it had), if
 * the bound for all tables has room: else counted in lines_over. 0 (kept,
 * or over the bound), -ENOENT when no entry lies in @f's code, or -ENOMEM.
 */
static int attach_lines(struct perfmap_jitdump *j, struct jd_func *f)
{
	size_t kept, pool, i;
	struct jd_lines *t;
	uint64_t bytes;

	walk_lines(j, f, NULL, &kept, &pool);
	if (!kept)
		return -ENOENT;
	drop_lines(j, f);
	bytes = sizeof(*t) + (uint64_t)kept * sizeof(t->e[0]) + pool;
	if (j->st.lines_bytes + bytes > j->max_lines_bytes) {
		j->st.lines_over++;
		return 0;
	}
	t = malloc(bytes);
	if (!t)
		return -ENOMEM;
	t->bytes = bytes;
	t->n = (uint32_t)kept;
	walk_lines(j, f, t, &kept, &pool);
	for (i = 1; i < t->n; i++) {
		if (t->e[i - 1].off > t->e[i].off) {
			qsort(t->e, t->n, sizeof(t->e[0]), line_cmp);
			break;
		}
	}
	f->lines = t;
	j->st.lines_tables++;
	j->st.lines_bytes += bytes;
	return 0;
}

/* The pending table waits no more: counted when no function got it. */
static void drop_pending(struct perfmap_jitdump *j)
{
	if (j->debug_pending && !j->debug_attached)
		j->st.lines_unattached++;
	j->debug_pending = false;
}

/* The live function at exactly (@pid, @start), or NULL. */
static struct jd_func *find(const struct perfmap_jitdump *j, uint32_t pid, uint64_t start)
{
	struct jd_func *f = j->root;

	while (f && (f->pid != pid || f->start != start))
		f = key_less(pid, start, f->pid, f->start) ? f->l : f->r;
	return f;
}

static int add_func(struct perfmap_jitdump *j, struct jd_func *f)
{
	if (!f)
		return errno == E2BIG ? stop(j, PERFMAP_JITDUMP_TOO_MANY) : -ENOMEM;
	insert(j, f);
	return 0;
}

/*
 * JIT_CODE_LOAD: the fixed part, then the name, then code_size bytes of
 * code. The name fills what the code leaves (as perf finds the code, at the
 * record's end), and only its bytes are read: never the code.
 */
static int read_load(struct perfmap_jitdump *j, int fd, uint32_t total)
{
	unsigned char fix[JD_LOAD_SIZE - JD_PREFIX_SIZE];
	uint64_t start, size, area;
	struct jd_func *f;
	size_t want, len;
	uint32_t pid;
	bool lines;
	int err;

	if (total < JD_LOAD_SIZE + 1)
		return stop(j, PERFMAP_JITDUMP_RECORD_TOO_SMALL);
	err = read_at(fd, fix, sizeof(fix), j->st.offset + JD_PREFIX_SIZE);
	if (err)
		return err;
	pid = get32(j, fix);
	start = get64(j, fix + 16);
	size = get64(j, fix + 24);
	err = range_check(j, pid, start, size);
	if (err)
		return err;
	if (size > total - JD_LOAD_SIZE - 1)
		return stop(j, PERFMAP_JITDUMP_CODE_SIZE);
	area = total - JD_LOAD_SIZE - size;
	want = area > sizeof(j->name) ? sizeof(j->name) : (size_t)area;
	err = read_at(fd, j->name, want, j->st.offset + JD_LOAD_SIZE);
	if (err)
		return err;
	len = strnlen(j->name, want);
	if (len == want)
		return stop(j, want < area ? PERFMAP_JITDUMP_NAME_TOO_LONG
					   : PERFMAP_JITDUMP_NAME_UNTERMINATED);
	/* The pending line table is this load's, or no load's: a later one is another function. */
	lines = j->debug_pending && j->debug_addr == start;
	if (!size || !lines)
		drop_pending(j);
	j->st.loads++;
	if (!size) {
		j->st.empty++;
		return 0;
	}
	f = func_new(j, pid, start, size, j->name, len);
	if (f && lines) {
		err = attach_lines(j, f);
		if (err == -ENOMEM) {
			free(f);
			return err;
		}
		j->debug_attached |= !err;
		drop_pending(j);
	}
	err = add_func(j, f);
	if (!err) {
		j->last_load = true;
		j->last_pid = pid;
		j->last_start = start;
	}
	return err;
}

/* JIT_CODE_MOVE: the function at the old address now lies at the new one, and only there. */
static int read_move(struct perfmap_jitdump *j, int fd, uint32_t total)
{
	unsigned char fix[JD_MOVE_SIZE - JD_PREFIX_SIZE];
	uint64_t old, start, size;
	struct jd_func *f;
	uint32_t pid;
	int err;

	if (total < JD_MOVE_SIZE)
		return stop(j, PERFMAP_JITDUMP_RECORD_TOO_SMALL);
	err = read_at(fd, fix, sizeof(fix), j->st.offset + JD_PREFIX_SIZE);
	if (err)
		return err;
	pid = get32(j, fix);
	old = get64(j, fix + 16);
	start = get64(j, fix + 24);
	size = get64(j, fix + 32);
	err = range_check(j, pid, start, size);
	if (err)
		return err;
	j->st.moves++;
	/* A debug record after it names no function loaded "just before" any more. */
	j->last_load = false;
	f = take(j, pid, old);
	if (!f) {
		j->st.moves_unmatched++;
		return 0;
	}
	/* Its old range is no longer its: a map that named it there is rewritten. */
	j->st.removed++;
	if (!size) {
		drop_lines(j, f);
		free(f);
		return 0;
	}
	f->start = start;
	f->size = size;
	return add_func(j, f);
}

/*
 * JIT_CODE_DEBUG_INFO: nr_entry entries of {addr, line, discrim, file name}
 * (the name "\xff" for the previous entry's), read whole and walked within
 * the record. Validated and counted; when line tables are kept, the record
 * stays pending for the load of its code_addr, which comes next in perf's
 * order (perfmap__jitdump_keep_lines()).
 */
static int read_debug(struct perfmap_jitdump *j, int fd, uint32_t total)
{
	struct jd_func *f;
	uint64_t nr, i;
	size_t off, left, n;
	unsigned char *b;
	int err;

	if (total < JD_DEBUG_SIZE)
		return stop(j, PERFMAP_JITDUMP_RECORD_TOO_SMALL);
	/* A table still pending is no load's: and its buffer is about to be read over. */
	drop_pending(j);
	if (total > PERFMAP_JITDUMP_DEBUG_MAX) {
		j->st.debug_unread++;
		return 0;
	}
	if (j->debug_cap < total) {
		b = realloc(j->debug, total);
		if (!b)
			return -ENOMEM;
		j->debug = b;
		j->debug_cap = total;
	}
	b = j->debug;
	err = read_at(fd, b, total, j->st.offset);
	if (err)
		return err;
	nr = get64(j, b + 24);
	/* Each entry is at least its fixed part and a NUL. */
	if (nr > (total - JD_DEBUG_SIZE) / (JD_DEBUG_ENTRY_SIZE + 1))
		return stop(j, PERFMAP_JITDUMP_BAD_DEBUG_INFO);
	off = JD_DEBUG_SIZE;
	for (i = 0; i < nr; i++) {
		left = total - off;
		if (left < JD_DEBUG_ENTRY_SIZE + 1)
			return stop(j, PERFMAP_JITDUMP_BAD_DEBUG_INFO);
		off += JD_DEBUG_ENTRY_SIZE;
		left -= JD_DEBUG_ENTRY_SIZE;
		n = strnlen((const char *)b + off, left);
		if (n == left)
			return stop(j, PERFMAP_JITDUMP_BAD_DEBUG_INFO);
		off += n + 1;
	}
	j->st.debug_info++;
	j->st.debug_entries += nr;
	if (!j->max_lines_bytes || !nr)
		return 0;
	j->debug_len = total;
	j->debug_addr = get64(j, b + 16);
	j->debug_attached = false;
	/* Written after its load, as some producers do: the function loaded just before. */
	f = j->last_load && j->last_start == j->debug_addr ? find(j, j->last_pid, j->debug_addr)
							    : NULL;
	if (f) {
		err = attach_lines(j, f);
		if (err == -ENOMEM)
			return err;
		j->debug_attached = !err;
	}
	j->debug_pending = true;
	return 0;
}

long perfmap__jitdump_read(struct perfmap_jitdump *j, int fd, size_t max_records)
{
	unsigned char pre[JD_PREFIX_SIZE];
	uint32_t id, total;
	uint64_t end;
	struct stat st;
	long n = 0;
	int err;

	if (j->st.stop)
		return -EBADMSG;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/* Read up to the size it has now; what is appended meanwhile waits for the next call. */
	end = (uint64_t)st.st_size;
	if (!j->st.header) {
		err = read_header(j, fd, end);
		if (err == -EAGAIN) {
			j->st.torn_bytes = end;
			return 0;
		}
		if (err)
			return err;
	}
	while (!max_records || (size_t)n < max_records) {
		j->st.torn_bytes = end > j->st.offset ? end - j->st.offset : 0;
		if (j->st.torn_bytes < JD_PREFIX_SIZE)
			break;
		err = read_at(fd, pre, sizeof(pre), j->st.offset);
		if (err)
			goto out;
		id = get32(j, pre);
		total = get32(j, pre + 4);
		/* Sizes are judged before waiting for the body: a 4 GiB record is refused at once. */
		if (total < JD_PREFIX_SIZE)
			return stop(j, PERFMAP_JITDUMP_RECORD_TOO_SMALL);
		if (total > PERFMAP_JITDUMP_RECORD_MAX)
			return stop(j, PERFMAP_JITDUMP_RECORD_TOO_LARGE);
		if (j->st.torn_bytes < total)
			break;
		switch (id) {
		case JIT_CODE_LOAD:
			err = read_load(j, fd, total);
			break;
		case JIT_CODE_MOVE:
			err = read_move(j, fd, total);
			break;
		case JIT_CODE_DEBUG_INFO:
			err = read_debug(j, fd, total);
			break;
		case JIT_CODE_CLOSE:
			j->st.closes++;
			break;
		default:
			/* JIT_CODE_UNWINDING_INFO, and ids newer than this reader. */
			j->st.skipped++;
			break;
		}
		if (err)
			goto out;
		j->st.offset += total;
		j->st.records++;
		n++;
	}
	j->st.torn_bytes = end > j->st.offset ? end - j->st.offset : 0;
	return n;
out:
	/* The file shrank under us: nothing consumed, tried again next time. */
	if (err == -EAGAIN)
		return n;
	return err;
}

struct write_ctx {
	int fd;
	uint32_t pid;
	uint64_t after_seq;
	size_t off;
	long lines;
	int err;
	char buf[16u << 10];
};

static void write_func(struct write_ctx *c, const struct jd_func *f)
{
	if (c->err || (c->pid && f->pid != c->pid) || f->name_len < 3 || f->seq <= c->after_seq)
		return;
	if (c->off + PERFMAP_FIXED_MAX + f->name_len > sizeof(c->buf)) {
		c->err = perfmap__write_all(c->fd, c->buf, c->off);
		c->off = 0;
		if (c->err)
			return;
	}
	c->off += perfmap__format_line(c->buf + c->off, f->start, f->size, f->name,
				       f->name_len);
	c->lines++;
}

static void write_tree(struct write_ctx *c, const struct jd_func *f)
{
	if (!f)
		return;
	write_tree(c, f->l);
	write_func(c, f);
	write_tree(c, f->r);
}

/* The functions loaded or moved after @c->after_seq, in that order: each found in the tree, live still. */
static void write_log(struct write_ctx *c, const struct perfmap_jitdump *j)
{
	size_t lo = 0, hi = j->log_len, mid;
	const struct jd_func *f;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (j->log[mid].seq <= c->after_seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < j->log_len && !c->err; lo++) {
		if (c->pid && j->log[lo].pid != c->pid)
			continue;
		f = find(j, j->log[lo].pid, j->log[lo].start);
		/* Replaced or moved since: its later load is further on, or it is gone. */
		if (f && f->seq == j->log[lo].seq)
			write_func(c, f);
	}
}

long perfmap__jitdump_write_map(const struct perfmap_jitdump *j, int fd, uint32_t pid)
{
	return perfmap__jitdump_write_since(j, fd, pid, 0);
}

long perfmap__jitdump_write_since(const struct perfmap_jitdump *j, int fd, uint32_t pid,
				  uint64_t after_seq)
{
	struct write_ctx *c = malloc(sizeof(*c));
	long lines;

	if (!c)
		return -ENOMEM;
	c->fd = fd;
	c->pid = pid;
	c->after_seq = after_seq;
	c->off = 0;
	c->lines = 0;
	c->err = 0;
	if (after_seq && !j->log_broken)
		write_log(c, j);
	else
		write_tree(c, j->root);
	if (!c->err && c->off)
		c->err = perfmap__write_all(fd, c->buf, c->off);
	lines = c->err ? c->err : c->lines;
	free(c);
	return lines;
}

int perfmap__jitdump_lookup(const struct perfmap_jitdump *j, uint32_t pid, uint64_t addr,
			    struct perfmap_jitdump_sym *out)
{
	const struct jd_func *t = j->root, *f = NULL;
	const struct jd_lines *l;
	size_t lo, hi, mid;
	uint64_t off;

	/* The last function at or before (@pid, @addr): one descent, the tree's height. */
	while (t) {
		if (key_less(pid, addr, t->pid, t->start)) {
			t = t->l;
		} else {
			f = t;
			t = t->r;
		}
	}
	if (!f || f->pid != pid || addr - f->start >= f->size)
		return -ENOENT;
	*out = (struct perfmap_jitdump_sym){ .name = f->name, .name_len = f->name_len,
					     .start = f->start, .size = f->size };
	l = f->lines;
	if (!l)
		return 0;
	/* The last entry at or below the address: its line holds until the next entry's. */
	off = addr - f->start;
	lo = 0;
	hi = l->n;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l->e[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && ((const char *)(l->e + l->n))[l->e[lo - 1].file]) {
		out->file = (const char *)(l->e + l->n) + l->e[lo - 1].file;
		out->line = l->e[lo - 1].line;
	}
	return 0;
}

uint32_t perfmap__jitdump_next_pid(const struct perfmap_jitdump *j, uint32_t after)
{
	const struct jd_func *f = j->root;
	uint32_t best = 0;

	/* The leftmost function of a pid above @after: one descent, the tree's height. */
	while (f) {
		if (f->pid > after) {
			best = f->pid;
			f = f->l;
		} else {
			f = f->r;
		}
	}
	return best;
}

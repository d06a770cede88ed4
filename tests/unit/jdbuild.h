/* Hand-built jitdumps for the tests: perf's jitdump.h layout, in either byte order, and bad ones. */
#ifndef PERFMAP_JDBUILD_H
#define PERFMAP_JDBUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct jdb {
	unsigned char *p;
	size_t len, cap;
	bool swap;         /* write every field byte-swapped: a writer of the other endianness */
};

static inline void jdb_bytes(struct jdb *b, const void *src, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	if (src)
		memcpy(b->p + b->len, src, n);
	else
		memset(b->p + b->len, 0xcc, n);   /* code bytes: never read */
	b->len += n;
}

static inline void jdb_u32(struct jdb *b, uint32_t v)
{
	if (b->swap)
		v = __builtin_bswap32(v);
	jdb_bytes(b, &v, 4);
}

static inline void jdb_u64(struct jdb *b, uint64_t v)
{
	if (b->swap)
		v = __builtin_bswap64(v);
	jdb_bytes(b, &v, 8);
}

#define JDB_MAGIC 0x4A695444u

static inline void jdb_header_raw(struct jdb *b, uint32_t magic, uint32_t version,
				  uint32_t total_size, uint32_t pid)
{
	jdb_u32(b, magic);
	jdb_u32(b, version);
	jdb_u32(b, total_size);
	jdb_u32(b, 62);            /* EM_X86_64 */
	jdb_u32(b, 0);
	jdb_u32(b, pid);
	jdb_u64(b, 1000);
	jdb_u64(b, 0);
}

static inline void jdb_header(struct jdb *b, uint32_t pid)
{
	jdb_header_raw(b, JDB_MAGIC, 1, 40, pid);
}

static inline void jdb_prefix(struct jdb *b, uint32_t id, uint32_t total)
{
	jdb_u32(b, id);
	jdb_u32(b, total);
	jdb_u64(b, 2000 + b->len);
}

/* JIT_CODE_LOAD with its code bytes (size of them), as real producers write it. */
static inline void jdb_load(struct jdb *b, uint32_t pid, uint64_t addr, uint64_t size,
			    const char *name)
{
	size_t nl = strlen(name) + 1;

	jdb_prefix(b, 0, (uint32_t)(56 + nl + size));
	jdb_u32(b, pid);
	jdb_u32(b, pid);
	jdb_u64(b, addr);
	jdb_u64(b, addr);
	jdb_u64(b, size);
	jdb_u64(b, b->len);
	jdb_bytes(b, name, nl);
	jdb_bytes(b, NULL, size);
}

static inline void jdb_move(struct jdb *b, uint32_t pid, uint64_t old, uint64_t addr,
			    uint64_t size)
{
	jdb_prefix(b, 1, 64);
	jdb_u32(b, pid);
	jdb_u32(b, pid);
	jdb_u64(b, addr);
	jdb_u64(b, old);
	jdb_u64(b, addr);
	jdb_u64(b, size);
	jdb_u64(b, 7);
}

/* JIT_CODE_DEBUG_INFO with @n entries: the first names @file, the rest "\xff" (same file). */
static inline void jdb_debug(struct jdb *b, uint64_t addr, uint32_t n, const char *file)
{
	size_t fl = strlen(file) + 1, total = 32 + (n ? 16 + fl : 0) + (n > 1 ? (n - 1) * 18 : 0);
	uint32_t i;

	jdb_prefix(b, 2, (uint32_t)total);
	jdb_u64(b, addr);
	jdb_u64(b, n);
	for (i = 0; i < n; i++) {
		jdb_u64(b, addr + i * 4);
		jdb_u32(b, 10 + i);
		jdb_u32(b, 0);
		if (i == 0)
			jdb_bytes(b, file, fl);
		else
			jdb_bytes(b, "\xff", 2);
	}
}

static inline void jdb_close(struct jdb *b)
{
	jdb_prefix(b, 3, 16);
}

/* JIT_CODE_UNWINDING_INFO with 24 bytes of unwinding data. */
static inline void jdb_unwind(struct jdb *b)
{
	jdb_prefix(b, 4, 16 + 24 + 24);
	jdb_u64(b, 24);
	jdb_u64(b, 8);
	jdb_u64(b, 0);
	jdb_bytes(b, NULL, 24);
}

/* A record of an id no reader knows, skipped by its size. */
static inline void jdb_unknown(struct jdb *b, uint32_t id, uint32_t payload)
{
	jdb_prefix(b, id, 16 + payload);
	jdb_bytes(b, NULL, payload);
}

static inline void jdb_free(struct jdb *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

#endif /* PERFMAP_JDBUILD_H */

/*
 * libFuzzer target: libperfmap's /proc/<pid>/maps parser (perfmap/procmaps.c)
 * on any bytes: every line that parses formats back to itself, and the list
 * it fills stays sorted and disjoint, its binary search agreeing with a scan.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>

#include "fuzz.h"
#include "perfmap_tools.h"

static const struct perfmap_vma *linear_find(const struct perfmap_vmas *vs, uint64_t addr)
{
	size_t i;

	for (i = 0; i < vs->n; i++)
		if (addr >= vs->v[i].lo && addr < vs->v[i].hi)
			return &vs->v[i];
	return NULL;
}

static void require_same(const struct perfmap_vmas *vs, uint64_t addr)
{
	REQUIRE(perfmap__vmas_find(vs, addr) == linear_find(vs, addr));
}

static void check_list(const struct perfmap_vmas *vs, const uint8_t *data, size_t size)
{
	size_t i;

	REQUIRE(vs->n <= vs->cap && vs->n <= PERFMAP_VMAS_MAX);
	for (i = 0; i < vs->n; i++) {
		REQUIRE(vs->v[i].lo < vs->v[i].hi);
		REQUIRE(!i || vs->v[i - 1].hi <= vs->v[i].lo);
		require_same(vs, vs->v[i].lo);
		require_same(vs, vs->v[i].lo - 1);
		require_same(vs, vs->v[i].hi);
		require_same(vs, vs->v[i].hi - 1);
	}
	for (i = 0; i + 8 <= size; i += 8)
		require_same(vs, fuzz_num(data, size, i, 8));
}

/* Formatted the kernel's way with the same path, the line parses to the same mapping. */
static void check_line(const struct perfmap_vma *v, const char *path, size_t plen)
{
	struct perfmap_vma again;
	char buf[256];
	int n;

	REQUIRE(v->lo < v->hi);
	REQUIRE(v->prot <= (PROT_READ | PROT_WRITE | PROT_EXEC));
	REQUIRE(v->kind <= PERFMAP_VMA_SPECIAL);
	/* A NUL in the path would end it early in the copy. */
	if (plen > 100 || memchr(path, '\0', plen))
		return;
	n = snprintf(buf, sizeof(buf), "%08" PRIx64 "-%08" PRIx64 " %c%c%c%c %08" PRIx64
		     " %02x:%02x %" PRIu64 " %.*s", v->lo, v->hi, v->prot & PROT_READ ? 'r' : '-',
		     v->prot & PROT_WRITE ? 'w' : '-', v->prot & PROT_EXEC ? 'x' : '-',
		     v->shared ? 's' : 'p', v->pgoff, v->dev_major, v->dev_minor, v->ino,
		     (int)plen, path);
	REQUIRE(n > 0 && (size_t)n < sizeof(buf));
	REQUIRE(perfmap__vma_parse(buf, (size_t)n, &again) == 0);
	REQUIRE(!memcmp(&again, v, sizeof(again)));
}

static void lines(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl, *path;
	struct perfmap_vma v;
	size_t plen;
	int err;

	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		memset(&v, 0, sizeof(v));
		err = perfmap__vma_parse_path(p, (size_t)(nl - p), &v, &path, &plen);
		REQUIRE(err == 0 || err == -EINVAL);
		if (!err) {
			REQUIRE(path >= p && path + plen <= nl);
			check_line(&v, path, plen);
		}
	}
}

static void list(const uint8_t *data, size_t size)
{
	struct perfmap_vmas vs = { 0 };
	long used;

	used = perfmap__vmas_parse_buf(&vs, (const char *)data, size);
	REQUIRE(used == -EINVAL || (used >= 0 && (size_t)used <= size));
	if (used > 0)
		REQUIRE(((const char *)data)[used - 1] == '\n');
	check_list(&vs, data, size);
	perfmap__vmas_release(&vs);
	REQUIRE(!vs.v && !vs.n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	lines(data, size);
	list(data, size);
	return 0;
}

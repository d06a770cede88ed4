/*
 * libFuzzer target: the /proc/<pid>/maps line parser and the range list it
 * fills (agent/mappings.c), and the reader of a map's tail, on any bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "mappings.h"

static bool linear_has(const struct ranges *rs, uint64_t addr)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		if (addr >= rs->r[i][0] && addr < rs->r[i][1])
			return true;
	return false;
}

static void require_same(const struct ranges *rs, uint64_t addr)
{
	REQUIRE(ranges__has(rs, addr) == linear_has(rs, addr));
}

/* Sorted, disjoint, non-empty: and the search agrees with a scan at every edge. */
static void check_ranges(const struct ranges *rs, const uint8_t *data, size_t size)
{
	size_t i;

	REQUIRE(rs->n <= rs->cap);
	for (i = 0; i < rs->n; i++) {
		REQUIRE(rs->r[i][0] < rs->r[i][1]);
		REQUIRE(!i || rs->r[i - 1][1] <= rs->r[i][0]);
		require_same(rs, rs->r[i][0]);
		require_same(rs, rs->r[i][0] - 1);
		require_same(rs, rs->r[i][1]);
		require_same(rs, rs->r[i][1] - 1);
	}
	for (i = 0; i + 8 <= size; i += 8)
		require_same(rs, fuzz_num(data, size, i, 8));
}

/* A line that parses formats back to the same range, and that parses the same. */
static void check_line(const char *line, size_t len, uint64_t lo, uint64_t hi)
{
	uint64_t lo2, hi2;
	char again[128];
	int n;

	REQUIRE(lo < hi);
	REQUIRE(len >= 3 && memchr(line, '-', len));
	n = snprintf(again, sizeof(again), "%08" PRIx64 "-%08" PRIx64 " r-xp 00000000 00:00 0", lo, hi);
	REQUIRE(mappings_parse_line(again, (size_t)n, &lo2, &hi2) == 0);
	REQUIRE(lo2 == lo && hi2 == hi);
}

static void maps_lines(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl;
	struct ranges rs = { 0 };
	uint64_t lo, hi;
	size_t len;
	int err;

	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', end - p);
		if (!nl)
			nl = end;
		len = nl - p;
		lo = hi = 0xa5a5a5a5a5a5a5a5ull;
		err = mappings_parse_line(p, len, &lo, &hi);
		REQUIRE(err == 0 || err == -EINVAL);
		if (err)
			continue;
		check_line(p, len, lo, hi);
		err = ranges__add(&rs, lo, hi);
		REQUIRE(err == 0 || err == -EINVAL);
		REQUIRE(err || (rs.n && rs.r[rs.n - 1][0] == lo && rs.r[rs.n - 1][1] == hi));
	}
	check_ranges(&rs, data, size);
	ranges__release(&rs);
	REQUIRE(!rs.r && !rs.n);
}

/* At most @cap starts, never more than complete lines, each the start of one. */
static void tail(const uint8_t *data, size_t size)
{
	size_t cap = size ? data[0] % 64 : 0, lines = 0, n, i;
	uint64_t starts[64];
	bool mid = size > 1 && (data[1] & 1);

	for (i = 0; i < size; i++)
		lines += data[i] == '\n';
	memset(starts, 0xa5, sizeof(starts));
	n = mappings_tail_starts((const char *)data, size, mid, starts, cap);
	REQUIRE(n <= cap && n <= lines);
	for (i = n; i < 64; i++)
		REQUIRE(starts[i] == 0xa5a5a5a5a5a5a5a5ull);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	maps_lines(data, size);
	tail(data, size);
	return 0;
}

/*
 * libFuzzer target: the reader of a map's tail (agent/in/mappings.c), on any
 * bytes. The /proc/<pid>/maps parser it uses is fuzz_procmaps's.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "in/mappings.h"

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
	tail(data, size);
	return 0;
}

/*
 * libFuzzer target: the perf ring record decoder (agent/in/execmap.c) on
 * records of any content, the header's size made to match so that the
 * MMAP2 and LOST layouts are reached, at any alignment.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>

#include "in/execmap.h"
#include "fuzz.h"

static void decode_at(uint8_t *raw, size_t len)
{
	struct execmap_rec out;
	uint64_t lost = 0;
	int ret;

	memset(&out, 0xa5, sizeof(out));
	ret = execmap_parse(raw, len, &out, &lost);
	REQUIRE(ret == 0 || ret == 1 || ret == -EINVAL);
	if (ret != 1)
		return;
	REQUIRE(len % 8 == 0);
	REQUIRE(out.len > 0 && out.addr + out.len > out.addr);
	REQUIRE(out.prot & 0x4);
	REQUIRE(out.kind == EXECMAP_ANON || out.kind == EXECMAP_MEMFD ||
			(out.kind == EXECMAP_JITDUMP && out.path && strlen(out.path) < len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1), *odd = malloc(size + 1);
	struct perf_event_header h;

	REQUIRE(copy && odd);
	memcpy(copy, data, size);
	/* The kernel's records say their own size: most inputs should too. */
	if (size >= sizeof(h) && size <= UINT16_MAX && !(data[0] & 0x80)) {
		memcpy(&h, copy, sizeof(h));
		h.size = (uint16_t)size;
		h.type = data[0] & 1 ? PERF_RECORD_MMAP2 : PERF_RECORD_LOST;
		memcpy(copy, &h, sizeof(h));
	}
	memcpy(odd + 1, copy, size);
	decode_at(copy, size);
	decode_at(odd + 1, size);
	free(odd);
	free(copy);
	return 0;
}

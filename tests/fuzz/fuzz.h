/* What the libFuzzer targets share: an invariant that aborts, naming itself, when it fails. */
#ifndef PERFMAPD_FUZZ_H
#define PERFMAPD_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: invariant broken: %s\n",       \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A number drawn from @data at @i (wrapping), as wide as @bytes. */
static inline uint64_t fuzz_num(const uint8_t *data, size_t size, size_t i, unsigned int bytes)
{
	uint64_t v = 0;
	unsigned int k;

	for (k = 0; size && k < bytes; k++)
		v = v << 8 | data[(i + k) % size];
	return v;
}

#endif /* PERFMAPD_FUZZ_H */

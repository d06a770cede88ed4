/* libFuzzer target: perfmapctl's perf.data reader (ctl/perfdata.c) on any bytes at all. */
#include <stdio.h>
#include <stdlib.h>

#include "perfdata.h"

#define REQUIRE(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz_perfdata: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct perfdata_pid *p;
	struct perfdata pd;
	const char *why;
	size_t i, n = 0;
	uint32_t r;
	int err;

	err = perfdata_parse(data, size, &pd, &why);
	REQUIRE(err <= 0);
	REQUIRE(!err || why);
	/* Whatever was read is consistent: every pid is found, its regions sorted and disjoint. */
	for (i = 0; !err && i < pd.cap; i++) {
		p = &pd.pids[i];
		if (!p->pid)
			continue;
		n++;
		REQUIRE(p->pid > 0 && perfdata_find(&pd, p->pid) == p);
		REQUIRE(p->nregions <= PERFDATA_MAX_REGIONS);
		for (r = 0; r < p->nregions; r++) {
			REQUIRE(p->regions[r].len > 0);
			REQUIRE(perfdata_covers(&pd, p->pid, p->regions[r].start, p->regions[r].len));
			REQUIRE(!r || p->regions[r].start > p->regions[r - 1].start +
							     p->regions[r - 1].len);
		}
		REQUIRE(!p->nregions || perfdata_has_regions(&pd, p->pid, false));
		REQUIRE(perfdata_has_regions(&pd, p->pid, true) >= perfdata_has_regions(&pd, p->pid, false));
	}
	REQUIRE(err || n == pd.npids);
	REQUIRE(pd.npids <= PERFDATA_MAX_PIDS && pd.records <= PERFDATA_MAX_RECORDS);
	perfdata_free(&pd);
	return 0;
}

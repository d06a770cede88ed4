/* The counter table (perfmapd_counters.def) as the agent reports it: each row's description, and their values at one moment. */
#ifndef PERFMAPD_REPORT_COUNTERS_H
#define PERFMAPD_REPORT_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#include "perfmapd_counters.h"

extern const struct perfmapd_group perfmapd_groups[PMG__COUNT];
extern const struct perfmapd_counter perfmapd_counters[PMC__COUNT];
extern const struct perfmapd_family perfmapd_families[PMF__COUNT];

/* The counters read at one moment, by PMC_<key>. */
struct counter_values {
	uint64_t v[PMC__COUNT];        /* COUNTER and GAUGE rows */
	const char *s[PMC__COUNT];     /* INFO rows */
	bool shown[PMC__COUNT];        /* in the status: its piece runs (PMC_IF_*) */
};

/* "counter", "gauge", "histogram": the exposition's TYPE. */
const char *counters_type_name(enum perfmapd_type type);

#endif /* PERFMAPD_REPORT_COUNTERS_H */

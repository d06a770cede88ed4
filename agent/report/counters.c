/* The counter table, instantiated from perfmapd_counters.def: what the status and the metrics say of each row. */
#include "report/counters.h"

const struct perfmapd_group perfmapd_groups[PMG__COUNT] = {
#define PERFMAPD_GROUP PERFMAPD_GROUP_META
#include "perfmapd_counters.def"
};

const struct perfmapd_counter perfmapd_counters[PMC__COUNT] = {
#define PERFMAPD_ROW PERFMAPD_ROW_META
#include "perfmapd_counters.def"
};

const struct perfmapd_family perfmapd_families[PMF__COUNT] = {
	[PMF_NONE] = { "", PMT_COUNTER, "", PMS_OWN, "" },
#define PERFMAPD_FAMILY PERFMAPD_FAMILY_META
#include "perfmapd_counters.def"
};

const char *counters_type_name(enum perfmapd_type type)
{
	switch (type) {
	case PMT_COUNTER: return "counter";
	case PMT_GAUGE: return "gauge";
	case PMT_HISTOGRAM: return "histogram";
	case PMT_INFO: break;
	}
	return "untyped";
}

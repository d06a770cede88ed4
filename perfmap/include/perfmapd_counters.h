/*
 * perfmapd's counters, each declared once in perfmapd_counters.def: its
 * status key, where the agent reads it, its metric, type, unit, group, and
 * what it means. The agent reports them (agent/report/); perfmapctl lays
 * them out for a person (ctl/ctl_status.c); scripts/counters_doc.py writes
 * docs/agent.md's tables and the man page's list from them.
 *
 * It lives among the tools' internal headers (perfmap_tools.h's folder, not
 * installed) because both tools include it, and neither may include the
 * other's private files: ctl/ never includes agent/. Types only, no code.
 */
#ifndef PERFMAPD_COUNTERS_H
#define PERFMAPD_COUNTERS_H

enum perfmapd_type {
	PMT_COUNTER,     /* only grows, from 0 at the agent's start */
	PMT_GAUGE,       /* a value now */
	PMT_INFO,        /* a word or a path: status only */
	PMT_HISTOGRAM,   /* a metric family of buckets */
};

enum perfmapd_unit {
	PMU_NONE,
	PMU_BYTES,
	PMU_SECONDS,
	PMU_MS,          /* its metric is in seconds */
	PMU_NS,
	PMU_BOOL,        /* yes or no in the status, 1 or 0 as a metric */
};

enum perfmapd_flags {
	PMC_PROBLEM = 1 << 0,      /* not 0: something went wrong (perfmapctl status lists it) */
	PMC_IF_MIRRORS = 1 << 1,   /* in the status only while containers' maps are mirrored */
	PMC_IF_EXECMAP = 1 << 2,   /* ... only while the kernel's mmap reports are read */
	PMC_IF_JITSCAN = 1 << 3,   /* ... only while /proc/<pid>/maps is read for JIT code */
	PMC_IF_SET = 1 << 4,       /* ... only when not empty */
};

/* Where a metric family's samples come from. */
enum perfmapd_samples {
	PMS_COUNTERS,    /* the counters that name it, one sample each */
	PMS_OWN,         /* the metrics endpoint's own reading (agent/report/metrics_text.c) */
};

enum perfmapd_group_id {
#define PERFMAPD_GROUP(id, name, title) PMG_##id,
#include "perfmapd_counters.def"
	PMG__COUNT
};

enum perfmapd_counter_id {
#define PERFMAPD_ROW(key, ...) PMC_##key,
#include "perfmapd_counters.def"
	PMC__COUNT
};

enum perfmapd_family_id {
	PMF_NONE,        /* a counter with no metric */
#define PERFMAPD_FAMILY(name, ...) PMF_##name,
#include "perfmapd_counters.def"
	PMF__COUNT
};

struct perfmapd_group {
	const char *name;              /* "events" */
	const char *title;             /* "Events" */
};

struct perfmapd_counter {
	const char *key;               /* the status key */
	enum perfmapd_group_id group;
	enum perfmapd_type type;
	enum perfmapd_unit unit;
	unsigned int flags;            /* enum perfmapd_flags */
	enum perfmapd_family_id family;
	const char *label;             /* the family's label's value for this counter; "": none */
	const char *summary;           /* in perfmapctl status's summary: "<value> <summary>"; "": not */
	const char *help;
};

struct perfmapd_family {
	const char *name;              /* perfmapd_events_total */
	enum perfmapd_type type;
	const char *label;             /* the label's name; "": none */
	enum perfmapd_samples samples;
	const char *help;              /* the exposition's HELP */
};

/* Lines of the status that are lists, one line per item: "jit_<pid>: ...". */
struct perfmapd_list {
	const char *prefix;            /* "jit_" */
	enum perfmapd_group_id group;
	const char *doc;               /* "jit_<pid>" */
	const char *help;
};

/* The tables from the .def, for a file to instantiate: `= { PERFMAPD_COUNTERS_INIT }`. */
#define PERFMAPD_GROUP_META(id, name, title) [PMG_##id] = { name, title },
#define PERFMAPD_ROW_META(key, source, group, type, unit, flags, family, label, summary, help) \
	[PMC_##key] = { #key, PMG_##group, PMT_##type, PMU_##unit, flags, PMF_##family, label, \
			summary, help },
#define PERFMAPD_FAMILY_META(name, type, label, samples, help) \
	[PMF_##name] = { #name, PMT_##type, label, PMS_##samples, help },
#define PERFMAPD_LIST_META(prefix, group, doc, help) { prefix, PMG_##group, doc, help },

#endif /* PERFMAPD_COUNTERS_H */

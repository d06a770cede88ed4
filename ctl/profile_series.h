/*
 * perfmapctl profile --push: a period's samples split into series by
 * workload (the pod or container, the systemd unit, else the executable),
 * each labelled as Pyroscope and Parca want. Pure: the unit tests give it
 * fixed samples, no root, no BPF, no network.
 */
#ifndef PERFMAPD_PROFILE_SERIES_H
#define PERFMAPD_PROFILE_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile_report.h"

/* What a sample's process runs in, from its executable and cgroup (strings outlive the series). */
struct prof_workload {
	const char *service;      /* pod:<uid>, container:<id12>, a unit (nginx.service), else the executable's name */
	const char *container;    /* the container's id, 12 hex digits, or NULL */
	const char *pod_uid;      /* a Kubernetes pod's uid, or NULL */
	const char *unit;         /* a systemd unit, or NULL */
	const char *cgroup;       /* the cgroup's path, or NULL */
};

/*
 * @exe (a path), @cgroup and @container (64 hex digits) of a process, as
 * its workload in @out: the names written into @buf (@len bytes), which
 * @out's strings point at. A sample's series follows its workload.
 */
void prof_workload_of(const char *exe, const char *cgroup, const char *container,
		      struct prof_workload *out, char *buf, size_t len);

struct prof_label {
	char *name;
	char *value;
};

/* Labels every series carries: __name__, hostname, and --label K=V. */
struct prof_series_opts {
	const char *name;               /* __name__: "process_cpu" */
	const char *hostname;
	const struct prof_label *extra; /* --label, in their order; a name given twice: the last */
	size_t nextra;
};

/* One series: its labels (sorted by name, each name once) and its samples (copies of the caller's). */
struct prof_series {
	struct prof_label *labels;
	size_t nlabels;
	struct prof_sample *samples;
	size_t n;
	uint64_t count;                 /* the samples they stand for */
};

struct prof_series_set {
	struct prof_series *series;
	size_t n;
};

/*
 * @n samples into series by their workload (@wl[i] is sample i's): 0, or
 * -ENOMEM with @out empty. The samples' frames are the caller's.
 */
int prof_series_split(const struct prof_sample *s, const struct prof_workload *const *wl, size_t n,
		      const struct prof_series_opts *o, struct prof_series_set *out);
void prof_series_set_free(struct prof_series_set *set);

/*
 * --label K=V: 0 with @out's strings (malloc'd), or -EINVAL: a name is
 * [a-zA-Z_][a-zA-Z0-9_]* as Prometheus, Pyroscope and Parca take them, not
 * one of the reserved __name__; the value non-empty, at most 1024 bytes.
 */
int prof_label_parse(const char *kv, struct prof_label *out);
#define PROF_LABEL_VALUE_MAX 1024
/* @v as a label's value the servers take (valid UTF-8, no control character, bounded); malloc'd, NULL without memory. */
char *prof_label_value(const char *v);
bool prof_label_name_ok(const char *name);

#endif /* PERFMAPD_PROFILE_SERIES_H */

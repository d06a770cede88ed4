/*
 * The report: the pieces it was given read at once into the counter table's
 * values (perfmapd_counters.def says where each comes from), then written
 * as the status text or the metrics. Read in the loop's thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "in/in.h"
#include "lib/clock.h"
#include "lib/mapname.h"
#include "mirror/mirror.h"
#include "perfmapd_event.h"
#include "policy/policy.h"
#include "report/counters.h"
#include "report/metrics_text.h"
#include "report/report.h"
#include "report/status.h"
#include "store/store.h"

/* Each reason has its row in the table (refused_*, ns_writes_refused_*): a new one needs its own. */
_Static_assert(NSR__COUNT == 10, "a refusal of a container's map without its refused_* row");
_Static_assert(NSW__COUNT == 4, "a refusal to write in a container without its ns_writes_refused_* row");

/* Lines listed after the counters: the first MIRRORS_LISTED mirrors, JITS_LISTED processes with JIT code, JITDUMPS_LISTED dumps. */
#define MIRRORS_LISTED 32
#define JITS_LISTED 64
#define JITDUMPS_LISTED 64

struct report {
	struct report_pieces p;        /* its strings are the report's own copies */
	const struct loop_stats *loop;
	char pid[16];                  /* the agent's, as the status shows it */
	struct counter_values values;  /* the last reading */
	struct metrics_values metrics; /* the endpoint's, rendered from it */
};

/* What the table's rows read besides the pieces (n): read once for all of them. */
struct reading {
	const struct policy_stats *pol;
	struct archive_stats ar;
	const struct mirror_stats *ms; /* all 0 without mirrors */
	struct holds_stats hs;
	const struct jitdumps_stats *jd;   /* all 0 without jitdumps */
	const struct loop_stats *loop;
	const char *pid;
	uint64_t uptime_s;
	uint64_t with_maps;            /* processes of ours with a map at their path */
	uint64_t status_served, status_throttled;
	uint64_t bpf_run_ns, bpf_runs;
	uint64_t archive_files, archive_bytes;
	uint64_t mirrors, mirror_lag_p99_ms, mirror_behind_bytes;
	uint64_t jits, jits_lost;      /* processes with JIT code; of those, with no map now */
};

struct report *report__new(const struct report_pieces *p, const struct loop_stats *loop)
{
	struct report *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->p = *p;
	r->loop = loop;
	snprintf(r->pid, sizeof(r->pid), "%d", (int)getpid());
	r->p.map_dir = strdup(p->map_dir ? p->map_dir : "");
	r->p.archive_dir = strdup(p->archive_dir ? p->archive_dir : "");
	r->p.ns_map_dir = strdup(p->ns_map_dir ? p->ns_map_dir : "");
	r->p.exec_source = strdup(p->exec_source ? p->exec_source : "");
	r->p.exec_probe = strdup(p->exec_probe ? p->exec_probe : "");
	if (!r->p.map_dir || !r->p.archive_dir || !r->p.ns_map_dir || !r->p.exec_source ||
	    !r->p.exec_probe) {
		report__free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}

void report__free(struct report *r)
{
	if (!r)
		return;
	free((char *)r->p.map_dir);
	free((char *)r->p.archive_dir);
	free((char *)r->p.ns_map_dir);
	free((char *)r->p.exec_source);
	free((char *)r->p.exec_probe);
	free(r);
}

struct with_maps {
	const struct report_pieces *p;
	uint64_t n;
};

static void count_map(pid_t pid, void *ctx)
{
	struct with_maps *w = ctx;
	char name[32];
	struct stat st;

	/* The index rules out most without a system call. */
	if (!mapwatch__has(w->p->mw, pid))
		return;
	map_name(pid, name, sizeof(name));
	if (!fstatat(w->p->map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		w->n++;
}

static void count_jit(const struct policy_jit *j, void *ctx)
{
	(void)j;
	(*(uint64_t *)ctx)++;
}

/*
 * What the rows read besides the pieces, each read once. Two cost system
 * calls by the process or the program and are in the status alone: the
 * metrics, rendered every tick, go without them (0).
 */
static void read_now(const struct report *rep, struct reading *n, bool status)
{
	static const struct mirror_stats no_mirrors;
	static const struct jitdumps_stats no_jitdumps;
	const struct report_pieces *r = &rep->p;
	struct with_maps w = { .p = r };

	*n = (struct reading){ .loop = rep->loop, .ms = &no_mirrors, .jd = &no_jitdumps };
	if (r->jitdumps)
		n->jd = jitdumps__stats(r->jitdumps);
	n->pol = policy__stats(r->policy);
	archive__stats(r->ar, &n->ar);
	archive__usage(r->ar, &n->archive_files, &n->archive_bytes);
	if (r->holds)
		holds__stats(r->holds, &n->hs);
	if (r->mirrors) {
		n->ms = mirrors__stats(r->mirrors);
		n->mirrors = mirrors__active(r->mirrors);
		n->mirror_lag_p99_ms = mirrors__lag_p99_ms(r->mirrors);
		n->mirror_behind_bytes = mirrors__behind(r->mirrors);
	}
	n->pid = rep->pid;
	n->uptime_s = (clock_mono_ns() - rep->loop->started_ns) / 1000000000;
	if (r->inst)
		instance__stats(r->inst, &n->status_served, &n->status_throttled);
	if (status) {
		policy__for_each_pid(r->policy, count_map, &w);
		n->with_maps = w.n;
		events__run_stats(r->events, &n->bpf_run_ns, &n->bpf_runs);
	}
	policy__for_each_jit(r->policy, count_jit, &n->jits, &n->jits_lost);
}

/* Whether @c's piece runs: a counter of a piece that does not is not in the status. */
static bool shown(const struct report_pieces *r, const struct perfmapd_counter *c, const char *s)
{
	if ((c->flags & PMC_IF_MIRRORS) && !r->mirrors)
		return false;
	if ((c->flags & PMC_IF_EXECMAP) && !r->execmap)
		return false;
	if ((c->flags & PMC_IF_JITSCAN) && !r->jitscan)
		return false;
	return !(c->flags & PMC_IF_SET) || (s && s[0]);
}

/* Every row of the table, from where its owner column says (perfmapd_counters.def). */
static void read_values(const struct report *rep, struct counter_values *out, bool status)
{
	const struct report_pieces *r = &rep->p;
	struct reading now, *n = &now;

	read_now(rep, n, status);
	memset(out, 0, sizeof(*out));
#define READ_COUNTER(key, x) out->v[PMC_##key] = (uint64_t)(x);
#define READ_GAUGE(key, x) out->v[PMC_##key] = (uint64_t)(x);
#define READ_INFO(key, x) out->s[PMC_##key] = (x);
#define PERFMAPD_VALUE(key, x, group, type, ...) READ_##type(key, x)
#define PERFMAPD_POLICY(key, field, group, type, ...) READ_##type(key, n->pol->field)
#define PERFMAPD_ARCHIVE(key, field, group, type, ...) READ_##type(key, n->ar.field)
#define PERFMAPD_MIRROR(key, field, group, type, ...) READ_##type(key, n->ms->field)
#define PERFMAPD_HOLDS(key, field, group, type, ...) READ_##type(key, n->hs.field)
#define PERFMAPD_LOOP(key, field, group, type, ...) READ_##type(key, n->loop->field)
#define PERFMAPD_JITDUMP(key, field, group, type, ...) READ_##type(key, n->jd->field)
#include "perfmapd_counters.def"
#undef READ_COUNTER
#undef READ_GAUGE
#undef READ_INFO
	for (int i = 0; i < PMC__COUNT; i++)
		out->shown[i] = shown(r, &perfmapd_counters[i], out->s[i]);
}

/* One line per process with JIT code (PERFMAPD_LIST "jit_"), lost ones first, JITS_LISTED in all. */
struct jit_lines {
	struct status_text *t;
	bool lost;
	unsigned int n;
};

static void put_jit(struct status_text *t, const struct policy_jit *j)
{
	status_text__put(t, "jit_%d: comm=%s regions=%u bytes=%llu memfd_bytes=%llu lost=%s\n",
			 (int)j->pid, j->comm, j->regions, (unsigned long long)j->jit_bytes,
			 (unsigned long long)j->memfd_bytes, j->lost ? "yes" : "no");
}

static void jit_line(const struct policy_jit *j, void *ctx)
{
	struct jit_lines *jl = ctx;

	if (j->lost != jl->lost || jl->n >= JITS_LISTED)
		return;
	jl->n++;
	put_jit(jl->t, j);
}

/* The groups' lists: one line per mirror (PERFMAPD_LIST "mirror_"), per process with JIT code, per jitdump. */
static void lists(struct status_text *t, enum perfmapd_group_id group, void *ctx)
{
	const struct report *rep = ctx;
	struct jit_lines jl = { .t = t, .lost = true };
	uint64_t lost;

	if (group == PMG_MIRRORS && rep->p.mirrors && t->len < t->cap)
		t->len += mirrors__describe(rep->p.mirrors, t->buf + t->len, t->cap - t->len,
					    MIRRORS_LISTED);
	if (group == PMG_JITDUMP && rep->p.jitdumps && t->len < t->cap)
		t->len += jitdumps__describe(rep->p.jitdumps, t->buf + t->len, t->cap - t->len,
					     JITDUMPS_LISTED);
	if (group != PMG_JIT)
		return;
	policy__for_each_jit(rep->p.policy, jit_line, &jl, &lost);
	jl.lost = false;
	policy__for_each_jit(rep->p.policy, jit_line, &jl, &lost);
}

size_t report__status(struct report *r, char *buf, size_t len)
{
	read_values(r, &r->values, true);
	return status_render(&r->values, lists, r, buf, len);
}

/* One line per region kept (at most JITREGIONS_PER_PROC): "jit_region_<pid>: addr=0x... len=N". */
struct region_lines {
	struct status_text *t;
	pid_t pid;
};

static void region_line(uint64_t addr, uint64_t len, void *ctx)
{
	struct region_lines *rl = ctx;

	status_text__put(rl->t, "jit_region_%d: addr=0x%llx len=%llu\n", (int)rl->pid,
			 (unsigned long long)addr, (unsigned long long)len);
}

size_t report__answer(struct report *r, const struct status_request *rq, char *buf, size_t len)
{
	struct status_text t = { .buf = buf, .cap = len };
	struct region_lines rl = { .t = &t, .pid = rq->pid };
	struct policy_jit j;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (rq->kind != STATUS_REQ_PID) {
		status_text__put(&t, "error: not a request: one line, \"pid N\"\n");
		return t.len;
	}
	/* The first line tells the answer from a whole status, which an agent that takes no request sends. */
	status_text__put(&t, "request: pid %d\n", (int)rq->pid);
	if (!policy__jit_of(r->p.policy, rq->pid, &j))
		return t.len;
	put_jit(&t, &j);
	status_text__put(&t, "jit_regions_%d: kept=%u not_kept=%llu\n", (int)rq->pid,
			 j.regions_kept, (unsigned long long)j.regions_not_kept);
	policy__for_each_jit_region(r->p.policy, rq->pid, region_line, &rl);
	return t.len;
}

void report__metrics(struct report *r)
{
	struct metrics_values *v = &r->metrics;
	const struct policy_stats *s;

	if (!r->p.metrics)
		return;
	read_values(r, &r->values, false);
	s = policy__stats(r->p.policy);
	memset(v, 0, sizeof(*v));
	memcpy(v->v, r->values.v, sizeof(v->v));
	v->bpf = r->values.s[PMC_bpf];
	v->exec_maps = r->values.s[PMC_exec_mappings_source];
	memcpy(v->copy_latency, s->copy_latency, sizeof(v->copy_latency));
	v->copy_latency_sum_ns = s->copy_latency_sum_ns;
	metrics__update(r->p.metrics, v);
}

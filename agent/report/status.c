/*
 * The status report: every counter of every piece of the agent, as "key:
 * value" lines. perfmapctl prints it as it comes, or as JSON (--json):
 * keys are names; a value is a number or the text to the end of its line.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "lib/clock.h"
#include "in/events.h"
#include "in/execmap.h"
#include "in/holds.h"
#include "in/jitscan.h"
#include "lib/mapname.h"
#include "in/mapwatch.h"
#include "mirror/mirror.h"
#include "policy/policy.h"
#include "report/status.h"

struct report {
	char *buf;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void put(struct report *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len + 1 >= r->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < r->cap - r->len ? (size_t)n : r->cap - r->len - 1;
}

static void u64(struct report *r, const char *key, uint64_t v)
{
	put(r, "%s: %llu\n", key, (unsigned long long)v);
}

static void str(struct report *r, const char *key, const char *v)
{
	put(r, "%s: %s\n", key, v);
}

struct with_maps {
	const struct status_sources *src;
	uint64_t n;
};

static void count_map(pid_t pid, void *ctx)
{
	struct with_maps *w = ctx;
	char name[32];
	struct stat st;

	/* The index rules out most without a system call. */
	if (!mapwatch__has(w->src->mw, pid))
		return;
	map_name(pid, name, sizeof(name));
	if (!fstatat(w->src->map_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		w->n++;
}

static void report_events(struct report *r, const struct status_sources *src)
{
	uint64_t run_ns, runs;

	events__run_stats(src->events, &run_ns, &runs);
	u64(r, "events_fork", events__received(src->events, 1));
	u64(r, "events_exec", events__received(src->events, 2));
	u64(r, "events_exit", events__received(src->events, 3));
	u64(r, "events_dropped", events__dropped(src->events));
	u64(r, "bpf_run_time_ns", run_ns);
	u64(r, "bpf_runs", runs);
	u64(r, "resyncs", src->resyncs);
	u64(r, "rescans", src->rescans);
	u64(r, "rescans_deferred", src->rescans_deferred);
	str(r, "map_index", mapwatch__state(src->mw));
	u64(r, "map_index_overflows", mapwatch__overflows(src->mw));
	u64(r, "map_index_full", mapwatch__full(src->mw));
}

static void report_policy(struct report *r, const struct status_sources *src)
{
	const struct policy_stats *s = policy__stats(src->policy);

	u64(r, "copies_created", s->copies_created);
	u64(r, "copies_appended", s->copies_appended);
	u64(r, "copies_by_runtime", s->copies_by_runtime);
	u64(r, "copies_failed", s->copies_failed);
	u64(r, "copies_failed_quiet", s->copies_failed_quiet);
	u64(r, "resource_deferred", s->resource_deferred);
	u64(r, "copies_skipped_exec", s->copies_skipped_exec);
	u64(r, "copies_deferred", s->copies_deferred);
	u64(r, "copies_over_budget", s->copies_over_budget);
	u64(r, "copies_queue_full", s->copies_queue_full);
	u64(r, "copy_bytes", s->copy_bytes);
	u64(r, "copy_entries_left_out", s->copy_entries_left_out);
	u64(r, "copies_unfiltered", s->copies_unfiltered);
	u64(r, "stale_maps_archived", s->stale_archived);
	u64(r, "exec_maps_archived", s->exec_archived);
	u64(r, "exec_maps_dropped", s->exec_dropped);
	u64(r, "exec_maps_kept", s->exec_kept);
	u64(r, "ambiguous_kept", s->ambiguous_kept);
	u64(r, "decided_by_index", s->by_index);
	u64(r, "decided_by_identity", s->by_identity);
	u64(r, "decided_by_mappings", s->by_mappings);
	u64(r, "retained", policy__retained(src->policy));
	u64(r, "retention_s", src->retention_s);
	u64(r, "too_large", s->too_large);
	u64(r, "busy_deferred", s->busy_deferred);
	u64(r, "orphans_over_limit", s->orphans_over_limit);
	u64(r, "orphan_checks_dropped", s->orphan_checks_dropped);
	u64(r, "orphan_traps", s->orphan_traps);
	u64(r, "squatted_moved", s->squatted_moved);
	u64(r, "squatted_left", s->squatted_left);
	u64(r, "retained_over_limit", s->retained_over_limit);
	u64(r, "foreign_namespace_processes", s->foreign_ns);
	u64(r, "ns_mirrored_processes", s->ns_mirrored);
	u64(r, "errors", s->errors);
}

/* Profilers' holds on maps (hold.c, policy_hold.c). */
static void report_holds(struct report *r, const struct status_sources *src)
{
	const struct policy_stats *s = policy__stats(src->policy);
	struct holds_stats hs = { 0 };

	if (src->holds)
		holds__stats(src->holds, &hs);
	u64(r, "holders", hs.holders);
	u64(r, "held_processes", policy__held(src->policy));
	u64(r, "holds", s->holds);
	u64(r, "holds_refused", s->holds_refused);
	u64(r, "held_past_retention", s->held_past_retention);
	u64(r, "holders_refused", hs.holders_refused);
	u64(r, "hold_bad_requests", hs.bad_requests);
}

static void report_archive(struct report *r, const struct status_sources *src)
{
	struct archive_stats as;
	uint64_t files, bytes;

	archive__usage(src->ar, &files, &bytes);
	archive__stats(src->ar, &as);
	u64(r, "archived", as.archived);
	str(r, "archive_dir", src->archive_dir);
	u64(r, "archive_files", files);
	u64(r, "archive_bytes", bytes);
	u64(r, "archive_max_bytes", src->archive_max_bytes);
	u64(r, "archive_evicted", as.evicted);
	u64(r, "archive_failed", as.failed);
	u64(r, "archive_deferred", as.deferred);
	u64(r, "archive_deferred_share", as.deferred_share);
	u64(r, "archive_store_deferred", as.store_deferred);
	u64(r, "archive_queued_over_max", as.queued_over_max);
	u64(r, "archive_staged_refused", as.staged_refused);
	u64(r, "archive_uncompacted", as.uncompacted);
	u64(r, "restored_dropped", as.restored_dropped);
}

static void report_mirrors(struct report *r, const struct status_sources *src)
{
	const struct mirror_stats *ms;
	enum ns_write_refusal wwhy;
	enum ns_refusal why;

	str(r, "mirroring", src->mirrors ? "yes" : "no");
	if (!src->mirrors)
		return;
	ms = mirrors__stats(src->mirrors);
	str(r, "ns_map_dir", src->ns_map_dir);
	u64(r, "mirrors", mirrors__active(src->mirrors));
	u64(r, "mirrors_started", ms->started);
	u64(r, "mirrors_ended", ms->ended);
	u64(r, "mirror_bytes", ms->bytes);
	u64(r, "mirror_lines", ms->lines);
	u64(r, "mirror_lines_dropped", ms->lines_dropped);
	u64(r, "mirror_lag_p99_ms", mirrors__lag_p99_ms(src->mirrors));
	u64(r, "mirror_lag_max_ms", ms->lag_max_ms);
	u64(r, "mirror_behind_bytes", mirrors__behind(src->mirrors));
	u64(r, "mirrors_over_size", ms->over_size);
	u64(r, "mirror_dest_taken", ms->dest_taken);
	u64(r, "mirrors_over_limit", ms->over_limit);
	u64(r, "ns_copies", ms->ns_copies);
	u64(r, "ns_copies_failed", ms->ns_copies_failed);
	u64(r, "ns_copies_existing", ms->ns_copies_existing);
	u64(r, "ns_copies_dropped", ms->ns_copies_dropped);
	u64(r, "ns_copies_appended", ms->ns_copies_appended);
	u64(r, "ns_copy_entries_left_out", ms->ns_copy_entries_left_out);
	u64(r, "ns_copies_unfiltered", ms->ns_copies_unfiltered);
	u64(r, "ns_copies_parent_gone", ms->ns_copies_parent_gone);
	u64(r, "mirrors_cut_at_exit", ms->cut_at_exit);
	u64(r, "ns_stale_removed", ms->ns_stale_removed);
	u64(r, "ns_stale_skipped", ms->ns_stale_skipped);
	u64(r, "mirrors_rewritten", ms->rewritten);
	u64(r, "ns_shared", ms->shared);
	u64(r, "ns_ambiguous", ms->ambiguous);
	u64(r, "containers_refused", ms->refused_total);
	for (why = NSR_NONE + 1; why < NSR__COUNT; why++)
		u64(r, ns_refusal_key(why), ms->refused[why]);
	for (wwhy = 0; wwhy < NSW__COUNT; wwhy++)
		u64(r, ns_write_refusal_key(wwhy), ms->writes_refused[wwhy]);
}

/* One line per process with JIT code, after the mirrors: lost ones first, JITS_LISTED in all. */
#define JITS_LISTED 64

static void count_jit(const struct policy_jit *j, void *ctx)
{
	(void)j;
	(*(uint64_t *)ctx)++;
}

struct jit_lines {
	struct report *r;
	bool lost;
	unsigned int n;
};

static void jit_line(const struct policy_jit *j, void *ctx)
{
	struct jit_lines *jl = ctx;

	if (j->lost != jl->lost || jl->n >= JITS_LISTED)
		return;
	jl->n++;
	put(jl->r, "jit_%d: comm=%s regions=%u bytes=%llu memfd_bytes=%llu lost=%s\n", (int)j->pid,
	    j->comm, j->regions, (unsigned long long)j->jit_bytes,
	    (unsigned long long)j->memfd_bytes, j->lost ? "yes" : "no");
}

static void report_jit(struct report *r, const struct status_sources *src)
{
	const struct policy_stats *s = policy__stats(src->policy);
	struct jit_lines jl = { .r = r, .lost = true };
	uint64_t lost, jits = 0;

	str(r, "exec_mappings_source", src->exec_source);
	if (src->exec_probe && src->exec_probe[0])
		str(r, "exec_mappings_probe", src->exec_probe);
	if (src->execmap) {
		u64(r, "exec_mappings_cpus", execmap__cpus(src->execmap));
		u64(r, "exec_mappings_seen", execmap__seen(src->execmap));
		u64(r, "exec_mappings_lost", execmap__lost(src->execmap));
	}
	if (src->jitscan) {
		u64(r, "exec_mappings_proc_reads", jitscan__reads(src->jitscan));
		u64(r, "exec_mappings_proc_passes", jitscan__passes(src->jitscan));
	}
	policy__for_each_jit(src->policy, count_jit, &jits, &lost);
	u64(r, "jit_processes", jits);
	u64(r, "lost_symbol_processes", lost);
	u64(r, "lost_symbols_total", s->lost_symbols_total);
	u64(r, "lost_symbols_named_later", s->lost_symbols_named);
	u64(r, "lost_symbols_unsaid", s->lost_symbols_unsaid);
	u64(r, "jit_regions_seen", s->jit_regions_seen);
	u64(r, "jit_regions_unknown_process", s->jit_unknown);
	u64(r, "jit_watch_dropped", s->jit_watch_dropped);
	policy__for_each_jit(src->policy, jit_line, &jl, &lost);
	jl.lost = false;
	policy__for_each_jit(src->policy, jit_line, &jl, &lost);
}

/* One line per mirror, after the counters: the first MIRRORS_LISTED. */
#define MIRRORS_LISTED 32

size_t status_text(const struct status_sources *src, char *buf, size_t len)
{
	struct report r = { .buf = buf, .cap = len };
	struct with_maps w = { .src = src };

	if (!len)
		return 0;
	buf[0] = '\0';
	policy__for_each_pid(src->policy, count_map, &w);
	put(&r, "pid: %d\n", (int)getpid());
	str(&r, "map_dir", src->map_dir);
	u64(&r, "uptime_s", (clock_mono_ns() - src->started_ns) / 1000000000);
	str(&r, "bpf", events__kind(src->events));
	str(&r, "dry_run", src->dry_run ? "yes" : "no");
	u64(&r, "processes", policy__processes(src->policy));
	u64(&r, "processes_with_maps", w.n);
	u64(&r, "status_served", src->status_served);
	u64(&r, "status_throttled", src->status_throttled);
	report_events(&r, src);
	report_policy(&r, src);
	report_holds(&r, src);
	report_archive(&r, src);
	report_mirrors(&r, src);
	if (src->mirrors && r.len < len)
		r.len += mirrors__describe(src->mirrors, buf + r.len, len - r.len, MIRRORS_LISTED);
	report_jit(&r, src);
	return r.len;
}

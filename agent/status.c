/* The status report `perfmapctl status` prints: what the agent tracks, one "key: value" per line. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "events.h"
#include "instance.h"
#include "mapfile.h"
#include "mapwatch.h"

static uint64_t procs_with_maps(struct agent *a)
{
	struct stat st;
	struct proc *p;
	uint64_t n = 0;
	size_t i;

	/* The index rules out most without a system call. */
	proctab_for_each(&a->procs, i, p)
		if (!(p->flags & PROC_FOREIGN_NS) && mapwatch__has(a->watch, p->tgid) &&
		    !mapfile_stat(a, p->tgid, &st))
			n++;
	return n;
}

size_t status_format(struct agent *a, char *buf, size_t len)
{
	const struct agent_stats *s = &a->stats;
	uint64_t files, bytes, bpf_ns, bpf_runs;
	int n;

	archive_usage(a, &files, &bytes);
	events__run_stats(a->events, &bpf_ns, &bpf_runs);
	n = snprintf(buf, len,
		"pid: %d\n"
		"map_dir: %s\n"
		"uptime_s: %llu\n"
		"bpf: %s\n"
		"dry_run: %s\n"
		"processes: %zu\n"
		"processes_with_maps: %llu\n"
		"events_fork: %llu\n"
		"events_exec: %llu\n"
		"events_exit: %llu\n"
		"events_dropped: %llu\n"
		"bpf_run_time_ns: %llu\n"
		"bpf_runs: %llu\n"
		"resyncs: %llu\n"
		"map_index: %s\n"
		"map_index_overflows: %llu\n"
		"copies_created: %llu\n"
		"copies_appended: %llu\n"
		"copies_by_runtime: %llu\n"
		"copies_failed: %llu\n"
		"stale_maps_archived: %llu\n"
		"exec_maps_archived: %llu\n"
		"exec_maps_dropped: %llu\n"
		"retained: %zu\n"
		"retention_s: %llu\n"
		"archived: %llu\n"
		"archive_dir: %s\n"
		"archive_files: %llu\n"
		"archive_bytes: %llu\n"
		"archive_max_bytes: %llu\n"
		"archive_evicted: %llu\n"
		"archive_failed: %llu\n"
		"busy_deferred: %llu\n"
		"foreign_namespace_processes: %llu\n"
		"errors: %llu\n",
		(int)getpid(), a->cfg.map_dir,
		(unsigned long long)((mono_ns() - a->start_mono_ns) / 1000000000),
		events__kind(a->events), a->cfg.dry_run ? "yes" : "no",
		a->procs.count, (unsigned long long)procs_with_maps(a),
		(unsigned long long)s->events[1], (unsigned long long)s->events[2],
		(unsigned long long)s->events[3], (unsigned long long)s->dropped,
		(unsigned long long)bpf_ns, (unsigned long long)bpf_runs,
		(unsigned long long)s->resyncs,
		mapwatch__state(a->watch), (unsigned long long)s->index_overflows,
		(unsigned long long)s->copies_created, (unsigned long long)s->copies_appended,
		(unsigned long long)s->copies_by_runtime, (unsigned long long)s->copies_failed,
		(unsigned long long)s->stale_moved, (unsigned long long)s->exec_archived,
		(unsigned long long)s->exec_dropped, a->retained_count,
		(unsigned long long)a->cfg.retention_s, (unsigned long long)s->archived,
		a->cfg.archive_dir, (unsigned long long)files, (unsigned long long)bytes,
		(unsigned long long)a->cfg.archive_max_bytes,
		(unsigned long long)s->archive_evicted, (unsigned long long)s->archive_failed,
		(unsigned long long)s->busy_deferred,
		(unsigned long long)s->foreign_ns, (unsigned long long)s->errors);
	return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

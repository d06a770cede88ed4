/*
 * perfmapctl doctor PID: why a process's JIT code has no names in a profile,
 * and what fixes it. Reads the process (its runtime and perf option, its
 * mappings), its map on the host and in its container, and what the agent
 * knows, then prints findings with a cause and a fix: a table, or JSON.
 * Exit status 0 only when no finding is an error or a warning.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <json-c/json.h>

#include "ctl.h"
#include "doctor.h"

/*
 * Of the anonymous executable bytes below each region's highest entry.
 * Measured (docs/perfmapctl.md): CPython 3.12 -X perf 100%, Node 20
 * --perf-basic-prof 94%; of all the region's bytes only 3-6% and 11-12%,
 * their arenas being mostly empty still, so that measure cannot judge.
 */
#define DEFAULT_MIN_COVERAGE 50.0

enum doc_format { DOC_TABLE, DOC_JSON, DOC_JSON_PRETTY };

struct doctor {
	struct doc_opts o;
	struct doc_proc p;
	struct doc_map m;
	struct doc_agent a;
	struct perfmap_vmas vs;
	struct doc_jitdump j;
	struct doc_findings f;
};

static bool healthy(const struct doc_findings *f)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (f->v[i].sev != SEV_INFO)
			return false;
	return true;
}

static double coverage_pct(const struct perfmap_corr *c)
{
	return c->exec_anon_bytes ? 100.0 * (double)c->named_bytes / (double)c->exec_anon_bytes : 0;
}

static double used_coverage_pct(const struct perfmap_corr *c)
{
	return c->used_bytes ? 100.0 * (double)c->named_bytes / (double)c->used_bytes : 0;
}

/* ---- the table ---- */

static void print_process(const struct doctor *d)
{
	const struct doc_proc *p = &d->p;

	printf("process\n  pid        %d", (int)p->pid);
	if (p->ns_pid != p->pid)
		printf(" (%d in its pid namespace)", (int)p->ns_pid);
	printf("\n  comm       %s\n  exe        %s\n  uid        %u\n", p->comm,
	       p->exe[0] ? p->exe : "(unreadable)", (unsigned int)p->fsuid);
	printf("  runtime    %s", doc_runtime_str(p->rt));
	if (p->rt == RT_PYTHON && p->py_minor >= 0)
		printf(" 3.%d", p->py_minor);
	printf("; perf option: %s\n", p->perf_how[0] ? p->perf_how : "none");
	if (p->other_mnt_ns)
		printf("  namespace  another mount namespace (a container?)\n");
}

static void print_mapfile(const char *label, const struct doc_mapfile *mf)
{
	if (!mf->looked)
		return;
	printf("  %-10s %s: ", label, mf->path);
	if (!mf->exists)
		printf("none\n");
	else if (mf->refused)
		printf("%s\n", perfmap_open_strerror(mf->refused));
	else
		printf("%" PRIu64 " bytes, uid %u, mode %04o\n", (uint64_t)mf->st.st_size,
		       (unsigned int)mf->st.st_uid, (unsigned int)(mf->st.st_mode & 07777));
}

static void print_map(const struct doctor *d)
{
	const struct perfmap_corr *c = &d->m.corr;

	printf("map\n");
	print_mapfile("host", &d->m.host);
	print_mapfile("container", &d->m.ns);
	if (!d->m.checked)
		return;
	printf("  entries    %" PRIu64 " (%" PRIu64 " duplicates, %" PRIu64 " overlapping)\n",
	       c->table.entries, c->table.duplicates, c->table.overlapping);
	printf("  where      %" PRIu64 " in anonymous code, %" PRIu64 " stale, %" PRIu64
	       " in memfd code, %" PRIu64 " in file-backed code\n",
	       c->in_anon, c->stale.count, c->in_memfd.count, c->in_file.count);
}

/* Whether a map is written for the dump, in words: "written by perfmapd: /tmp/perf-1.map". */
static const char *jd_map_words(const struct doctor *d, char *buf, size_t len)
{
	const struct doc_agent *a = &d->a;
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/perf-%d.map", d->o.map_dir, (int)d->p.pid);
	switch (doc_jitdump_map(a)) {
	case DOC_JD_WRITTEN:
		snprintf(buf, len, "written by perfmapd: %s (%llu %s written from the dump)", path,
			 a->jd_maps_written, doc_pl(a->jd_maps_written, "map", "maps"));
		break;
	case DOC_JD_OWN_MAP:
		snprintf(buf, len, "the process's own: it writes %s itself, and perfmapd leaves it untouched", path);
		break;
	case DOC_JD_PENDING:
		snprintf(buf, len, "not yet: perfmapd writes %s once the dump names a function of this process", path);
		break;
	case DOC_JD_NOT_WRITTEN:
		snprintf(buf, len, "none written by perfmapd (map=%s%s)", a->jd_map,
			 a->jd_stopped ? ", its reading stopped" : "");
		break;
	case DOC_JD_NOT_LISTED:
		snprintf(buf, len, "not said: perfmapd's status does not list this dump");
		break;
	default:
		snprintf(buf, len, "no agent to write one; %s %s", path, d->m.host.exists ?
			 "is there (the process's own, or left by an agent)" : "is not there");
	}
	return buf;
}

static void print_jitdump(const struct doctor *d)
{
	const struct doc_jitdump *j = &d->j;
	const struct perfmap_jitdump_stats *s = &j->stats;
	char words[PATH_MAX + 256];

	if (!j->found)
		return;
	printf("jitdump\n  path       %s: ", j->path);
	if (j->refused) {
		printf("%s\n", doc_jitdump_refused_str(j->refused));
	} else {
		printf("%" PRIu64 " bytes, uid %u, mode %04o\n", (uint64_t)j->st.st_size,
		       (unsigned int)j->st.st_uid, (unsigned int)(j->st.st_mode & 07777));
		if (j->read_err)
			printf("  read       %s\n", strerror(-j->read_err));
	}
	if (j->read) {
		printf("  holds      %" PRIu64 " %s live: %" PRIu64 " %s, %" PRIu64 " %s (%" PRIu64
		       " unmatched), %" PRIu64 " debug info %s (%" PRIu64 " lines), %" PRIu64
		       " closes, %" PRIu64 " skipped\n",
		       s->funcs, doc_pl(s->funcs, "function", "functions"), s->loads,
		       doc_pl(s->loads, "load", "loads"), s->moves, doc_pl(s->moves, "move", "moves"),
		       s->moves_unmatched, s->debug_info, doc_pl(s->debug_info, "record", "records"),
		       s->debug_entries, s->closes, s->skipped + s->debug_unread);
		if (s->stop)
			printf("  stopped    %s at offset %" PRIu64 ": %s\n",
			       s->header ? "a malformed record" : "a malformed header", s->stop_offset,
			       perfmap__jitdump_stop_str(s->stop));
		else if (s->torn_bytes)
			printf("  torn       %" PRIu64 " %s at its end, not a whole record yet\n",
			       s->torn_bytes, doc_pl(s->torn_bytes, "byte", "bytes"));
	}
	printf("  perf map   %s\n", jd_map_words(d, words, sizeof(words)));
}

struct exec_counts {
	uint64_t regions, bytes;      /* anonymous executable: what a map names */
	uint64_t mregions, mbytes;    /* a JIT's shared memfd code */
};

static struct exec_counts exec_counts(const struct doctor *d)
{
	struct exec_counts n = { 0 };
	size_t i;

	for (i = 0; i < d->vs.n; i++) {
		const struct perfmap_vma *v = &d->vs.v[i];

		if (!(v->prot & PROT_EXEC))
			continue;
		if (v->kind == PERFMAP_VMA_ANON)
			n.regions++, n.bytes += v->hi - v->lo;
		else if (perfmap__vma_is_jit_memfd(v))
			n.mregions++, n.mbytes += v->hi - v->lo;
	}
	return n;
}

static void print_mappings(const struct doctor *d)
{
	const struct perfmap_corr *c = &d->m.corr;
	struct exec_counts n = exec_counts(d);
	uint64_t regions = n.regions, bytes = n.bytes, mregions = n.mregions, mbytes = n.mbytes;
	char b[32], nb[32];

	printf("mappings\n  anon exec  %" PRIu64 " %s, %s\n", regions,
	       doc_pl(regions, "region", "regions"), doc_bytes_str(bytes, b, sizeof(b)));
	printf("  memfd exec %" PRIu64 " %s, %s\n", mregions, doc_pl(mregions, "region", "regions"),
	       doc_bytes_str(mbytes, b, sizeof(b)));
	if (d->m.checked && c->exec_anon_bytes) {
		printf("  named      %s of %s (%.1f%%); %" PRIu64 " %s unnamed\n",
		       doc_bytes_str(c->named_bytes, nb, sizeof(nb)),
		       doc_bytes_str(c->exec_anon_bytes, b, sizeof(b)), coverage_pct(c),
		       c->unnamed.count, doc_pl(c->unnamed.count, "region", "regions"));
		printf("  used       %s up to the highest entry of each region: %.1f%% named\n",
		       doc_bytes_str(c->used_bytes, b, sizeof(b)), used_coverage_pct(c));
	}
}

/* The mmaps the agent kept: "  mmaps seen          3 kept (0 more not kept); 2 mapped, 1 unnamed". */
static void print_regions(const struct doc_agent *a)
{
	size_t i, mapped = 0, unnamed = 0;

	for (i = 0; i < a->nregions; i++) {
		mapped += a->regions[i].mapped;
		unnamed += a->regions[i].mapped && !a->regions[i].named;
	}
	printf("  mmaps seen          %llu kept (%llu more not kept); %zu still mapped, %zu of them named by no entry\n",
	       a->regions_kept, a->regions_not_kept, mapped, unnamed);
}

static void print_agent(const struct doctor *d)
{
	const struct doc_agent *a = &d->a;
	char b[32];

	if (!a->running) {
		printf("agent: %s\n", a->error);
		return;
	}
	printf("agent: running\n");
	if (a->exec_mappings_source[0])
		printf("  exec mappings from  %s\n", a->exec_mappings_source);
	if (a->lost_symbol_processes >= 0)
		printf("  lost symbols        %lld processes on this host\n", a->lost_symbol_processes);
	if (a->has_jit)
		printf("  this process        %llu JIT regions, %s; names lost: %s\n", a->jit_regions,
		       doc_bytes_str(a->jit_bytes, b, sizeof(b)), a->jit_lost ? "yes" : "no");
	if (a->has_mirror)
		printf("  mirror              %s\n", a->mirror);
	if (a->has_jitdump)
		printf("  this jitdump        %llu %s, %llu %s; map %s, %llu written; stopped: %s\n",
		       a->jd_records, doc_pl(a->jd_records, "record", "records"), a->jd_functions,
		       doc_pl(a->jd_functions, "function", "functions"), a->jd_map,
		       a->jd_maps_written, a->jd_stopped ? "yes" : "no");
	if (a->has_regions)
		print_regions(a);
}

static void print_findings(const struct doctor *d)
{
	const struct doc_finding *x;
	size_t i, k;

	printf("findings\n");
	for (i = 0; i < d->f.n; i++) {
		x = &d->f.v[i];
		printf("  %-7s  %s: %s\n", x->sev == SEV_ERROR ? "ERROR" : x->sev == SEV_WARNING ?
		       "WARNING" : "info", x->code, x->cause);
		if (x->naddrs) {
			printf("           at");
			for (k = 0; k < x->naddrs; k++)
				printf(" 0x%" PRIx64, x->addrs[k]);
			printf("%s\n", x->count > x->naddrs ? " ..." : "");
		}
		printf("           fix: %s\n", x->fix);
	}
	if (!d->f.n)
		printf("  none\n");
	printf("verdict: %s\n", healthy(&d->f) ? "healthy" : "NOT healthy");
}

static void print_table(const struct doctor *d)
{
	print_process(d);
	print_map(d);
	print_jitdump(d);
	print_mappings(d);
	print_agent(d);
	print_findings(d);
}

/* ---- JSON ---- */

#define J_ADD(obj, key, val) json_object_object_add(obj, key, val)

static struct json_object *j_u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static struct json_object *j_str(const char *s)
{
	return json_object_new_string(s);
}

static struct json_object *j_hex(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return j_str(buf);
}

static struct json_object *json_process(const struct doc_proc *p)
{
	struct json_object *o = json_object_new_object();

	J_ADD(o, "pid", j_u64((uint64_t)p->pid));
	J_ADD(o, "ns_pid", j_u64((uint64_t)p->ns_pid));
	J_ADD(o, "comm", j_str(p->comm));
	J_ADD(o, "exe", j_str(p->exe));
	J_ADD(o, "uid", j_u64(p->fsuid));
	J_ADD(o, "runtime", j_str(doc_runtime_str(p->rt)));
	if (p->rt == RT_PYTHON && p->py_minor >= 0)
		J_ADD(o, "python_minor", j_u64((uint64_t)p->py_minor));
	J_ADD(o, "perf_option", p->perf_how[0] ? j_str(p->perf_how) : NULL);
	J_ADD(o, "other_mount_namespace", json_object_new_boolean(p->other_mnt_ns));
	return o;
}

static struct json_object *json_mapfile(const struct doc_mapfile *mf)
{
	struct json_object *o;

	if (!mf->looked)
		return NULL;
	o = json_object_new_object();
	J_ADD(o, "path", j_str(mf->path));
	J_ADD(o, "exists", json_object_new_boolean(mf->exists));
	if (mf->refused)
		J_ADD(o, "refused", j_str(perfmap_open_strerror(mf->refused)));
	if (mf->exists && !mf->refused) {
		J_ADD(o, "bytes", j_u64((uint64_t)mf->st.st_size));
		J_ADD(o, "uid", j_u64(mf->st.st_uid));
		J_ADD(o, "mode", j_u64(mf->st.st_mode & 07777));
	}
	return o;
}

static struct json_object *json_map(const struct doc_map *m)
{
	const struct perfmap_corr *c = &m->corr;
	struct json_object *o = json_object_new_object();

	J_ADD(o, "host", json_mapfile(&m->host));
	J_ADD(o, "container", json_mapfile(&m->ns));
	J_ADD(o, "read", m->used ? j_str(m->used->path) : NULL);
	if (!m->checked)
		return o;
	J_ADD(o, "entries", j_u64(c->table.entries));
	J_ADD(o, "duplicates", j_u64(c->table.duplicates));
	J_ADD(o, "overlapping", j_u64(c->table.overlapping));
	J_ADD(o, "entries_in_anon", j_u64(c->in_anon));
	J_ADD(o, "entries_stale", j_u64(c->stale.count));
	J_ADD(o, "entries_in_memfd", j_u64(c->in_memfd.count));
	J_ADD(o, "entries_in_files", j_u64(c->in_file.count));
	return o;
}

static struct json_object *json_jitdump(const struct doctor *d)
{
	const struct doc_jitdump *j = &d->j;
	const struct perfmap_jitdump_stats *s = &j->stats;
	struct json_object *o, *stop = NULL;

	if (!j->found)
		return NULL;
	o = json_object_new_object();
	J_ADD(o, "path", j_str(j->path));
	J_ADD(o, "named_pid", j->named_pid ? j_u64((uint64_t)j->named_pid) : NULL);
	if (j->refused)
		J_ADD(o, "refused", j_str(doc_jitdump_refused_str(j->refused)));
	else {
		J_ADD(o, "bytes", j_u64((uint64_t)j->st.st_size));
		J_ADD(o, "uid", j_u64(j->st.st_uid));
		J_ADD(o, "mode", j_u64(j->st.st_mode & 07777));
	}
	if (j->read_err)
		J_ADD(o, "read_error", j_str(strerror(-j->read_err)));
	if (j->read) {
		J_ADD(o, "header_pid", s->header ? j_u64(s->pid) : NULL);
		J_ADD(o, "records", j_u64(s->records));
		J_ADD(o, "functions", j_u64(s->funcs));
		J_ADD(o, "loads", j_u64(s->loads));
		J_ADD(o, "moves", j_u64(s->moves));
		J_ADD(o, "moves_unmatched", j_u64(s->moves_unmatched));
		J_ADD(o, "debug_info", j_u64(s->debug_info));
		J_ADD(o, "debug_entries", j_u64(s->debug_entries));
		J_ADD(o, "closes", j_u64(s->closes));
		J_ADD(o, "skipped", j_u64(s->skipped + s->debug_unread));
		J_ADD(o, "torn_bytes", j_u64(s->torn_bytes));
		if (s->stop) {
			stop = json_object_new_object();
			J_ADD(stop, "reason", j_str(perfmap__jitdump_stop_str(s->stop)));
			J_ADD(stop, "offset", j_u64(s->stop_offset));
			J_ADD(stop, "in_header", json_object_new_boolean(!s->header));
		}
		J_ADD(o, "malformed", stop);
	}
	J_ADD(o, "map", j_str(doc_jd_map_str(doc_jitdump_map(&d->a))));
	return o;
}

static struct json_object *json_mappings(const struct doctor *d)
{
	const struct perfmap_corr *c = &d->m.corr;
	struct json_object *o = json_object_new_object();
	struct exec_counts n = exec_counts(d);
	uint64_t regions = n.regions, bytes = n.bytes, mregions = n.mregions, mbytes = n.mbytes;

	J_ADD(o, "exec_anon_regions", j_u64(regions));
	J_ADD(o, "exec_anon_bytes", j_u64(bytes));
	J_ADD(o, "exec_memfd_regions", j_u64(mregions));
	J_ADD(o, "exec_memfd_bytes", j_u64(mbytes));
	if (d->m.checked) {
		J_ADD(o, "named_bytes", j_u64(c->named_bytes));
		J_ADD(o, "coverage_pct", json_object_new_double(coverage_pct(c)));
		J_ADD(o, "used_bytes", j_u64(c->used_bytes));
		J_ADD(o, "used_coverage_pct", json_object_new_double(used_coverage_pct(c)));
		J_ADD(o, "unnamed_regions", j_u64(c->unnamed.count));
	}
	return o;
}

/* The mmaps the agent kept of the process, each as it lies now. */
static struct json_object *json_regions(const struct doc_agent *a)
{
	struct json_object *o = json_object_new_object(), *arr = json_object_new_array(), *r;
	const struct doc_region *g;
	size_t i;

	J_ADD(o, "kept", j_u64(a->regions_kept));
	J_ADD(o, "not_kept", j_u64(a->regions_not_kept));
	for (i = 0; i < a->nregions; i++) {
		g = &a->regions[i];
		r = json_object_new_object();
		J_ADD(r, "address", j_hex(g->addr));
		J_ADD(r, "bytes", j_u64(g->len));
		J_ADD(r, "mapped", json_object_new_boolean(g->mapped));
		J_ADD(r, "named", json_object_new_boolean(g->named));
		json_object_array_add(arr, r);
	}
	J_ADD(o, "regions", arr);
	return o;
}

static struct json_object *json_agent(const struct doc_agent *a)
{
	struct json_object *o = json_object_new_object(), *j;

	J_ADD(o, "running", json_object_new_boolean(a->running));
	if (!a->running) {
		J_ADD(o, "why", j_str(a->error));
		return o;
	}
	if (a->exec_mappings_source[0])
		J_ADD(o, "exec_mappings_source", j_str(a->exec_mappings_source));
	if (a->lost_symbol_processes >= 0)
		J_ADD(o, "lost_symbol_processes", j_u64((uint64_t)a->lost_symbol_processes));
	if (a->has_jit) {
		j = json_object_new_object();
		J_ADD(j, "regions", j_u64(a->jit_regions));
		J_ADD(j, "bytes", j_u64(a->jit_bytes));
		J_ADD(j, "memfd_bytes", j_u64(a->jit_memfd_bytes));
		J_ADD(j, "lost", json_object_new_boolean(a->jit_lost));
		J_ADD(o, "jit", j);
	}
	if (a->has_mirror)
		J_ADD(o, "mirror", j_str(a->mirror));
	if (a->has_jitdump) {
		j = json_object_new_object();
		J_ADD(j, "records", j_u64(a->jd_records));
		J_ADD(j, "functions", j_u64(a->jd_functions));
		J_ADD(j, "maps_written", j_u64(a->jd_maps_written));
		J_ADD(j, "map", j_str(a->jd_map));
		J_ADD(j, "stopped", json_object_new_boolean(a->jd_stopped));
		J_ADD(o, "jitdump", j);
	}
	if (a->has_regions)
		J_ADD(o, "mmaps", json_regions(a));
	return o;
}

static struct json_object *json_findings(const struct doc_findings *f)
{
	struct json_object *arr = json_object_new_array(), *o, *addrs;
	size_t i, k;

	for (i = 0; i < f->n; i++) {
		o = json_object_new_object();
		J_ADD(o, "code", j_str(f->v[i].code));
		J_ADD(o, "severity", j_str(doc_severity_str(f->v[i].sev)));
		J_ADD(o, "count", j_u64(f->v[i].count));
		addrs = json_object_new_array();
		for (k = 0; k < f->v[i].naddrs; k++)
			json_object_array_add(addrs, j_hex(f->v[i].addrs[k]));
		J_ADD(o, "addresses", addrs);
		J_ADD(o, "cause", j_str(f->v[i].cause));
		J_ADD(o, "fix", j_str(f->v[i].fix));
		json_object_array_add(arr, o);
	}
	return arr;
}

static void print_json(const struct doctor *d, bool pretty)
{
	struct json_object *o = json_object_new_object();

	J_ADD(o, "pid", j_u64((uint64_t)d->p.pid));
	J_ADD(o, "healthy", json_object_new_boolean(healthy(&d->f)));
	J_ADD(o, "process", json_process(&d->p));
	J_ADD(o, "map", json_map(&d->m));
	J_ADD(o, "jitdump", json_jitdump(d));
	J_ADD(o, "mappings", json_mappings(d));
	J_ADD(o, "agent", json_agent(&d->a));
	J_ADD(o, "findings", json_findings(&d->f));
	puts(json_object_to_json_string_ext(o, pretty ? JSON_C_TO_STRING_PRETTY :
					    JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

/* ---- the command ---- */

static int examine(struct doctor *d)
{
	int err;

	err = doc_proc_read(d->p.pid, &d->p);
	if (err)
		return err;
	err = perfmap__vmas_read(d->p.pid, &d->vs);
	if (err)
		return err;
	err = doc_map_find(&d->o, &d->p, &d->m);
	if (err)
		return err;
	err = doc_map_check(&d->o, &d->vs, &d->m);
	if (err)
		return err;
	doc_jitdump_read(&d->p, &d->vs, &d->j);
	doc_agent_ask(&d->o, d->p.pid, &d->a);
	doc_regions_judge(&d->o, &d->m, &d->vs, &d->a);
	doc_findings_make(&d->o, &d->p, &d->m, &d->vs, &d->a, &d->j, &d->f);
	return 0;
}

static int doctor(struct doctor *d, enum doc_format format)
{
	int err;

	err = examine(d);
	if (err == -ESRCH || err == -ENOENT) {
		ctl_error("doctor: no process %d", (int)d->p.pid);
		doc_archive_say(&d->o, d->p.pid);
		goto release_maps;
	}
	if (err == -EACCES || err == -EPERM) {
		ctl_error("doctor: process %d: permission denied (run as root, or as its user)",
			  (int)d->p.pid);
		goto release_maps;
	}
	if (err) {
		ctl_error("doctor: process %d: %s", (int)d->p.pid, strerror(-err));
		goto release_maps;
	}
	if (format == DOC_TABLE)
		print_table(d);
	else
		print_json(d, format == DOC_JSON_PRETTY);
release_maps:
	doc_map_release(&d->m);
	perfmap__vmas_release(&d->vs);
	return err ? CTL_ERROR : healthy(&d->f) ? CTL_OK : CTL_FINDING;
}

static const char usage_text[] =
	"Usage: perfmapctl doctor [--map-dir DIR] [--run-dir DIR] [--archive-dir DIR] [--json | --pretty]\n"
	"                         [--min-coverage PCT] [--max-bytes N] PID\n";

int cmd_doctor(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "map-dir", required_argument, NULL, 'd' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "archive-dir", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "min-coverage", required_argument, NULL, 'c' },
		{ "max-bytes", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct doctor d;
	enum doc_format format = DOC_TABLE;
	char *end;
	long pid;
	int opt;

	d.o = (struct doc_opts){ .map_dir = "/tmp", .run_dir = PERFMAPD_RUN_DIR,
				 .min_coverage = DEFAULT_MIN_COVERAGE };
	while ((opt = getopt_long(argc, argv, "d:r:a:jpc:m:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			d.o.map_dir = optarg;
			break;
		case 'r':
			d.o.run_dir = optarg;
			break;
		case 'a':
			d.o.archive_dir = optarg;
			break;
		case 'j':
			format = format == DOC_TABLE ? DOC_JSON : format;
			break;
		case 'p':
			format = DOC_JSON_PRETTY;
			break;
		case 'c':
			d.o.min_coverage = strtod(optarg, &end);
			if (*end || end == optarg || d.o.min_coverage < 0 || d.o.min_coverage > 100) {
				ctl_error("doctor: --min-coverage %s: not a percentage", optarg);
				return CTL_ERROR;
			}
			break;
		case 'm':
			if (perfmap__parse_bytes(optarg, &d.o.max_bytes)) {
				ctl_error("doctor: --max-bytes %s: not a size", optarg);
				return CTL_ERROR;
			}
			break;
		case 'h':
			fputs(usage_text, stdout);
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (argc - optind != 1) {
		ctl_error("doctor: give exactly one PID");
		return CTL_ERROR;
	}
	pid = strtol(argv[optind], &end, 10);
	if (*end || end == argv[optind] || pid <= 0 || pid > 1 << 22) {
		ctl_error("doctor: '%s' is not a pid", argv[optind]);
		return CTL_ERROR;
	}
	d.p.pid = (pid_t)pid;
	return doctor(&d, format);
}

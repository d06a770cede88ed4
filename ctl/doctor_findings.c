/*
 * perfmapctl doctor: the findings. Each names what was seen, in this
 * process's own terms (its runtime, its pid, its map's path, its bytes), and
 * the one change that fixes it. Codes are stable: scripts read them from
 * --json, docs/perfmapctl.md lists them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "doctor.h"

/* What the doctor looks at, gathered once. */
struct facts {
	const struct doc_opts *o;
	const struct doc_proc *p;
	const struct doc_map *m;
	const struct doc_agent *a;
	const struct doc_jitdump *j;
	uint64_t anon_regions, anon_bytes, memfd_regions, memfd_bytes;
	char who[96];        /* "node 1234", "python3.12 1234" */
	char host_path[PATH_MAX];
};

const char *doc_severity_str(enum doc_severity s)
{
	return s == SEV_ERROR ? "error" : s == SEV_WARNING ? "warning" : "info";
}

const char *doc_bytes_str(uint64_t b, char *buf, size_t len)
{
	if (b >= 1u << 20)
		snprintf(buf, len, "%.1f MiB", (double)b / (1u << 20));
	else if (b >= 1u << 10)
		snprintf(buf, len, "%.1f KiB", (double)b / (1u << 10));
	else
		snprintf(buf, len, "%" PRIu64 " B", b);
	return buf;
}

static struct doc_finding *add(struct doc_findings *f, const char *code, enum doc_severity sev,
			       uint64_t count)
{
	struct doc_finding *d;

	if (f->n == DOC_MAX_FINDINGS)
		return NULL;
	d = &f->v[f->n++];
	memset(d, 0, sizeof(*d));
	d->code = code;
	d->sev = sev;
	d->count = count;
	return d;
}

static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void addrs_from(struct doc_finding *d, const struct perfmap_corr_list *l)
{
	size_t i;

	for (i = 0; i < l->kept && i < DOC_MAX_ADDRS; i++)
		d->addrs[d->naddrs++] = l->v[i].start;
}

static void count_exec(struct facts *x, const struct perfmap_vmas *vs)
{
	const struct perfmap_vma *v;
	size_t i;

	for (i = 0; i < vs->n; i++) {
		v = &vs->v[i];
		if (!(v->prot & PROT_EXEC))
			continue;
		if (v->kind == PERFMAP_VMA_ANON) {
			x->anon_regions++;
			x->anon_bytes += v->hi - v->lo;
		} else if (perfmap__vma_is_jit_memfd(v)) {
			x->memfd_regions++;
			x->memfd_bytes += v->hi - v->lo;
		}
	}
}

static void name_process(struct facts *x)
{
	const struct doc_proc *p = x->p;

	if (p->rt == RT_PYTHON && p->py_minor >= 0)
		snprintf(x->who, sizeof(x->who), "python3.%d %d", p->py_minor, (int)p->pid);
	else if (p->rt == RT_GENERIC)
		snprintf(x->who, sizeof(x->who), "%s %d", p->comm[0] ? p->comm : "process",
			 (int)p->pid);
	else
		snprintf(x->who, sizeof(x->who), "%s %d", doc_runtime_str(p->rt), (int)p->pid);
	snprintf(x->host_path, sizeof(x->host_path), "%s/perf-%d.map", x->o->map_dir,
		 (int)p->pid);
}

/* "runs 3.2 MiB of JIT code in 41 anonymous executable regions" */
static const char *jit_words(const struct facts *x, char *buf, size_t len)
{
	char b[32], mb[32];

	if (x->memfd_regions)
		snprintf(buf, len, "runs %s of JIT code in %" PRIu64 " anonymous and %s in %" PRIu64
			 " memfd executable %s", doc_bytes_str(x->anon_bytes, b, sizeof(b)),
			 x->anon_regions, doc_bytes_str(x->memfd_bytes, mb, sizeof(mb)),
			 x->memfd_regions, doc_pl(x->memfd_regions, "region", "regions"));
	else
		snprintf(buf, len, "runs %s of JIT code in %" PRIu64 " anonymous executable %s",
			 doc_bytes_str(x->anon_bytes, b, sizeof(b)), x->anon_regions,
			 doc_pl(x->anon_regions, "region", "regions"));
	return buf;
}

/* The runtime's own way to a map, for a process that has none. */
static const char *perf_option_fix(const struct facts *x, char *buf, size_t len)
{
	switch (x->p->rt) {
	case RT_PYTHON:
		snprintf(buf, len, "restart it with -X perf (or PYTHONPERFSUPPORT=1), or have it call sys.activate_stack_trampoline(\"perf\")");
		break;
	case RT_NODE:
		snprintf(buf, len, "restart it with --perf-basic-prof (or NODE_OPTIONS=--perf-basic-prof)");
		break;
	case RT_DOTNET:
		snprintf(buf, len, "restart it with DOTNET_PerfMapEnabled=1 (3: the map without a jitdump)");
		break;
	case RT_JAVA:
		snprintf(buf, len, "run `jcmd %d Compiler.perfmap` (again once more code is compiled), or start it with -XX:+DumpPerfMapAtExit",
			 (int)x->p->pid);
		break;
	default:
		snprintf(buf, len, "start its runtime with its perf map option (CPython -X perf, Node --perf-basic-prof, .NET DOTNET_PerfMapEnabled=1, Ruby --yjit-perf, LuaJIT built with LUAJIT_USE_PERFTOOLS)");
	}
	return buf;
}

static void refused(struct doc_findings *f, const struct doc_mapfile *mf)
{
	struct doc_finding *d;

	if (!mf->refused || !(d = add(f, "map_refused", SEV_ERROR, 1)))
		return;
	say(d->cause, sizeof(d->cause), "%s %s: no consumer should read it, and perfmapd does not",
	    mf->path, perfmap_open_strerror(mf->refused));
	say(d->fix, sizeof(d->fix), "remove it; the runtime makes a new map when it starts");
}

/* "; the dump is named for pid N ...": its name carries another pid than the process's (a parent's dump). */
static const char *inherited_words(const struct facts *x, char *buf, size_t len)
{
	const struct doc_jitdump *j = x->j;

	buf[0] = '\0';
	if (j->named_pid && j->named_pid != x->p->pid && j->named_pid != x->p->ns_pid)
		snprintf(buf, len, "; the dump is named for pid %d (a parent's, kept across fork), and perf inject -j takes it for that pid only",
			 (int)j->named_pid);
	return buf;
}

/*
 * A jitdump and no map: only perf reads the dump, and only after inject.
 * Said instead of no_map, whose fix (the runtime's map option) is not the
 * only one here: perfmapd writes the map from the dump.
 */
static void jitdump_no_map(struct facts *x, struct doc_findings *f)
{
	const struct doc_jitdump *j = x->j;
	const struct doc_agent *a = x->a;
	enum doc_jd_map mc = doc_jitdump_map(a);
	struct doc_finding *d;
	char what[96], inh[160], agent[192];

	if (!(d = add(f, "jitdump_no_map", mc == DOC_JD_PENDING ? SEV_INFO : SEV_WARNING,
		      j->read ? j->stats.funcs : 0)))
		return;
	if (j->read)
		snprintf(what, sizeof(what), "%" PRIu64 " %s", j->stats.funcs,
			 doc_pl(j->stats.funcs, "function", "functions"));
	else
		snprintf(what, sizeof(what), "unread: %s", j->refused ?
			 doc_jitdump_refused_str(j->refused) : strerror(-j->read_err));
	inherited_words(x, inh, sizeof(inh));
	if (mc == DOC_JD_PENDING) {
		say(d->cause, sizeof(d->cause), "%s describes its JIT code in the jitdump %s (%s) and has no %s yet: perfmapd reads the dump and writes the map once it names a function of this process%s",
		    x->who, j->path, what, x->host_path, inh);
		say(d->fix, sizeof(d->fix), "nothing to do: perfmapctl doctor %d again shows the map once written",
		    (int)x->p->pid);
		return;
	}
	if (mc == DOC_JD_NO_AGENT)
		snprintf(agent, sizeof(agent), "no perfmapd runs to write one");
	else if (a->has_jitdump)
		snprintf(agent, sizeof(agent), "perfmapd reads the dump but writes no map for it (map=%s%s)",
			 a->jd_map, a->jd_stopped ? ", its reading stopped" : "");
	else
		snprintf(agent, sizeof(agent), "perfmapd's status does not list this dump (refused, over its bound, not seen yet, or past the dumps it lists: its log says which)");
	say(d->cause, sizeof(d->cause), "%s describes its JIT code in the jitdump %s (%s) and has no %s, and %s: only perf reads a jitdump, after `perf record -k mono` and `perf inject -j`; bcc, bpftrace, blazesym and perf without inject see hex%s",
	    x->who, j->path, what, x->host_path, agent, inh);
	say(d->fix, sizeof(d->fix), "record with `perf record -k mono`, then `perf inject -j -i perf.data -o jit.data` and report jit.data; or %s; or write a map now: perfmapctl jitdump %s -o %s",
	    mc == DOC_JD_NO_AGENT ? "run perfmapd, which writes the map from the dump as it grows" :
	    "see perfmapd's log for why it writes none", j->path, x->host_path);
}

/* Neither the host nor the container holds a map. */
static void no_map(struct facts *x, struct doc_findings *f)
{
	const struct doc_proc *p = x->p;
	struct doc_finding *d;
	char jw[192], fix[256];
	bool jit = x->anon_bytes || x->memfd_bytes;

	if (x->j->found) {
		jitdump_no_map(x, f);
		return;
	}
	if (!x->m->dir_writable) {
		if (!(d = add(f, "map_not_writable", SEV_ERROR, 1)))
			return;
		say(d->cause, sizeof(d->cause), "%s has no %s and cannot make one: %s", x->who,
		    x->host_path, x->m->why_not_writable);
		say(d->fix, sizeof(d->fix), "let uid %u create files in the map directory (/tmp is mode 1777), then restart the runtime",
		    (unsigned int)p->fsuid);
		return;
	}
	if (p->perf_jitdump_only) {
		if (!(d = add(f, "jitdump_only", SEV_INFO, 1)))
			return;
		say(d->cause, sizeof(d->cause), "%s writes a jitdump (/tmp/jit-%d.dump), not a map (%s)",
		    x->who, (int)p->ns_pid, p->perf_how);
		say(d->fix, sizeof(d->fix), "record with `perf record -k 1` and run `perf inject --jit` on the data; for a map instead, %s",
		    perf_option_fix(x, fix, sizeof(fix)));
		return;
	}
	if (p->rt == RT_PYTHON && p->py_minor >= 0 && p->py_minor < 12) {
		if (!(d = add(f, "no_perf_support", SEV_INFO, 0)))
			return;
		say(d->cause, sizeof(d->cause), "%s cannot write a perf map: CPython has -X perf from 3.12",
		    x->who);
		say(d->fix, sizeof(d->fix), "run it on CPython 3.12 or later with -X perf");
		return;
	}
	if (p->perf_on) {
		if (!(d = add(f, "no_map", SEV_ERROR, 0)))
			return;
		say(d->cause, sizeof(d->cause), "%s was started with %s but has no %s%s%s", x->who,
		    p->perf_how, x->host_path, jit ? " and " : "", jit ? jit_words(x, jw, sizeof(jw)) : "");
		say(d->fix, sizeof(d->fix), "its map was removed or written to another directory: restart it (perfmapd keeps maps until their process has exited and the retention has passed)");
		return;
	}
	if (p->rt == RT_PYTHON) {
		if (!(d = add(f, "no_map", jit ? SEV_ERROR : SEV_WARNING, 0)))
			return;
		say(d->cause, sizeof(d->cause), "%s was started without -X perf or PYTHONPERFSUPPORT=1: perf shows its Python functions as _PyEval_EvalFrameDefault, and there is no %s",
		    x->who, x->host_path);
		say(d->fix, sizeof(d->fix), "%s", perf_option_fix(x, fix, sizeof(fix)));
		return;
	}
	if (!jit) {
		if (!(d = add(f, "no_jit_code", SEV_INFO, 0)))
			return;
		say(d->cause, sizeof(d->cause), "%s runs no code from anonymous or memfd executable memory: perf names all of it from files; no map is needed",
		    x->who);
		say(d->fix, sizeof(d->fix), "nothing to do");
		return;
	}
	if (!(d = add(f, "no_map", SEV_ERROR, x->anon_regions + x->memfd_regions)))
		return;
	say(d->cause, sizeof(d->cause), "%s %s but has no %s", x->who, jit_words(x, jw, sizeof(jw)),
	    x->host_path);
	say(d->fix, sizeof(d->fix), "%s", perf_option_fix(x, fix, sizeof(fix)));
}

static void container_only(struct facts *x, struct doc_findings *f)
{
	const struct doc_map *m = x->m;
	struct doc_finding *d;

	if (m->host.exists || !m->ns.exists)
		return;
	if (!(d = add(f, "map_only_in_container", SEV_WARNING, 1)))
		return;
	if (x->p->other_mnt_ns)
		say(d->cause, sizeof(d->cause), "%s's map is only in its container's /tmp (%s, as pid %d): perf finds it only while the process lives; samply, blazesym and any report after it exits look for %s",
		    x->who, m->ns.path, (int)x->p->ns_pid, x->host_path);
	else
		say(d->cause, sizeof(d->cause), "%s's map is under the pid its pid namespace gives it (%s): perf, samply and blazesym look for %s",
		    x->who, m->ns.path, x->host_path);
	say(d->fix, sizeof(d->fix), "run perfmapd, which mirrors it to %s; or copy it now: perfmapctl compact %s -o %s",
	    x->host_path, m->ns.path, x->host_path);
}

static void not_writable(struct facts *x, struct doc_findings *f)
{
	const struct doc_map *m = x->m;
	const struct doc_mapfile *mf = x->p->other_mnt_ns || m->ns.exists ? &m->ns : &m->host;
	struct doc_finding *d;

	if (!mf->exists || m->file_writable || !(d = add(f, "map_not_writable", SEV_ERROR, 1)))
		return;
	say(d->cause, sizeof(d->cause), "%s cannot write %s: %s", x->who, mf->path,
	    m->why_not_writable);
	say(d->fix, sizeof(d->fix), "remove it (or chown it to uid %u) and restart the runtime: CPython writes nothing at all, silently, when its map cannot be opened",
	    (unsigned int)x->p->fsuid);
}

static void entries(struct facts *x, struct doc_findings *f)
{
	const struct perfmap_corr *c = &x->m->corr;
	const char *path = x->m->used->path;
	struct doc_finding *d;

	/*
	 * Runtimes that collect code (V8) leave entries for code they freed:
	 * harmless while nothing else runs there. A map none of whose entries
	 * names the process's own code is another process's.
	 */
	if (c->stale.count && (d = add(f, "stale_entries", c->in_anon ? SEV_INFO : SEV_WARNING,
				       c->stale.count))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " of %" PRIu64 " %s in %s %s addresses in no executable mapping of %s (first at 0x%" PRIx64 "): %s",
		    c->stale.count, c->table.entries, doc_pl(c->table.entries, "entry", "entries"), path,
		    doc_pl(c->stale.count, "names", "name"), x->who, c->stale.v[0].start,
		    c->in_anon ? "code since freed" : "no entry names its code: the map is an earlier process's with this pid, or an earlier image's");
		say(d->fix, sizeof(d->fix), "%s", c->in_anon ?
		    "nothing to do while the runtime names new code it puts at those addresses (perf's lookup then sees overlapping entries: see check)" :
		    "remove the map and restart the runtime (perfmapd moves such maps aside when a pid is reused or a process execs)");
		addrs_from(d, &c->stale);
	}
	if (c->table.overlapping && (d = add(f, "overlapping_entries", SEV_WARNING, c->table.overlapping))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " entries in %s overlap others (%" PRIu64 " nested, %" PRIu64 " cut and %" PRIu64 " hidden by later lines): perf's lookup can miss covered addresses",
		    c->table.overlapping, path, c->table.nested, c->table.trimmed, c->table.hidden);
		say(d->fix, sizeof(d->fix), "perfmapctl compact %s (in place once no process writes it; -o OUT for a copy now): later lines win, as the code they name replaced the earlier", path);
	}
	if (c->table.duplicates && (d = add(f, "duplicate_entries", SEV_INFO, c->table.duplicates))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " %s in %s %s an earlier entry exactly: harmless to every consumer, larger files",
		    c->table.duplicates, doc_pl(c->table.duplicates, "line", "lines"), path,
		    doc_pl(c->table.duplicates, "repeats", "repeat"));
		say(d->fix, sizeof(d->fix), "perfmapctl compact %s drops them once no process writes it", path);
	}
	if (c->in_memfd.count && (d = add(f, "memfd_entries", SEV_WARNING, c->in_memfd.count))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " %s in %s %s code in memfd mappings (first at 0x%" PRIx64 "): perf resolves those as files and never reads the map for them",
		    c->in_memfd.count, doc_pl(c->in_memfd.count, "entry", "entries"), path,
		    doc_pl(c->in_memfd.count, "names", "name"), c->in_memfd.v[0].start);
		say(d->fix, sizeof(d->fix), "%s", x->p->rt == RT_DOTNET ?
		    "restart it with DOTNET_EnableWriteXorExecute=0: .NET then maps its code anonymously" :
		    "have the runtime map its code anonymously (no memfd double mapping)");
		addrs_from(d, &c->in_memfd);
	}
	if (c->in_file.count && (d = add(f, "entries_in_files", SEV_INFO, c->in_file.count))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " %s in %s %s code in file-backed mappings (first at 0x%" PRIx64 "): perf resolves those through the file's own symbols",
		    c->in_file.count, doc_pl(c->in_file.count, "entry", "entries"), path,
		    doc_pl(c->in_file.count, "names", "name"), c->in_file.v[0].start);
		say(d->fix, sizeof(d->fix), "nothing to do unless the file has no symbols");
		addrs_from(d, &c->in_file);
	}
}

static void memfd_code(struct facts *x, struct doc_findings *f)
{
	struct doc_finding *d;
	char b[32];

	if (!x->memfd_regions || !(d = add(f, "memfd_code", SEV_WARNING, x->memfd_regions)))
		return;
	say(d->cause, sizeof(d->cause), "%s runs %s of code in %" PRIu64 " memfd executable %s: perf resolves them as files and never reads a map for them",
	    x->who, doc_bytes_str(x->memfd_bytes, b, sizeof(b)), x->memfd_regions,
	    doc_pl(x->memfd_regions, "mapping", "mappings"));
	say(d->fix, sizeof(d->fix), "%s", x->p->rt == RT_DOTNET ?
	    "restart it with DOTNET_EnableWriteXorExecute=0: .NET then maps its code anonymously" :
	    "have the runtime map its code anonymously (no memfd double mapping)");
}

static void coverage(struct facts *x, struct doc_findings *f)
{
	const struct perfmap_corr *c = &x->m->corr;
	struct doc_finding *d;
	char b[32], nb[32];
	double pct;

	/*
	 * Judged on the part of each region up to its highest entry: above it
	 * an arena holds no code yet (docs/perfmapctl.md has the figures).
	 */
	pct = c->used_bytes ? 100.0 * (double)c->named_bytes / (double)c->used_bytes : 100.0;
	if (pct < x->o->min_coverage && (d = add(f, "low_coverage", SEV_WARNING, 0))) {
		say(d->cause, sizeof(d->cause), "entries name %s of the %s of %s's anonymous executable memory below each region's highest entry (%.1f%%, under %.0f%%)",
		    doc_bytes_str(c->named_bytes, nb, sizeof(nb)),
		    doc_bytes_str(c->used_bytes, b, sizeof(b)), x->who, pct, x->o->min_coverage);
		say(d->fix, sizeof(d->fix), "the map lacks most of the code below its newest entries: a forked child with only its own entries (run perfmapd), or a perf option naming part of the code (Node: --perf-basic-prof, not -only-functions); --min-coverage sets the bound");
	}
	if (c->unnamed.count && (d = add(f, "unnamed_regions", SEV_INFO, c->unnamed.count))) {
		say(d->cause, sizeof(d->cause), "%" PRIu64 " anonymous executable %s of %s (%s) %s no named code (first at 0x%" PRIx64 ")",
		    c->unnamed.count, doc_pl(c->unnamed.count, "region", "regions"), x->who,
		    doc_bytes_str(c->unnamed.bytes, b, sizeof(b)),
		    doc_pl(c->unnamed.count, "holds", "hold"), c->unnamed.v[0].start);
		say(d->fix, sizeof(d->fix), "samples there show as hex; nothing to do if the runtime reserves them for later code");
		addrs_from(d, &c->unnamed);
	}
}

/*
 * The mmaps the agent saw that no entry names, inside a mapping that has
 * named code: the kernel merged them with their neighbours, so
 * /proc/<pid>/maps shows no unnamed region (unnamed_regions has the rest).
 */
static void unnamed_mmaps(struct facts *x, struct doc_findings *f)
{
	const struct doc_agent *a = x->a;
	const struct doc_region *g;
	struct doc_finding *d;
	/* DOC_MAX_ADDRS of "0x7fffffffffff (1023.9 KiB)", and how many more. */
	char list[DOC_MAX_ADDRS * 32 + 32] = "", b[32], more[96] = "";
	uint64_t n = 0, mapped = 0;
	size_t i, off = 0;

	for (i = 0; i < a->nregions; i++) {
		g = &a->regions[i];
		mapped += g->mapped;
		if (!g->mapping_named || g->named)
			continue;
		if (n++ < DOC_MAX_ADDRS && off < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s0x%" PRIx64 " (%s)",
						off ? ", " : "", g->addr,
						doc_bytes_str(g->len, b, sizeof(b)));
	}
	if (!n || !(d = add(f, "unnamed_mmaps", SEV_INFO, n)))
		return;
	if (n > DOC_MAX_ADDRS && off < sizeof(list))
		snprintf(list + off, sizeof(list) - off, " and %" PRIu64 " more", n - DOC_MAX_ADDRS);
	if (a->regions_not_kept)
		snprintf(more, sizeof(more), "; perfmapd kept the first %llu and did not keep %llu more",
			 a->regions_kept, a->regions_not_kept);
	say(d->cause, sizeof(d->cause), "%" PRIu64 " of the %" PRIu64 " anonymous executable %s perfmapd saw %s make %s no named code, though the kernel merged %s with named code into one mapping (so /proc/%d/maps shows no unnamed region)%s: %s",
	    n, mapped, doc_pl(mapped, "mmap", "mmaps"), x->who, doc_pl(n, "holds", "hold"),
	    doc_pl(n, "it", "them"), (int)x->p->pid, more, list);
	say(d->fix, sizeof(d->fix), "samples there show as hex: the runtime wrote no entry for the code it put there; nothing to do if it reserves them for later code");
	for (i = 0; i < a->nregions && d->naddrs < DOC_MAX_ADDRS; i++) {
		g = &a->regions[i];
		if (g->mapping_named && !g->named)
			d->addrs[d->naddrs++] = g->addr;
	}
}

/* What is wrong with the dump itself: refused, malformed, a torn last record. */
static void jitdump(struct facts *x, struct doc_findings *f)
{
	const struct doc_jitdump *j = x->j;
	const struct perfmap_jitdump_stats *s = &j->stats;
	struct doc_finding *d;

	if (!j->found)
		return;
	if (j->refused && (d = add(f, "jitdump_refused", SEV_WARNING, 1))) {
		say(d->cause, sizeof(d->cause), "%s's jitdump %s %s: perfmapd does not read it either, and writes no map from it",
		    x->who, j->path, doc_jitdump_refused_str(j->refused));
		say(d->fix, sizeof(d->fix), "%s", j->refused == -ESTALE || j->refused == -ENOENT ?
		    "restart the runtime: its dump's name no longer leads to the file it writes" :
		    "have the runtime write its dump as a regular file of its own uid, with one link, in a directory of its own");
		return;
	}
	if (!j->read)
		return;
	if (s->stop && (d = add(f, "jitdump_malformed", SEV_WARNING, 1))) {
		if (s->header)
			say(d->cause, sizeof(d->cause), "%s's jitdump %s has a malformed record at offset %" PRIu64 ": %s; the %" PRIu64 " %s read before it are named, nothing after it is read (perfmapd stops there too)",
			    x->who, j->path, s->stop_offset, perfmap__jitdump_stop_str(s->stop), s->funcs,
			    doc_pl(s->funcs, "function", "functions"));
		else
			say(d->cause, sizeof(d->cause), "%s's jitdump %s has a malformed header: %s; nothing in it is read",
			    x->who, j->path, perfmap__jitdump_stop_str(s->stop));
		say(d->fix, sizeof(d->fix), "restart the runtime for a new dump; if it recurs, the runtime (or whatever else writes the file) writes what the jitdump format does not allow");
	}
	if (!s->stop && s->torn_bytes && (d = add(f, "jitdump_torn", SEV_INFO, s->torn_bytes))) {
		if (s->header)
			say(d->cause, sizeof(d->cause), "the last record of %s is incomplete (%" PRIu64 " %s at its end): the runtime is writing it, or stopped in the middle of it",
			    j->path, s->torn_bytes, doc_pl(s->torn_bytes, "byte", "bytes"));
		else
			say(d->cause, sizeof(d->cause), "%s holds %" PRIu64 " %s, less than a jitdump header: the runtime has not written it yet, or stopped in the middle of it",
			    j->path, s->torn_bytes, doc_pl(s->torn_bytes, "byte", "bytes"));
		say(d->fix, sizeof(d->fix), "nothing to do while it runs: the record is read once whole");
	}
}

/* The `perfmapctl check` verdicts: which consumers misread the map. */
static void consumers(struct facts *x, struct doc_findings *f)
{
	const struct perfmap_report *r = &x->m->report;
	struct doc_finding *d;
	char who[256] = "", first[256] = "";
	enum perfmap_consumer c;
	bool whole = false;
	size_t off = 0;
	uint64_t n = 0;

	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++) {
		const struct perfmap_verdict *v = &r->verdict[c];

		if (v->ok)
			continue;
		n++;
		whole |= v->file_lost;
		off += (size_t)snprintf(who + off, sizeof(who) - off, "%s%s%s", off ? ", " : "",
					perfmap_consumer_str(c), v->file_lost ? " (whole file)" : "");
		if (!first[0])
			snprintf(first, sizeof(first), "%s: %s", perfmap_consumer_str(c), v->reason);
		if (off >= sizeof(who))
			break;
	}
	if (!n || !(d = add(f, "consumer_misreads", whole ? SEV_ERROR : SEV_WARNING, n)))
		return;
	say(d->cause, sizeof(d->cause), "%s is misread by %s; %s", x->m->used->path, who, first);
	say(d->fix, sizeof(d->fix), "perfmapctl check %s has the details; perfmapctl compact writes the form every consumer reads alike (in place once no process writes it); the writer should print \"%%lx %%lx %%s\\n\"",
	    x->m->used->path);
}

/* Errors first, then warnings, then the rest; in the order found within each. */
static void sort_by_severity(struct doc_findings *f)
{
	struct doc_finding tmp;
	size_t i, j;

	for (i = 1; i < f->n; i++)
		for (j = i; j > 0 && f->v[j - 1].sev < f->v[j].sev; j--) {
			tmp = f->v[j];
			f->v[j] = f->v[j - 1];
			f->v[j - 1] = tmp;
		}
}

void doc_findings_make(const struct doc_opts *o, const struct doc_proc *p, const struct doc_map *m,
		       const struct perfmap_vmas *vs, const struct doc_agent *a,
		       const struct doc_jitdump *j, struct doc_findings *f)
{
	struct facts x = { .o = o, .p = p, .m = m, .a = a, .j = j };

	f->n = 0;
	count_exec(&x, vs);
	name_process(&x);
	refused(f, &m->host);
	refused(f, &m->ns);
	jitdump(&x, f);
	if (!m->host.exists && !m->ns.exists)
		no_map(&x, f);
	container_only(&x, f);
	not_writable(&x, f);
	memfd_code(&x, f);
	if (m->checked) {
		entries(&x, f);
		coverage(&x, f);
		unnamed_mmaps(&x, f);
		consumers(&x, f);
	}
	sort_by_severity(f);
}

/*
 * The symbolizer: (pid, start time, address) to module, name, offset,
 * source line and state. The kernel's addresses go to kallsyms; a user
 * address to the mapping that held it when the process was read (its
 * own, or its parent's for a forked child gone before it could be read),
 * then for anonymous code to the perf map, and to the jitdump the process
 * maps where the map names nothing (or is not there), or to the file's ELF
 * symbols: C++ and Rust ones demangled as perf report -v shows them, beside the
 * address in the file's own terms and its build id, for a profile store.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "symbolizer.h"

#define KERNEL_MIN 0xffff800000000000ull   /* x86-64 and arm64: the kernel's half */

uint64_t perfmap_prof__ticks_of_ns(uint64_t ns)
{
	static uint64_t ns_per_tick;

	if (!ns_per_tick) {
		long hz = sysconf(_SC_CLK_TCK);

		ns_per_tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
	}
	return ns / ns_per_tick;
}

/* @str kept for the symbolizer's life, once per content; NULL without memory. */
static const char *intern(struct perfmap_symbolizer *s, const char *str)
{
	return perfmap__strtab_intern(&s->strings, str);
}

static const char *intern_cb(void *ctx, const char *str)
{
	return intern(ctx, str);
}

struct perfmap_symbolizer *perfmap_symbolizer_new(const struct perfmap_symbolizer_opts *opts)
{
	struct perfmap_symbolizer *s = calloc(1, sizeof(*s));
	const char *states_file = NULL;
	int err = -ENOMEM;

	if (!s)
		goto free_symbolizer;
	snprintf(s->map_dir, sizeof(s->map_dir), "%s",
		 opts && opts->map_dir ? opts->map_dir : "/tmp");
	snprintf(s->archive_dir, sizeof(s->archive_dir), "%s",
		 opts && opts->archive_dir ? opts->archive_dir : "/var/lib/perfmapd/archive");
	if (opts && opts->sz >= offsetof(struct perfmap_symbolizer_opts, states_file) + sizeof(char *))
		states_file = opts->states_file;
	s->elf = perfmap_prof__elfsyms_new(intern_cb, s);
	if (!s->elf)
		goto free_symbolizer;
	s->states = perfmap_prof__states_load(states_file, &err);
	if (!s->states)
		goto free_symbolizer;
	return s;
free_symbolizer:
	perfmap_symbolizer_free(s);
	errno = -err;
	return NULL;
}

/*
 * @ps was forked by @ppid: until it is read, its parent's mappings (the
 * parent as it is now, whatever later takes its pid) name its code, and
 * are kept for it.
 */
static void forked(struct perfmap_symbolizer *s, struct psnap *ps, pid_t ppid)
{
	struct psnap *parent;

	ps->ppid = ppid;
	ps->forked = true;
	if (ps->read)
		return;
	parent = perfmap_prof__psnaps_find(&s->procs, ppid, 0, PSNAP_LATEST);
	perfmap_prof__psnap_set_parent(ps, parent);
}

/*
 * The jitdumps @ps maps now (their markers), its own and one other (its
 * parent's, inherited at a fork), each shared with the processes of its
 * uid that map it, read on from where they were: while the process runs,
 * so that a dump is read inside its root, and so that its last records
 * are read at its exit.
 */
static void read_dumps(struct perfmap_symbolizer *s, struct psnap *ps)
{
	const struct psnap_vma *v;
	pid_t named;
	int k;

	for (size_t i = 0; i < ps->n; i++) {
		v = &ps->v[i];
		if (v->kind != PERFMAP_VMA_FILE || !v->path)
			continue;
		named = perfmap_prof__jdump_marker_pid(v->path);
		if (!named)
			continue;
		k = named == ps->ns_pid ? 0 : 1;
		if (ps->dump[k] && !perfmap_prof__jdump_is(ps->dump[k], v))
			continue;   /* one of each: a second dump of its own is a runtime's oddity */
		if (!ps->dump[k]) {
			if (!ps->uid_known)
				continue;
			ps->dump[k] = perfmap_prof__jdump_get(&s->jdumps, ps->pid, ps->start_ticks,
							      ps->uid, v);
			if (!ps->dump[k])
				continue;
		}
		perfmap_prof__jdump_update(ps->dump[k], ps->pid, ps->start_ticks, &s->map_bytes,
					   MAPS_MAX_BYTES);
	}
}

/* Read @ps's mappings now, and the jitdumps they show. */
static int read_process(struct perfmap_symbolizer *s, struct psnap *ps)
{
	int err = perfmap_prof__psnap_read(ps);

	if (!err)
		read_dumps(s, ps);
	return err;
}

int perfmap_prof__symbolizer_read(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				  uint32_t image, pid_t ppid)
{
	struct psnap *ps = perfmap_prof__psnaps_get(&s->procs, pid, start_ticks, image);

	if (!ps)
		return -ENOMEM;
	if (ppid)
		forked(s, ps, ppid);
	return read_process(s, ps);
}

void perfmap_prof__symbolizer_exited(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, PSNAP_LATEST);

	/* Gone: only the fds kept are read, no root to reopen through. */
	for (int k = 0; ps && k < 2; k++)
		if (ps->dump[k])
			perfmap_prof__jdump_update(ps->dump[k], 0, 0, &s->map_bytes, MAPS_MAX_BYTES);
}

void perfmap_prof__symbolizer_unread(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				     uint32_t image)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, image);

	if (ps)
		perfmap_prof__psnap_unread(ps);
}

int perfmap_prof__symbolizer_forked(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				    pid_t ppid)
{
	struct psnap *ps = perfmap_prof__psnaps_get(&s->procs, pid, start_ticks, 0);

	if (!ps)
		return -ENOMEM;
	forked(s, ps, ppid);
	return 0;
}

int perfmap_symbolizer_add_process(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				   pid_t ppid)
{
	return perfmap_prof__symbolizer_read(s, pid, start_ticks, PSNAP_LATEST, ppid);
}

void perfmap_symbolizer_exec(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, PSNAP_LATEST);

	/* A new image, read now; the old one's mappings stay for its samples. */
	perfmap_prof__symbolizer_read(s, pid, start_ticks, ps ? ps->image + 1 : 1, 0);
}

/* The mappings to look @ps's addresses up in: its own, or its parent's until it exec'd. */
static const struct psnap *mappings_of(struct perfmap_symbolizer *s, struct psnap *ps)
{
	struct psnap *parent;

	if (ps->read)
		return ps;
	if (!ps->forked || !ps->ppid)
		return NULL;
	parent = ps->parent;
	if (!parent)
		parent = perfmap_prof__psnaps_find(&s->procs, ps->ppid, 0, PSNAP_LATEST);
	return parent && parent->read ? parent : NULL;
}

/* A JIT name's source file: CPython's "py::f:/app/x.py", Node's "LazyCompile:*f /app/x.js:3". */
static const char *jit_file(struct perfmap_symbolizer *s, const char *name, int *line)
{
	const char *p, *colon;
	size_t n;

	*line = 0;
	if (!strncmp(name, "py::", 4)) {
		p = strrchr(name, ':');
		if (!p || p[1] != '/')
			return NULL;
		p++;
		n = strlen(p);
	} else {
		p = strstr(name, " /");
		if (!p)
			p = strstr(name, " file://");
		if (!p)
			return NULL;
		p++;
		colon = strchr(p, ':');
		if (!strncmp(p, "file://", 7))
			colon = strchr(p + 7, ':');
		n = colon ? (size_t)(colon - p) : strlen(p);
		if (colon)
			*line = atoi(colon + 1);
	}
	if (n >= sizeof(s->jitfile))
		return NULL;
	memcpy(s->jitfile, p, n);
	s->jitfile[n] = '\0';
	return intern(s, s->jitfile);
}

static int lookup_kernel(struct perfmap_symbolizer *s, uint64_t addr, struct perfmap_symbol *out)
{
	if (!s->ks_tried) {
		s->ks = perfmap_prof__kallsyms_load();
		s->ks_tried = true;
	}
	out->state = PERFMAP_STATE_KERNEL;
	out->module = "[kernel]";
	out->name = perfmap_prof__kallsyms_find(s->ks, addr, &out->offset, &out->module);
	if (!out->name) {
		out->offset = addr;
		return -ENOENT;
	}
	return 0;
}

/*
 * @ps's perf map, read once; owned by its uid (a forked child never read
 * has its parent's), else none: a file another user planted at its path
 * is no name of its code.
 */
static void load_jit(struct perfmap_symbolizer *s, struct psnap *ps, const struct psnap *maps)
{
	const struct psnap *who = ps->uid_known ? ps : maps;

	ps->jit_tried = true;
	/* Maps held are bounded in all: past it a process's JIT code goes unnamed. */
	if (!who || !who->uid_known || s->map_bytes >= MAPS_MAX_BYTES)
		return;
	ps->jit = perfmap_prof__jitmap_load(s->map_dir, s->archive_dir, ps->pid, ps->start_ticks,
					    who->uid);
	if (ps->jit)
		s->map_bytes += perfmap_prof__jitmap_bytes(ps->jit);
}

/*
 * @addr in the jitdumps @maps maps, for @ps (itself, or a forked child
 * never read that runs its parent's code): the records of @ps's own pid
 * first (a forked child writes into its parent's dump under its own), then
 * those of the dump's producer. The dump, or NULL.
 */
static const struct jdump *dump_lookup(const struct psnap *ps, const struct psnap *maps,
				       uint64_t addr, struct perfmap_jitdump_sym *sym)
{
	uint32_t self, producer;
	const struct jdump *d;

	/* A child never read is known by its host pid: its records carry it when its parent's do theirs. */
	if (ps->read)
		self = (uint32_t)ps->ns_pid;
	else
		self = maps->ns_pid == maps->pid ? (uint32_t)ps->pid : 0;
	for (int k = 0; k < 2; k++) {
		d = maps->dump[k];
		if (!d)
			continue;
		producer = perfmap_prof__jdump_name_pid(d);
		if (self && !perfmap_prof__jdump_lookup(d, self, addr, sym))
			return d;
		if (producer != self && !perfmap_prof__jdump_lookup(d, producer, addr, sym))
			return d;
	}
	return NULL;
}

static int lookup_anon(struct perfmap_symbolizer *s, struct psnap *ps, const struct psnap *maps,
		       const struct psnap_vma *v, uint64_t addr, struct perfmap_symbol *out)
{
	struct perfmap_jitdump_sym sym;
	const struct jdump *dump;

	if (!ps->jit_tried)
		load_jit(s, ps, maps);
	/* Interned: the mapping's own string goes with the next read of the process. */
	out->module = v->path ? intern(s, v->path) : "[anon]";
	if (!out->module)
		out->module = "[anon]";
	out->offset = addr - v->lo;
	out->name = ps->jit ? perfmap_prof__jitmap_lookup(ps->jit, addr, &out->offset) : NULL;
	dump = dump_lookup(ps, maps, addr, &sym);
	if (out->name) {
		/* The map wins; its entry's lines are the dump's where both name the same function. */
		out->module = perfmap_prof__jitmap_path(ps->jit);
		out->state = PERFMAP_STATE_JIT;
		if (dump && sym.file && !strcmp(sym.name, out->name)) {
			out->file = intern(s, sym.file);
			out->line = out->file ? (int)sym.line : 0;
		} else {
			out->file = jit_file(s, out->name, &out->line);
		}
		return 0;
	}
	if (!dump) {
		out->state = PERFMAP_STATE_UNNAMED;
		return -ENOENT;
	}
	/* No map names it (none at all without perfmapd, or one not covering it): the dump does. */
	out->name = intern(s, sym.name);
	if (!out->name) {
		out->state = PERFMAP_STATE_UNNAMED;
		return -ENOMEM;
	}
	out->module = intern(s, perfmap_prof__jdump_path(dump));
	if (!out->module)
		out->module = "[jitdump]";
	out->offset = addr - sym.start;
	out->state = PERFMAP_STATE_JIT;
	if (sym.file) {
		out->file = intern(s, sym.file);
		out->line = out->file ? (int)sym.line : 0;
	} else {
		out->file = jit_file(s, out->name, &out->line);
	}
	return 0;
}

static int lookup_file(struct perfmap_symbolizer *s, const struct psnap *owner,
		       const struct psnap_vma *v, uint64_t addr, struct perfmap_frame *f)
{
	struct perfmap_symbol *out = &f->sym;
	uint64_t file_off = addr - v->lo + v->pgoff, bias;
	char open_path[PATH_MAX];
	struct elfsym_hit hit;
	char st;
	int err;

	out->module = intern(s, v->path);
	if (!out->module)
		out->module = "[unknown]";
	out->offset = file_off;
	out->state = PERFMAP_STATE_NATIVE;
	/* Through its root while it lives: a container's files are not the host's. */
	if (snprintf(open_path, sizeof(open_path), "/proc/%d/root%s", (int)owner->pid, v->path) >=
		    (int)sizeof(open_path) || access(open_path, R_OK))
		snprintf(open_path, sizeof(open_path), "%s", v->path);
	err = perfmap_prof__elfsyms_lookup(s->elf, v, open_path, file_off, &hit);
	out->name = hit.name;
	out->offset = hit.off;
	out->file = hit.src;
	out->line = hit.line;
	/* A file name relative to where it was built: the whole path, for l's p and for a and A. */
	if (out->file && hit.comp_dir &&
	    snprintf(open_path, sizeof(open_path), "%s/%s", hit.comp_dir, out->file) < (int)sizeof(open_path))
		out->file = intern(s, open_path);
	f->demangled = hit.demangled;
	f->build_id = hit.build_id;
	if (hit.has_vaddr) {
		/* The process's addresses less the file's load bias: the file's own, mapping and all. */
		bias = addr - hit.vaddr;
		f->in_file = true;
		f->file_addr = hit.vaddr;
		f->map_start = v->lo - bias;
		f->map_limit = v->hi - bias;
		f->map_offset = v->pgoff;
	}
	st = perfmap_prof__states_of(s->states, out->name);
	if (st)
		out->state = st;
	return err ? err : out->name ? 0 : -ENOENT;
}

int perfmap_symbolizer_lookup(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
			      uint64_t addr, struct perfmap_symbol *out)
{
	return perfmap_symbolizer_lookup_image(s, pid, start_ticks, PSNAP_LATEST, addr, out);
}

/* Name @addr: the whole frame, in @f (all of it, whatever the caller's size). */
static int lookup(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks, uint32_t image,
		  uint64_t addr, struct perfmap_frame *f)
{
	struct perfmap_symbol *out = &f->sym;
	const struct psnap_vma *v;
	const struct psnap *maps;
	struct psnap *ps;

	*f = (struct perfmap_frame){ .sz = sizeof(*f),
				     .sym = { .module = "[unknown]", .offset = addr,
					      .state = PERFMAP_STATE_UNKNOWN } };
	if (addr >= KERNEL_MIN)
		return lookup_kernel(s, addr, out);
	ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, image);
	if (!ps && image != PSNAP_LATEST && image)
		ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, PSNAP_LATEST);
	if (!ps || (!ps->read && !ps->forked)) {
		/* Not seen yet: read it now, if it is still that process. */
		ps = perfmap_prof__psnaps_get(&s->procs, pid, start_ticks, image);
		if (!ps)
			return -ENOMEM;
		read_process(s, ps);
	}
	maps = mappings_of(s, ps);
	v = maps ? perfmap_prof__psnap_find_vma(maps, addr) : NULL;
	if (!v)
		return -ENOENT;
	if (v->kind == PERFMAP_VMA_SPECIAL && v->path) {
		/* [vdso], [vsyscall]: the kernel's code in user space, no file to read. */
		out->module = intern(s, v->path);
		out->offset = addr - v->lo;
		out->state = PERFMAP_STATE_NATIVE;
		return -ENOENT;
	}
	if (v->kind == PERFMAP_VMA_ANON || (v->kind == PERFMAP_VMA_MEMFD && v->shared) || !v->path)
		return lookup_anon(s, ps, maps, v, addr, out);
	return lookup_file(s, maps, v, addr, f);
}

int perfmap_symbolizer_lookup_image(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				    uint32_t image, uint64_t addr, struct perfmap_symbol *out)
{
	struct perfmap_frame f;
	int err = lookup(s, pid, start_ticks, image, addr, &f);

	*out = f.sym;
	return err;
}

int perfmap_symbolizer_lookup_frame(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
				    uint32_t image, uint64_t addr, struct perfmap_frame *out)
{
	const size_t head = offsetof(struct perfmap_frame, sym);
	struct perfmap_frame f;
	size_t n;
	int err;

	if (!out || out->sz < head + sizeof(out->sym))
		return -EINVAL;
	err = lookup(s, pid, start_ticks, image, addr, &f);
	/* JIT code, the kernel, a C name: as they are. */
	if (!f.demangled)
		f.demangled = f.sym.name;
	/* What the caller's struct holds of it: a caller built against an older header has less; a newer, more (zeroed). */
	n = out->sz < sizeof(f) ? out->sz : sizeof(f);
	memcpy((char *)out + head, (char *)&f + head, n - head);
	if (out->sz > sizeof(f))
		memset((char *)out + sizeof(f), 0, out->sz - sizeof(f));
	return err;
}

/* Does @ps run anonymous executable code: JIT code a map may name? */
static bool runs_jit_code(const struct psnap *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->v[i].kind == PERFMAP_VMA_ANON || (ps->v[i].kind == PERFMAP_VMA_MEMFD && ps->v[i].shared))
			return true;
	return false;
}

int perfmap_prof__symbolizer_keep_map(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, PSNAP_LATEST);
	const struct psnap *maps;

	if (!ps || ps->jit_tried)
		return 0;
	maps = mappings_of(s, ps);
	if (!maps || !runs_jit_code(maps))
		return 0;
	if (s->map_bytes >= MAPS_MAX_BYTES)
		return -ENOSPC;
	load_jit(s, ps, maps);
	return ps->jit ? 0 : -ENOENT;
}

int perfmap_prof__symbolizer_forget(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks)
{
	uint64_t freed = 0;
	int err = perfmap_prof__psnaps_forget(&s->procs, pid, start_ticks, &freed);

	s->map_bytes -= freed < s->map_bytes ? freed : s->map_bytes;
	return err;
}

int perfmap_symbolizer_process(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
			       struct perfmap_process *out)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, PSNAP_LATEST);

	*out = (struct perfmap_process){ 0 };
	if (!ps)
		return -ENOENT;
	/* A forked child never read is its parent, as far as these go. */
	if (!ps->exe && !ps->cgroup && ps->forked && ps->ppid) {
		struct psnap *parent;

		parent = perfmap_prof__psnaps_find(&s->procs, ps->ppid, 0, PSNAP_LATEST);

		if (parent)
			ps = parent;
	}
	out->ppid = ps->ppid;
	out->exe = ps->exe;
	out->cgroup = ps->cgroup;
	out->container = ps->container[0] ? ps->container : NULL;
	return 0;
}

int perfmap_symbolizer_creds(struct perfmap_symbolizer *s, pid_t pid, uint64_t start_ticks,
			     uint32_t image, struct perfmap_creds *out)
{
	struct psnap *ps = perfmap_prof__psnaps_find(&s->procs, pid, start_ticks, image);
	const struct psnap *who;

	*out = (struct perfmap_creds){ 0 };
	/* Another image's (the one after an exec, a setuid binary's) are not this one's. */
	/* A forked child never read is its parent, as its mappings and its map's owner are. */
	who = ps && !ps->creds_known ? mappings_of(s, ps) : ps;
	if (!who || !who->creds_known)
		return -ENOENT;
	out->uid = who->fsuid;
	out->gid = who->fsgid;
	out->ngroups = who->ngroups;
	out->groups = who->groups;
	out->own_mount_ns = who->mnt_ns == perfmap_prof__psnap_own_mnt_ns();
	return 0;
}

void perfmap_symbolizer_free(struct perfmap_symbolizer *s)
{
	if (!s)
		return;
	perfmap_prof__psnaps_free(&s->procs);
	perfmap_prof__kallsyms_free(s->ks);
	perfmap_prof__elfsyms_free(s->elf);
	perfmap_prof__states_free(s->states);
	perfmap__strtab_release(&s->strings);
	free(s->dump);
	free(s);
}

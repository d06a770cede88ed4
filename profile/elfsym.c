/*
 * Native code's names: each mapped file's ELF symbols (or its separate
 * debug file's) and DWARF lines, through elfutils' libdwfl, one module per
 * file, read once. A sample gives a file offset; the file's PT_LOAD
 * segments turn it into the address its symbols and lines are at, which a
 * profile store takes with the file's build id. C++ and Rust symbols are
 * demangled here, once per symbol and address, as perf does as it reads
 * a file's symbols. A file's symbols are indexed at its first lookup
 * (symindex.c): libdwfl's own lookup scans them all each time.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"
#include "symindex.h"

struct elfmod {
	struct elfmod *next;
	char key[64];              /* "major:minor:inode": the file, whatever its path */
	char *path;
	Dwfl *dwfl;                /* NULL: not ELF, or not readable (remembered: not tried again) */
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	Elf *elf;
	const char *build_id;      /* its GNU build id in hex (interned), read at its first lookup */
	bool build_id_read;
	struct symindex *index;    /* its symbols by address, made at its first lookup; NULL: libdwfl's scan */
	bool index_tried;
};

/* A build id longer than this (SHA-1's 20 bytes are the usual, 16 for MD5 or UUIDs) is not said. */
#define BUILD_ID_MAX 64

#define MODULES_MAX 4096   /* files read at most: each holds a descriptor and its ELF mapped */
/*
 * Symbols indexed in all files together (symindex.c, some 72 bytes each
 * while built): a local user's executable can hold millions. Past it a
 * file's lookups are libdwfl's scan, slower, in no more memory.
 */
#define INDEX_SYMS_MAX (1 << 20)

/*
 * What a (module, file offset) was named: libdwfl's symbol lookup scans the
 * symbol table each time (gelf_getsym over libc's thousands), and a profile
 * names the same return addresses over and over. Direct-mapped, a fixed
 * size in all; the strings are the interned copies the lookup returned.
 */
#define CACHE_SLOTS 16384

struct named {
	const struct elfmod *m;
	uint64_t file_off;
	struct elfsym_hit hit;
	int err;
};

struct elfsyms {
	struct elfmod *mods[256];
	size_t nmods;
	size_t indexed_syms;       /* of the indexes made, at most INDEX_SYMS_MAX */
	struct named *cache;       /* CACHE_SLOTS, made at the first lookup */
	elfsyms_intern_fn intern;
	void *intern_ctx;
	char demangled[DEMANGLED_MAX + 1];
};

/* A lookup in progress reads a file another user may truncate under it: SIGBUS ends it, not us. */
static __thread sigjmp_buf *bus_jmp;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (bus_jmp)
		siglongjmp(*bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static char *debuginfo_path;   /* libdwfl's default: /usr/lib/debug and .debug beside the file */

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

struct elfsyms *perfmap_prof__elfsyms_new(elfsyms_intern_fn intern, void *ctx)
{
	struct elfsyms *e = calloc(1, sizeof(*e));

	if (e) {
		e->intern = intern;
		e->intern_ctx = ctx;
	}
	return e;
}

static size_t hash_of(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % (sizeof(((struct elfsyms *)0)->mods) / sizeof(struct elfmod *));
}

/*
 * The file @v mapped, if @open_path is still it: a regular file (no link
 * followed, no device, no FIFO waited on) of the device and inode the
 * mapping had. The fd, or -errno.
 */
static int open_mapped(const struct psnap_vma *v, const char *open_path)
{
	int fd = open(open_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_ino != v->ino ||
	    major(st.st_dev) != v->dev_major || minor(st.st_dev) != v->dev_minor) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static void mod_open(struct elfmod *m, const struct psnap_vma *v, const char *open_path)
{
	int fd = open_mapped(v, open_path);

	if (fd < 0)
		return;
	m->dwfl = dwfl_begin(&callbacks);
	if (!m->dwfl) {
		close(fd);
		return;
	}
	dwfl_report_begin(m->dwfl);
	/* libdwfl owns @fd once it made a module of it; on failure it is still ours. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, open_path, fd, 0, false);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod)
		close(fd);
	else
		m->elf = dwfl_module_getelf(m->mod, &m->bias);
	if (!m->mod || !m->elf) {
		dwfl_end(m->dwfl);
		m->dwfl = NULL;
	}
}

static struct elfmod *mod_get(struct elfsyms *e, const struct psnap_vma *v, const char *open_path)
{
	struct elfmod *m;
	char key[64];
	size_t h;

	snprintf(key, sizeof(key), "%u:%u:%llu", v->dev_major, v->dev_minor,
		 (unsigned long long)v->ino);
	h = hash_of(key);
	for (m = e->mods[h]; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->key, sizeof(m->key), "%s", key);
	m->path = strdup(v->path);
	if (!m->path) {
		free(m);
		return NULL;
	}
	/* Past the bound a file is remembered, not read: no name, as for a file that is gone. */
	if (e->nmods < MODULES_MAX)
		mod_open(m, v, open_path);
	e->nmods++;
	m->next = e->mods[h];
	e->mods[h] = m;
	return m;
}

/* The address in the file's own terms of the byte at @off: through the PT_LOAD that holds it. */
static int vaddr_of(Elf *elf, uint64_t off, uint64_t *vaddr)
{
	GElf_Phdr ph;
	size_t n, i;

	if (elf_getphdrnum(elf, &n))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
			*vaddr = off - ph.p_offset + ph.p_vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* The directory a compilation unit was built in, which its relative file names are relative to. */
static const char *comp_dir_of(Dwfl_Line *l)
{
	Dwarf_Attribute attr;
	Dwarf_Die *cu = dwfl_linecu(l);

	return cu ? dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr)) : NULL;
}

/* The module's GNU build id in hex, interned; NULL when it has none (or one past BUILD_ID_MAX). */
static const char *build_id_of(struct elfsyms *e, struct elfmod *m)
{
	char hex[2 * BUILD_ID_MAX + 1];
	const unsigned char *bits;
	GElf_Addr at;
	int n;

	n = dwfl_module_build_id(m->mod, &bits, &at);
	if (n <= 0 || n > BUILD_ID_MAX)
		return NULL;
	for (int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", bits[i]);
	return e->intern(e->intern_ctx, hex);
}

/*
 * The lookup proper, in a module whose file may fault under it
 * (perfmap_prof__elfsyms_lookup()): the strings copied here, where a fault is caught.
 */
static int lookup_in(struct elfsyms *e, struct elfmod *m, uint64_t file_off, struct elfsym_hit *out)
{
	GElf_Off sym_off = 0;
	const char *name;
	uint64_t vaddr;
	Dwfl_Line *l;
	GElf_Sym sym;
	Dwarf_Addr a;

	if (!m->build_id_read) {
		m->build_id = build_id_of(e, m);
		m->build_id_read = true;
	}
	if (!m->index_tried) {
		int nsyms = dwfl_module_getsymtab(m->mod);

		m->index_tried = true;
		if (nsyms > 0 && e->indexed_syms + (size_t)nsyms <= INDEX_SYMS_MAX) {
			m->index = perfmap_prof__symindex_build(m->mod);
			e->indexed_syms += m->index ? (size_t)nsyms : 0;
		}
	}
	out->build_id = m->build_id;
	if (vaddr_of(m->elf, file_off, &vaddr))
		return -ENOENT;
	out->vaddr = vaddr;
	out->has_vaddr = true;
	a = vaddr + m->bias;
	if (!m->index || !perfmap_prof__symindex_lookup(m->index, m->mod, a, &name, &sym_off, &sym))
		name = dwfl_module_addrinfo(m->mod, a, &sym_off, &sym, NULL, NULL, NULL);
	if (name) {
		out->off = sym_off;
		out->name = e->intern(e->intern_ctx, name);
		/* Once per symbol and address (the cache): as perf, when it reads a file's symbols. */
		name = perfmap_prof__demangle(out->name, e->demangled, sizeof(e->demangled));
		out->demangled = name ? e->intern(e->intern_ctx, name) : NULL;
		if (!out->demangled)
			out->demangled = out->name;
	}
	l = dwfl_module_getsrc(m->mod, a);
	if (l) {
		out->src = dwfl_lineinfo(l, NULL, &out->line, NULL, NULL, NULL);
		if (out->src && out->src[0] != '/') {
			out->comp_dir = comp_dir_of(l);
			if (out->comp_dir)
				out->comp_dir = e->intern(e->intern_ctx, out->comp_dir);
		}
		if (out->src)
			out->src = e->intern(e->intern_ctx, out->src);
	}
	return 0;
}

int perfmap_prof__elfsyms_lookup(struct elfsyms *e, const struct psnap_vma *v,
				 const char *open_path, uint64_t file_off, struct elfsym_hit *out)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO }, old;
	struct elfmod *volatile m = mod_get(e, v, open_path);
	struct named *volatile c;
	sigjmp_buf jmp;
	int err;

	*out = (struct elfsym_hit){ .off = file_off };
	if (!m)
		return -ENOMEM;
	if (!m->dwfl)
		return -ENOEXEC;
	if (!e->cache)
		e->cache = calloc(CACHE_SLOTS, sizeof(*e->cache));
	c = e->cache ? &e->cache[(((uintptr_t)m >> 4) * 0x9e3779b97f4a7c15ull ^ file_off) % CACHE_SLOTS] : NULL;
	if (c && c->m == m && c->file_off == file_off) {
		*out = c->hit;
		return c->err;
	}
	/* The module's file is mapped: truncated by its owner, a read faults. It is dropped then. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(jmp, 1)) {
		bus_jmp = NULL;
		sigaction(SIGBUS, &old, NULL);
		*out = (struct elfsym_hit){ .off = file_off };
		/* Its state is unknown after the fault: never touched again (leaked, not freed). */
		m->dwfl = NULL;
		return -EIO;
	}
	bus_jmp = &jmp;
	err = lookup_in(e, m, file_off, out);
	bus_jmp = NULL;
	sigaction(SIGBUS, &old, NULL);
	if (c)
		*c = (struct named){ .m = m, .file_off = file_off, .hit = *out, .err = err };
	return err;
}

void perfmap_prof__elfsyms_free(struct elfsyms *e)
{
	struct elfmod *m, *next;

	if (!e)
		return;
	for (size_t h = 0; h < sizeof(e->mods) / sizeof(e->mods[0]); h++) {
		for (m = e->mods[h]; m; m = next) {
			next = m->next;
			if (m->dwfl)
				dwfl_end(m->dwfl);
			perfmap_prof__symindex_free(m->index);
			free(m->path);
			free(m);
		}
	}
	free(e->cache);
	free(e);
}

/*
 * Native code's names: each mapped file's ELF symbols (or its separate
 * debug file's) and DWARF lines, through elfutils' libdwfl, one module per
 * file, read once. A sample gives a file offset; the file's PT_LOAD
 * segments turn it into the address its symbols and lines are at.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct elfmod {
	struct elfmod *next;
	char *path;
	Dwfl *dwfl;                /* NULL: not ELF, or not readable (remembered: not tried again) */
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	Elf *elf;
};

struct elfsyms {
	struct elfmod *mods[256];
};

static char *debuginfo_path;   /* libdwfl's default: /usr/lib/debug and .debug beside the file */

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

struct elfsyms *elfsyms_new(void)
{
	return calloc(1, sizeof(struct elfsyms));
}

static size_t hash_of(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % (sizeof(((struct elfsyms *)0)->mods) / sizeof(struct elfmod *));
}

static void mod_open(struct elfmod *m, const char *open_path)
{
	int fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return;
	m->dwfl = dwfl_begin(&callbacks);
	if (!m->dwfl) {
		close(fd);
		return;
	}
	dwfl_report_begin(m->dwfl);
	/* libdwfl owns @fd from here, and closes it. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, open_path, fd, 0, false);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (m->mod)
		m->elf = dwfl_module_getelf(m->mod, &m->bias);
	if (!m->mod || !m->elf) {
		dwfl_end(m->dwfl);
		m->dwfl = NULL;
	}
}

static struct elfmod *mod_get(struct elfsyms *e, const char *path, const char *open_path)
{
	size_t h = hash_of(path);
	struct elfmod *m;

	for (m = e->mods[h]; m; m = m->next)
		if (!strcmp(m->path, path))
			return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->path = strdup(path);
	if (!m->path) {
		free(m);
		return NULL;
	}
	mod_open(m, open_path);
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

int elfsyms_lookup(struct elfsyms *e, const char *path, const char *open_path, uint64_t file_off,
		   const char **name, uint64_t *off, const char **src, const char **comp_dir, int *line)
{
	struct elfmod *m = mod_get(e, path, open_path);
	GElf_Off sym_off = 0;
	uint64_t vaddr;
	Dwfl_Line *l;
	GElf_Sym sym;
	Dwarf_Addr a;

	*name = NULL;
	*src = NULL;
	*comp_dir = NULL;
	*line = 0;
	*off = file_off;
	if (!m)
		return -ENOMEM;
	if (!m->dwfl)
		return -ENOEXEC;
	if (vaddr_of(m->elf, file_off, &vaddr))
		return -ENOENT;
	a = vaddr + m->bias;
	*name = dwfl_module_addrinfo(m->mod, a, &sym_off, &sym, NULL, NULL, NULL);
	if (*name)
		*off = sym_off;
	l = dwfl_module_getsrc(m->mod, a);
	if (l) {
		*src = dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL);
		if (*src && (*src)[0] != '/')
			*comp_dir = comp_dir_of(l);
	}
	return 0;
}

void elfsyms_free(struct elfsyms *e)
{
	struct elfmod *m, *next;

	if (!e)
		return;
	for (size_t h = 0; h < sizeof(e->mods) / sizeof(e->mods[0]); h++) {
		for (m = e->mods[h]; m; m = next) {
			next = m->next;
			if (m->dwfl)
				dwfl_end(m->dwfl);
			free(m->path);
			free(m);
		}
	}
	free(e);
}

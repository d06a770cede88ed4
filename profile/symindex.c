/*
 * libdwfl's choice of symbol for an address, made from an index: its
 * dwfl_module_addrinfo() scans the whole symbol table at each lookup (a
 * compiler's cc1 has 29,000 symbols), which made naming half of an
 * always-on profiler's CPU under a build. The module's sized symbols are
 * sorted once by address; a lookup collects those that hold the address
 * and applies libdwfl's own rules to them, in its order: globals first,
 * then locals only if no global holds it; the closest start, then the
 * stronger binding, then the smaller size. Where libdwfl would fall back
 * to a sizeless assembly label, the index says it cannot tell and libdwfl
 * is asked (tests/unit/test_symindex.c compares the two on real files);
 * with no label that could name an address no symbol holds, it has none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symindex.h"

/* Symbols looked at around an address at most: past it (long overlapping ranges), libdwfl is asked. */
#define WALK_MAX 64

struct symentry {
	GElf_Addr value;           /* as libdwfl compares it: the module's address */
	GElf_Xword size;
	int ndx;                   /* in libdwfl's table: its order breaks ties */
	int bind;                  /* libdwfl's binding_value(): GLOBAL 3, WEAK 2, LOCAL 1 */
};

/* One of libdwfl's two passes (globals, locals): sized symbols by value, the furthest end so far. */
struct sympass {
	struct symentry *e;
	GElf_Addr *max_end;
	size_t n;
};

struct symindex {
	struct sympass pass[2];    /* [0] globals, searched first; [1] locals */
	GElf_Addr *labels;         /* values of sizeless globals, sorted: an exact hit skips the locals */
	size_t nlabels;
	GElf_Addr *all_labels;     /* values of every sizeless symbol, sorted */
	size_t nall_labels;
};

static int binding_value(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

static int by_value(const void *a, const void *b)
{
	const struct symentry *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

static int by_addr(const void *a, const void *b)
{
	const GElf_Addr *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

static int pass_finish(struct sympass *p)
{
	GElf_Addr end = 0;

	qsort(p->e, p->n, sizeof(*p->e), by_value);
	p->max_end = malloc((p->n ? p->n : 1) * sizeof(*p->max_end));
	if (!p->max_end)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		if (p->e[i].value + p->e[i].size > end)
			end = p->e[i].value + p->e[i].size;
		p->max_end[i] = end;
	}
	return 0;
}

/* Whether libdwfl's search_table() looks at symbol @ndx at all, for some address. */
static bool considered(const char *name, const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return name && name[0] && sym->st_shndx != SHN_UNDEF && type != STT_SECTION &&
	       type != STT_FILE && type != STT_TLS;
}

static int fill(struct symindex *x, Dwfl_Module *mod, int nsyms, int first_global)
{
	GElf_Addr value;
	GElf_Sym sym;
	const char *name;
	struct sympass *p;

	for (int i = 0; i < 2; i++) {
		x->pass[i].e = calloc((size_t)nsyms, sizeof(*x->pass[i].e));
		if (!x->pass[i].e)
			return -ENOMEM;
	}
	x->labels = calloc((size_t)nsyms, sizeof(*x->labels));
	x->all_labels = calloc((size_t)nsyms, sizeof(*x->all_labels));
	if (!x->labels || !x->all_labels)
		return -ENOMEM;
	for (int ndx = 1; ndx < nsyms; ndx++) {
		name = dwfl_module_getsym_info(mod, ndx, &sym, &value, NULL, NULL, NULL);
		if (!considered(name, &sym))
			continue;
		/* first_global 0: one table of both (a dynsym from the program headers), a single pass. */
		p = &x->pass[first_global && ndx < first_global ? 1 : 0];
		if (!sym.st_size) {
			x->all_labels[x->nall_labels++] = value;
			if (p == &x->pass[0])
				x->labels[x->nlabels++] = value;
			continue;
		}
		p->e[p->n++] = (struct symentry){ .value = value, .size = sym.st_size, .ndx = ndx,
						  .bind = binding_value(&sym) };
	}
	qsort(x->labels, x->nlabels, sizeof(*x->labels), by_addr);
	qsort(x->all_labels, x->nall_labels, sizeof(*x->all_labels), by_addr);
	for (int i = 0; i < 2; i++)
		if (pass_finish(&x->pass[i]))
			return -ENOMEM;
	return 0;
}

struct symindex *perfmap_prof__symindex_build(Dwfl_Module *mod)
{
	int nsyms = dwfl_module_getsymtab(mod);
	int first_global = dwfl_module_getsymtab_first_global(mod);
	struct symindex *x;
	int err;

	if (nsyms <= 1 || first_global < 0) {
		errno = ENOENT;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	err = fill(x, mod, nsyms, first_global);
	if (err) {
		perfmap_prof__symindex_free(x);
		errno = -err;
		return NULL;
	}
	return x;
}

/* The entries after the last one starting at or below @addr. */
static size_t upper_bound(const struct sympass *p, GElf_Addr addr)
{
	size_t lo = 0, hi = p->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->e[mid].value <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * libdwfl's try_sym_value() over the sized symbols of @p that hold @addr,
 * in its table's order. 1: *@best chosen; 0: none holds it; -1: too many
 * to look at.
 */
static int pass_choose(const struct sympass *p, GElf_Addr addr, const struct symentry **best)
{
	const struct symentry *hold[WALK_MAX], *s, *c = NULL;
	size_t n = 0, steps = 0;

	for (size_t j = upper_bound(p, addr); j-- > 0 && p->max_end[j] > addr;) {
		if (++steps > WALK_MAX)
			return -1;
		if (p->e[j].value + p->e[j].size > addr)
			hold[n++] = &p->e[j];
	}
	/* Table order: insertion, the holders are few. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && hold[k - 1]->ndx > hold[k]->ndx; k--) {
			s = hold[k];
			hold[k] = hold[k - 1];
			hold[k - 1] = s;
		}
	for (size_t i = 0; i < n; i++) {
		s = hold[i];
		if (!c || c->value < s->value || c->bind < s->bind)
			c = s;
		else if (c->value == s->value &&
			 ((c->size > s->size && c->bind <= s->bind) ||
			  (c->size >= s->size && c->bind < s->bind)))
			c = s;
	}
	*best = c;
	return c ? 1 : 0;
}

/* The labels in @v (sorted) below or at @addr. */
static size_t labels_upto(const GElf_Addr *v, size_t n, GElf_Addr addr)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (v[mid] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool is_label(const struct symindex *x, GElf_Addr addr)
{
	size_t k = labels_upto(x->labels, x->nlabels, addr);

	return k && x->labels[k - 1] == addr;
}

/*
 * No sized symbol holds @addr: whether libdwfl's fallback to a label can
 * name it. Its label must start at or past every sized symbol's end below
 * @addr (min_label); with none such, it names nothing.
 */
static bool label_may_name(const struct symindex *x, GElf_Addr addr)
{
	size_t k = labels_upto(x->all_labels, x->nall_labels, addr), j;
	GElf_Addr min_label = 0;

	if (!k)
		return false;
	for (int i = 0; i < 2; i++) {
		j = upper_bound(&x->pass[i], addr);
		if (j && x->pass[i].max_end[j - 1] > min_label)
			min_label = x->pass[i].max_end[j - 1];
	}
	return x->all_labels[k - 1] >= min_label;
}

bool perfmap_prof__symindex_lookup(const struct symindex *x, Dwfl_Module *mod, GElf_Addr addr,
				   const char **name, GElf_Off *off, GElf_Sym *sym)
{
	const struct symentry *best = NULL;
	GElf_Addr value;
	int r;

	r = pass_choose(&x->pass[0], addr, &best);
	/* No global holds it: libdwfl tries the locals, unless a sizeless global is exactly there. */
	if (!r && !is_label(x, addr))
		r = pass_choose(&x->pass[1], addr, &best);
	/* No symbol holds it and no label can: libdwfl names it nothing. */
	if (!r && !label_may_name(x, addr)) {
		*name = NULL;
		*off = 0;
		return true;
	}
	if (r <= 0)
		return false;
	*name = dwfl_module_getsym_info(mod, best->ndx, sym, &value, NULL, NULL, NULL);
	if (!*name)
		return false;
	*off = addr - best->value;
	return true;
}

void perfmap_prof__symindex_free(struct symindex *x)
{
	if (!x)
		return;
	for (int i = 0; i < 2; i++) {
		free(x->pass[i].e);
		free(x->pass[i].max_end);
	}
	free(x->labels);
	free(x->all_labels);
	free(x);
}

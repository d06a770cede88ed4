/* The kernel's symbols from /proc/kallsyms (addresses show to root only), sorted for lookups. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ksym {
	uint64_t addr;
	const char *name;          /* into @names */
	const char *module;
};

struct kallsyms {
	struct ksym *s;
	size_t n;
	char **strings;            /* every string made, to free */
	size_t nstrings, capstrings;
};

static const char *keep(struct kallsyms *k, const char *s)
{
	char **ns;

	if (k->nstrings == k->capstrings) {
		size_t cap = k->capstrings ? k->capstrings * 2 : 4096;

		ns = realloc(k->strings, cap * sizeof(*ns));
		if (!ns)
			return NULL;
		k->strings = ns;
		k->capstrings = cap;
	}
	return k->strings[k->nstrings++] = strdup(s);
}

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct kallsyms *perfmap_prof__kallsyms_load(void)
{
	char line[512], name[256], mod[128], type;
	const char *kernel, *last_mod = NULL;
	struct kallsyms *k = calloc(1, sizeof(*k));
	unsigned long long addr;
	size_t cap = 0;
	struct ksym *ns;
	FILE *f;
	int n;

	if (!k)
		return NULL;
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return k;  /* no kernel names: its frames stay addresses */
	kernel = keep(k, "[kernel]");
	while (fgets(line, sizeof(line), f)) {
		mod[0] = '\0';
		n = sscanf(line, "%llx %c %255s %127s", &addr, &type, name, mod);
		if (n < 3 || !addr || (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		if (k->n == cap) {
			size_t ncap = cap ? cap * 2 : 65536;

			ns = realloc(k->s, ncap * sizeof(*ns));
			if (!ns)
				break;
			k->s = ns;
			cap = ncap;
		}
		if (mod[0] && (!last_mod || strcmp(last_mod, mod)))
			last_mod = keep(k, mod);
		k->s[k->n].addr = addr;
		k->s[k->n].name = keep(k, name);
		k->s[k->n].module = mod[0] ? last_mod : kernel;
		if (!k->s[k->n].name || !k->s[k->n].module)
			break;
		k->n++;
	}
	fclose(f);
	qsort(k->s, k->n, sizeof(*k->s), by_addr);
	return k;
}

const char *perfmap_prof__kallsyms_find(const struct kallsyms *k, uint64_t addr, uint64_t *off,
					const char **module)
{
	size_t lo = 0, hi = k ? k->n : 0, mid;

	if (!hi || addr < k->s[0].addr)
		return NULL;
	/* The last symbol at or below @addr. */
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (k->s[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	*off = addr - k->s[lo].addr;
	*module = k->s[lo].module;
	return k->s[lo].name;
}

void perfmap_prof__kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->nstrings; i++)
		free(k->strings[i]);
	free(k->strings);
	free(k->s);
	free(k);
}

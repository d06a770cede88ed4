/* perfmap_profile_dumpstack(): a stack as text, with the letters of LuaJIT's luaJIT_profile_dumpstack. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer.h"

struct out {
	struct perfmap_symbolizer *s;
	size_t len;
	bool failed;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
	struct perfmap_symbolizer *s = o->s;
	va_list ap;
	size_t need;
	char *nb;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		o->failed = true;
		return;
	}
	need = o->len + (size_t)n + 1;
	if (need > s->dump_cap) {
		size_t cap = s->dump_cap ? s->dump_cap : 4096;

		while (cap < need)
			cap *= 2;
		nb = realloc(s->dump, cap);
		if (!nb) {
			o->failed = true;
			return;
		}
		s->dump = nb;
		s->dump_cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(s->dump + o->len, s->dump_cap - o->len, fmt, ap);
	va_end(ap);
	o->len += (size_t)n;
}

static const char *module_of(const struct perfmap_symbol *sym, bool full)
{
	const char *slash;

	if (full || sym->module[0] == '[')
		return sym->module;
	slash = strrchr(sym->module, '/');
	return slash ? slash + 1 : sym->module;
}

static void frame(struct out *o, char letter, const struct perfmap_symbol *sym, bool full)
{
	const char *mod = module_of(sym, full);

	switch (letter) {
	case 'f':
		if (sym->name)
			put(o, "%s", sym->name);
		else
			put(o, "%s+0x%llx", mod, (unsigned long long)sym->offset);
		break;
	case 'F':
		if (sym->name)
			put(o, "%s:%s", mod, sym->name);
		else
			put(o, "%s+0x%llx", mod, (unsigned long long)sym->offset);
		break;
	case 'l':
		if (sym->file && sym->line)
			put(o, "%s:%d", full ? sym->file : module_of(&(struct perfmap_symbol){ .module = sym->file }, false), sym->line);
		else if (sym->file)
			put(o, "%s", full ? sym->file : module_of(&(struct perfmap_symbol){ .module = sym->file }, false));
		else
			put(o, "%s+0x%llx", mod, (unsigned long long)sym->offset);
		break;
	}
}

const char *perfmap_profile_dumpstack(struct perfmap_symbolizer *s,
				      const struct perfmap_profile_stack *st, const char *fmt,
				      int depth, size_t *len)
{
	struct out o = { .s = s };
	struct perfmap_symbol sym;
	bool full = false;
	uint32_t n, i, k;
	const char *f;

	*len = 0;
	if (!s || !st || !fmt) {
		errno = EINVAL;
		return NULL;
	}
	n = st->nips;
	if ((uint32_t)(depth < 0 ? -depth : depth) < n)
		n = (uint32_t)(depth < 0 ? -depth : depth);
	for (k = 0; k < n; k++) {
		/* Callee first; a negative depth: the outermost caller of those kept first. */
		i = depth < 0 ? n - 1 - k : k;
		perfmap_symbolizer_lookup_image(s, st->pid, st->start_ticks, st->image, st->ips[i], &sym);
		for (f = fmt; *f; f++) {
			if (*f == 'Z') {
				if (k == n - 1)
					break;
				continue;
			}
			if (*f == 'p')
				full = true;
			else if (*f == 'f' || *f == 'F' || *f == 'l')
				frame(&o, *f, &sym, full);
			else
				put(&o, "%c", *f);
		}
	}
	if (o.failed) {
		errno = ENOMEM;
		return NULL;
	}
	if (!s->dump) {
		put(&o, "%s", "");
		o.len = 0;
	}
	*len = o.len;
	return s->dump;
}

/*
 * perfmapctl profile's report: LuaJIT's jit/p.lua carried over. Letters
 * become a view (profile_view.c); each sample gets a first-level key (a
 * stack, a state or a zone) and maybe a second; keys are counted, sorted by
 * count and printed down to the minimum percentage, the second level
 * indented under the first.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "profile_annotate.h"
#include "profile_report.h"

const char *prof_state_name(char state)
{
	switch (state) {
	case 'J': return "JIT code";
	case 'U': return "Unnamed JIT code";
	case 'I': return "Interpreted";
	case 'G': return "Garbage Collector";
	case 'C': return "C code";
	case 'K': return "Kernel";
	case '?': return "Unknown (not read)";
	default: return "Unknown";
	}
}

/* A growing string. */
struct str {
	char *s;
	size_t len, cap;
	bool failed;
};

__attribute__((format(printf, 2, 3)))
static void sput(struct str *b, const char *fmt, ...)
{
	va_list ap;
	char *ns;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || b->failed) {
		b->failed = true;
		return;
	}
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 128;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		ns = realloc(b->s, cap);
		if (!ns) {
			b->failed = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* The length of the valid UTF-8 sequence at @s (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t c;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, past U+10FFFF. */
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

/*
 * @s as the report prints it: names, paths and zones come from other
 * processes and files, so control bytes and invalid UTF-8 become \xNN
 * (no escape sequence reaches a terminal), and in folded stacks (@graph) so
 * does ';', which would forge a frame.
 */
static void sput_text(struct str *b, const char *s, bool graph)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	while (*p) {
		n = utf8_len(p);
		if (!n || *p < 0x20 || *p == 0x7f || *p == '\\' || (graph && *p == ';')) {
			sput(b, "\\x%02x", *p);
			p++;
			continue;
		}
		sput(b, "%.*s", (int)n, (const char *)p);
		p += n;
	}
}

static const char *base(const char *path, bool full)
{
	const char *slash;

	if (full || !path || path[0] == '[')
		return path;
	slash = strrchr(path, '/');
	return slash && slash[1] ? slash + 1 : path;
}

static void put_frame(struct str *b, char scope, const struct prof_frame *f, bool paths, bool graph)
{
	const char *mod = base(f->module, paths);

	if (scope == 'l' && f->file) {
		sput_text(b, base(f->file, paths), graph);
		if (f->line)
			sput(b, ":%d", f->line);
	} else if (scope == 'l' && f->name) {
		/* No line (JIT code naming no file, the kernel, a file without DWARF): its name. */
		sput_text(b, f->name, graph);
	} else if (scope == 'F' && f->name) {
		sput_text(b, mod, graph);
		sput(b, ":");
		sput_text(b, f->name, graph);
	} else if (scope == 'f' && f->name) {
		sput_text(b, f->name, graph);
	} else {
		sput_text(b, mod, graph);
		sput(b, "+0x%llx", (unsigned long long)f->offset);
	}
}

/* The stack key: |depth| frames, callee first joined by " < ", or caller first by " > " (G: ";"). */
static void put_stack(struct str *b, const struct prof_sample *s, const struct prof_view *v,
		      char scope, int depth)
{
	uint32_t n = s->n, k, i;
	const char *sep = v->raw == 'G' ? ";" : depth < 0 ? " > " : " < ";

	if ((uint32_t)abs(depth) < n)
		n = (uint32_t)abs(depth);
	for (k = 0; k < n; k++) {
		i = depth < 0 ? n - 1 - k : k;
		if (k)
			sput(b, "%s", sep);
		put_frame(b, scope, &s->frames[i], v->paths, v->raw == 'G');
	}
	if (!n)
		sput(b, "%s", "[no stack]");
}

struct entry {
	char *k1, *k2;             /* k2 NULL: no second level */
	uint64_t count;
	const struct prof_cred *cred;
};

static int keys_of(const struct prof_sample *s, const struct prof_view *v, struct entry *e)
{
	struct str stack = { 0 }, stack2 = { 0 };
	const char *state = NULL;
	char *cut, *k1 = NULL, *k2 = NULL;

	struct str zone = { 0 };

	if (v->states == 'v') {
		state = prof_state_name(s->n ? s->frames[0].state : 0);
	} else if (v->states == 'z') {
		sput_text(&zone, s->zone ? s->zone : "(none)", false);
		state = zone.s ? zone.s : "(none)";
	}
	if (v->scope) {
		put_stack(&stack, s, v, v->scope, v->depth);
		if (v->split == 2) {
			const char *sep = v->depth < 0 ? " > " : " < ";

			cut = stack.s ? strstr(stack.s, sep) : NULL;
			if (cut) {
				*cut = '\0';
				k2 = strdup(cut + 3);
			}
		} else if (v->split == 3 && s->n) {
			put_frame(&stack2, 'l', &s->frames[0], v->paths, false);
			k2 = stack2.s;
			stack2.s = NULL;
		}
	}
	if (stack.failed || stack2.failed)
		goto nomem;
	if (v->split == 1) {
		k1 = state ? strdup(state) : NULL;
		if (state && stack.s) {
			k2 = stack.s;
			stack.s = NULL;
		}
	} else if (stack.s) {
		k1 = stack.s;
		stack.s = NULL;
		if (!k2 && state)
			k2 = strdup(state);
	}
	free(stack.s);
	free(stack2.s);
	free(zone.s);
	e->k1 = k1;
	e->k2 = k2;
	e->count = s->count;
	e->cred = s->cred;
	return k1 ? 0 : -ENOMEM;
nomem:
	free(stack.s);
	free(stack2.s);
	free(zone.s);
	free(k2);
	return -ENOMEM;
}

static int by_keys(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->k1, y->k1);

	if (c)
		return c;
	if (!x->k2 || !y->k2)
		return !!x->k2 - !!y->k2;
	return strcmp(x->k2, y->k2);
}


static int by_count(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void print_level(FILE *out, const struct prof_view *v, struct tally *t, size_t n,
			uint64_t total, const char *indent, struct tally *sub)
{
	const char *ind2 = v->split == 1 || v->split == 3 ? "  -- " : v->depth < 0 ? "  -> " : "  <- ";

	qsort(t, n, sizeof(*t), by_count);
	for (size_t i = 0; i < n; i++) {
		int pct = prof_pct(t[i].count, total);

		if (pct < v->min_pct)
			break;
		if (v->raw == 'G')
			fprintf(out, "%s %llu\n", t[i].key, (unsigned long long)t[i].count);
		else if (v->raw == 'r')
			fprintf(out, "%s%5llu  %s\n", indent, (unsigned long long)t[i].count, t[i].key);
		else
			fprintf(out, "%s%2d%%  %s\n", indent, pct, t[i].key);
		if (sub && t[i].last > t[i].first)
			print_level(out, v, sub + t[i].first, t[i].last - t[i].first, t[i].count, ind2,
				    NULL);
	}
}


int prof_report(const struct prof_sample *s, size_t n, const struct prof_view *v, FILE *out)
{
	const struct prof_cred **creds = NULL;
	struct tally *t1 = NULL, *t2 = NULL;
	struct entry *e = NULL;
	size_t i, n1 = 0, n2 = 0;
	uint64_t total = 0;
	int err = -ENOMEM;

	for (i = 0; i < n; i++)
		total += s[i].count;
	if (!total) {
		/* Folded stacks of nothing are no lines at all: a flame graph tool reads that. */
		if (v->raw != 'G')
			fputs("[No samples collected]\n", out);
		return ferror(out) ? -EIO : 0;
	}
	e = calloc(n, sizeof(*e));
	t1 = calloc(n, sizeof(*t1));
	t2 = calloc(n, sizeof(*t2));
	creds = calloc(n, sizeof(*creds));
	if (!e || !t1 || !t2 || !creds)
		goto free_entries;
	for (i = 0; i < n; i++)
		if (keys_of(&s[i], v, &e[i]))
			goto free_entries;
	qsort(e, n, sizeof(*e), by_keys);
	/* Equal first keys are together now; equal second keys within them. */
	for (i = 0; i < n; i++) {
		if (!n1 || strcmp(t1[n1 - 1].key, e[i].k1)) {
			t1[n1++] = (struct tally){ .key = e[i].k1, .first = n2, .last = n2,
						   .creds = creds + i };
		}
		t1[n1 - 1].count += e[i].count;
		/* Whose samples a first-level key holds: annotation opens its file as each of them. */
		creds[i] = e[i].cred;
		t1[n1 - 1].ncreds++;
		if (!e[i].k2)
			continue;
		if (n2 == t1[n1 - 1].first || strcmp(t2[n2 - 1].key, e[i].k2))
			t2[n2++] = (struct tally){ .key = e[i].k2 };
		t2[n2 - 1].count += e[i].count;
		t1[n1 - 1].last = n2;
	}
	if (v->annotate >= 0)
		err = prof_annotate(t1, n1, total, v, out);
	else {
		print_level(out, v, t1, n1, total, "", t2);
		err = ferror(out) ? -EIO : 0;
	}
free_entries:
	for (i = 0; e && i < n; i++) {
		free(e[i].k1);
		free(e[i].k2);
	}
	free(e);
	free(t1);
	free(t2);
	free(creds);
	return err;
}

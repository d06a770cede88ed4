/*
 * A map's entries against the process's mappings: how much of the code perf
 * resolves through the map is named (coverage), which JIT regions nothing
 * names, and which entries name nothing perf would look up (freed code,
 * another image's, memfd or file-backed code that perf resolves otherwise).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

struct span {
	uint64_t start, end;
};

static bool is_exec(const struct perfmap_vma *v)
{
	return v && (v->prot & PROT_EXEC);
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static void list_add(struct perfmap_corr_list *l, uint64_t start, uint64_t size,
		     const char *name, size_t name_len)
{
	struct perfmap_corr_entry *e;

	l->count++;
	l->bytes += size;
	if (l->kept == PERFMAP_CORR_KEEP)
		return;
	e = &l->v[l->kept++];
	e->start = start;
	e->size = size;
	if (name_len >= sizeof(e->name))
		name_len = sizeof(e->name) - 1;
	memcpy(e->name, name, name_len);
	e->name[name_len] = '\0';
}

/* Sorted entries merged into disjoint spans: the bytes some entry covers. */
static size_t merge_spans(struct span *s, size_t n)
{
	size_t out = 0, i;

	qsort(s, n, sizeof(*s), cmp_span);
	for (i = 0; i < n; i++) {
		if (out && s[i].start <= s[out - 1].end) {
			if (s[i].end > s[out - 1].end)
				s[out - 1].end = s[i].end;
			continue;
		}
		s[out++] = s[i];
	}
	return out;
}

/*
 * Bytes of [@lo, @hi) the spans cover, and in *@top the end of the highest
 * (@lo when none); *@k walks forward, both lists being sorted.
 */
static uint64_t covered(const struct span *s, size_t n, size_t *k, uint64_t lo, uint64_t hi,
			uint64_t *top)
{
	uint64_t sum = 0, a, b;
	size_t i;

	*top = lo;
	while (*k < n && s[*k].end <= lo)
		(*k)++;
	for (i = *k; i < n && s[i].start < hi; i++) {
		a = s[i].start > lo ? s[i].start : lo;
		b = s[i].end < hi ? s[i].end : hi;
		sum += b - a;
		*top = b;
	}
	return sum;
}

static void judge_regions(const struct perfmap_vmas *vs, const struct span *s, size_t n,
			  struct perfmap_corr *out)
{
	const struct perfmap_vma *v;
	size_t i, k = 0;
	uint64_t c, top;

	for (i = 0; i < vs->n; i++) {
		v = &vs->v[i];
		if (!is_exec(v))
			continue;
		if (perfmap__vma_is_jit_memfd(v)) {
			out->exec_memfd_regions++;
			out->exec_memfd_bytes += v->hi - v->lo;
		}
		if (v->kind != PERFMAP_VMA_ANON)
			continue;
		out->exec_anon_regions++;
		out->exec_anon_bytes += v->hi - v->lo;
		c = covered(s, n, &k, v->lo, v->hi, &top);
		out->named_bytes += c;
		out->used_bytes += top - v->lo;
		if (!c)
			list_add(&out->unnamed, v->lo, v->hi - v->lo, "", 0);
	}
}

/* Each entry by the mapping its start lies in, in address order. */
static void judge_entries(struct perfmap_table *t, const struct perfmap_vmas *vs,
			  const struct span *order, size_t n, struct perfmap_corr *out)
{
	const struct perfmap_vma *v;
	uint64_t start, end;
	const char *name;
	size_t i, len;

	for (i = 0; i < n; i++) {
		/* order[i].end holds the entry's index here, see perfmap__correlate(). */
		perfmap__table_entry(t, (size_t)order[i].end, &start, &end, &name, &len);
		v = perfmap__vmas_find(vs, start);
		if (!is_exec(v))
			list_add(&out->stale, start, end - start, name, len);
		else if (v->kind == PERFMAP_VMA_ANON)
			out->in_anon++;
		else if (perfmap__vma_is_jit_memfd(v))
			list_add(&out->in_memfd, start, end - start, name, len);
		else
			list_add(&out->in_file, start, end - start, name, len);
	}
}

int perfmap__correlate(struct perfmap_reader *r, const struct perfmap_vmas *vs,
		       struct perfmap_corr *out)
{
	struct perfmap_table *t;
	struct span *spans = NULL, *order = NULL;
	const char *name;
	size_t n, i, len;
	int err;

	memset(out, 0, sizeof(*out));
	t = perfmap_table__new();
	if (!t)
		return -ENOMEM;
	err = perfmap_table__load(t, r);
	if (err)
		goto free_table;
	out->read = *perfmap_reader__stats(r);
	err = perfmap_table__stats(t, &out->table);
	if (err)
		goto free_table;
	n = perfmap_table__count(t);
	spans = malloc((n + 1) * sizeof(*spans));
	order = malloc((n + 1) * sizeof(*order));
	if (!spans || !order) {
		err = -ENOMEM;
		goto free_spans;
	}
	for (i = 0; i < n; i++) {
		perfmap__table_entry(t, i, &spans[i].start, &spans[i].end, &name, &len);
		/* By start, then by position in the file: the index rides in .end. */
		order[i] = (struct span){ spans[i].start, i };
	}
	qsort(order, n, sizeof(*order), cmp_span);
	judge_entries(t, vs, order, n, out);
	judge_regions(vs, spans, merge_spans(spans, n), out);
free_spans:
	free(order);
	free(spans);
free_table:
	perfmap_table__free(t);
	return err;
}

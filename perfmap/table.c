/* All entries of a map in memory: later lines win, duplicates and overlaps counted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tent {
	uint64_t start, end;  /* end exclusive */
	size_t name_off, name_len;
};

/* A piece of the address space and the entry that names it: the last one covering it. */
struct seg {
	uint64_t start, end;
	size_t ent;
};

struct perfmap_table {
	struct tent *ents;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	size_t max_name_len;
	/* Derived on demand, dropped by every add. */
	bool painted;
	struct seg *segs;
	size_t nsegs;
	uint64_t *kept;       /* bytes each entry keeps after painting */
};

struct perfmap_table *perfmap_table__new(void)
{
	return calloc(1, sizeof(struct perfmap_table));
}

static void table_unpaint(struct perfmap_table *t)
{
	free(t->segs);
	free(t->kept);
	t->segs = NULL;
	t->kept = NULL;
	t->nsegs = 0;
	t->painted = false;
}

void perfmap_table__free(struct perfmap_table *t)
{
	if (!t)
		return;
	table_unpaint(t);
	free(t->ents);
	free(t->names);
	free(t);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 64;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		ncap *= 2;
	}
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

int perfmap_table__add(struct perfmap_table *t, const struct perfmap_record *rec)
{
	struct tent *e;
	int err;

	if (!t || !rec || !perfmap__range_ok(rec->start, rec->size) ||
	    (!rec->name && rec->name_len))
		return -EINVAL;
	err = grow((void **)&t->ents, &t->cap, t->n + 1, sizeof(*t->ents));
	if (!err)
		err = grow((void **)&t->names, &t->names_cap,
			   t->names_len + rec->name_len, 1);
	if (err)
		return err;
	table_unpaint(t);

	e = &t->ents[t->n++];
	e->start = rec->start;
	e->end = rec->start + rec->size;
	e->name_off = t->names_len;
	e->name_len = rec->name_len;
	if (rec->name_len)
		memcpy(t->names + t->names_len, rec->name, rec->name_len);
	t->names_len += rec->name_len;
	if (rec->name_len > t->max_name_len)
		t->max_name_len = rec->name_len;
	return 0;
}

int perfmap_table__load(struct perfmap_table *t, struct perfmap_reader *r)
{
	struct perfmap_record rec;
	int err;

	while ((err = perfmap_reader__next(r, &rec)) > 0) {
		err = perfmap_table__add(t, &rec);
		if (err)
			return err;
	}
	return err;
}

size_t perfmap__table_bytes(const struct perfmap_table *t)
{
	/* Painting adds segments (two at most) and kept bytes per entry; stats two indices more. */
	size_t per_painted = 2 * sizeof(struct seg) + sizeof(uint64_t) + 2 * sizeof(size_t);

	return t->cap * sizeof(*t->ents) + t->names_cap + t->n * per_painted;
}

size_t perfmap_table__count(const struct perfmap_table *t)
{
	return t ? t->n : 0;
}

void perfmap__table_entry(const struct perfmap_table *t, size_t i,
			  uint64_t *start, uint64_t *end, const char **name,
			  size_t *name_len)
{
	const struct tent *e = &t->ents[i];

	*start = e->start;
	*end = e->end;
	*name = t->names + e->name_off;
	*name_len = e->name_len;
}

/* Order by start, then by position in the file. */
static int cmp_start(const void *a, const void *b, void *ctx)
{
	const struct tent *ents = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;

	if (ents[i].start != ents[j].start)
		return ents[i].start < ents[j].start ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* A max-heap of entry indices: the latest line is on top. */
static void heap_push(size_t *heap, size_t *n, size_t v)
{
	size_t i = (*n)++, parent;

	while (i && heap[parent = (i - 1) / 2] < v) {
		heap[i] = heap[parent];
		i = parent;
	}
	heap[i] = v;
}

static void heap_pop(size_t *heap, size_t *n)
{
	size_t v = heap[--*n], i = 0, c;

	while ((c = 2 * i + 1) < *n) {
		if (c + 1 < *n && heap[c + 1] > heap[c])
			c++;
		if (heap[c] <= v)
			break;
		heap[i] = heap[c];
		i = c;
	}
	heap[i] = v;
}

static void add_seg(struct perfmap_table *t, size_t ent, uint64_t start, uint64_t end)
{
	struct seg *last = t->nsegs ? &t->segs[t->nsegs - 1] : NULL;

	t->kept[ent] += end - start;
	/* An entry interrupted by nothing stays one line. */
	if (last && last->ent == ent && last->end == start) {
		last->end = end;
		return;
	}
	t->segs[t->nsegs++] = (struct seg){ start, end, ent };
}

/*
 * Sweep the entries by start with the live ones in a heap keyed by file
 * position: between two boundaries the top of the heap names the addresses.
 * Each entry is pushed once, popped once and starts at most two segments,
 * so this is O(n log n) and needs at most 2n segments.
 */
int perfmap__table_paint(struct perfmap_table *t)
{
	size_t *order = NULL, *heap = NULL, nheap = 0, i = 0, top;
	uint64_t pos = 0, next;
	int err = -ENOMEM;

	if (t->painted)
		return 0;
	order = malloc((t->n + 1) * sizeof(*order));
	heap = malloc((t->n + 1) * sizeof(*heap));
	t->segs = malloc((2 * t->n + 1) * sizeof(*t->segs));
	t->kept = calloc(t->n + 1, sizeof(*t->kept));
	if (!order || !heap || !t->segs || !t->kept)
		goto free_arrays;
	for (i = 0; i < t->n; i++)
		order[i] = i;
	qsort_r(order, t->n, sizeof(*order), cmp_start, t->ents);

	i = 0;
	while (i < t->n || nheap) {
		if (!nheap && t->ents[order[i]].start > pos)
			pos = t->ents[order[i]].start;
		while (i < t->n && t->ents[order[i]].start <= pos)
			heap_push(heap, &nheap, order[i++]);
		/* Entries ended behind pos leave once they surface. */
		while (nheap && t->ents[heap[0]].end <= pos)
			heap_pop(heap, &nheap);
		if (!nheap)
			continue;
		top = heap[0];
		next = t->ents[top].end;
		if (i < t->n && t->ents[order[i]].start < next)
			next = t->ents[order[i]].start;
		add_seg(t, top, pos, next);
		pos = next;
	}
	t->painted = true;
	err = 0;

free_arrays:
	free(order);
	free(heap);
	if (err)
		table_unpaint(t);
	return err;
}

long perfmap__table_lookup_entry(struct perfmap_table *t, uint64_t addr)
{
	size_t lo = 0, hi, mid;
	int err;

	err = perfmap__table_paint(t);
	if (err)
		return err;
	hi = t->nsegs;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (t->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < t->nsegs && t->segs[lo].start <= addr)
		return (long)t->segs[lo].ent;
	return -ENOENT;
}

ssize_t perfmap_table__lookup(struct perfmap_table *t, uint64_t addr,
			      const char **name)
{
	long ent = perfmap__table_lookup_entry(t, addr);

	/*
	 * The canonical form has no names under 3 bytes: perf would drop them.
	 * perfmap.h promises the length or -ENOENT: a table that could not be
	 * painted (-ENOMEM) resolves nothing either.
	 */
	if (ent < 0 || t->ents[ent].name_len < 3)
		return -ENOENT;
	*name = t->names + t->ents[ent].name_off;
	return (ssize_t)t->ents[ent].name_len;
}

/* Start ascending, end descending (containers first), then name, then latest first. */
static int cmp_overlap(const void *a, const void *b, void *ctx)
{
	const struct perfmap_table *t = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const struct tent *x = &t->ents[i], *y = &t->ents[j];
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	c = memcmp(t->names + x->name_off, t->names + y->name_off, n);
	if (c)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return i > j ? -1 : i < j;
}

static bool same_entry(const struct perfmap_table *t, size_t i, size_t j)
{
	const struct tent *x = &t->ents[i], *y = &t->ents[j];

	return x->start == y->start && x->end == y->end &&
	       x->name_len == y->name_len &&
	       !memcmp(t->names + x->name_off, t->names + y->name_off, x->name_len);
}

/*
 * Overlaps among distinct entries, in start order: an entry overlaps an
 * earlier one when it starts before the furthest end so far, and a later one
 * when the next start falls before its own end.
 */
static void count_overlaps(const struct perfmap_table *t, const size_t *uniq,
			   size_t n, struct perfmap_table_stats *s)
{
	uint64_t max_end = 0;
	size_t k;
	bool prev, next;

	for (k = 0; k < n; k++) {
		const struct tent *e = &t->ents[uniq[k]];

		prev = k && e->start < max_end;
		next = k + 1 < n && t->ents[uniq[k + 1]].start < e->end;
		if (prev || next)
			s->overlapping++;
		if (prev && e->end <= max_end)
			s->nested++;
		if (e->end > max_end)
			max_end = e->end;
	}
}

int perfmap_table__stats(struct perfmap_table *t, struct perfmap_table_stats *s)
{
	size_t *order, *uniq, nuniq = 0, k, i;
	int err;

	memset(s, 0, sizeof(*s));
	s->entries = t->n;
	err = perfmap__table_paint(t);
	if (err)
		return err;
	order = malloc((t->n + 1) * sizeof(*order));
	uniq = malloc((t->n + 1) * sizeof(*uniq));
	if (!order || !uniq) {
		free(order);
		free(uniq);
		return -ENOMEM;
	}
	for (i = 0; i < t->n; i++)
		order[i] = i;
	qsort_r(order, t->n, sizeof(*order), cmp_overlap, t);

	/* Twins sort together, latest first: it alone is kept and counted. */
	for (k = 0; k < t->n; k++) {
		i = order[k];
		if (nuniq && same_entry(t, uniq[nuniq - 1], i)) {
			s->duplicates++;
			continue;
		}
		uniq[nuniq++] = i;
		if (t->ents[i].name_len < 3)
			s->short_names++;
		if (!t->kept[i])
			s->hidden++;
		else if (t->kept[i] < t->ents[i].end - t->ents[i].start)
			s->trimmed++;
	}
	count_overlaps(t, uniq, nuniq, s);
	for (k = 0; k < t->nsegs; k++)
		if (t->ents[t->segs[k].ent].name_len >= 3)
			s->lines_out++;
	free(order);
	free(uniq);
	return 0;
}

int perfmap_table__write_canonical(struct perfmap_table *t, int fd)
{
	size_t cap, off = 0, k;
	const struct seg *sg;
	const struct tent *e;
	char *buf;
	int err;

	err = perfmap__table_paint(t);
	if (err)
		return err;
	/* Room for the longest line the table can produce, and then some. */
	cap = (64u << 10) + PERFMAP_FIXED_MAX + t->max_name_len;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (k = 0; k < t->nsegs; k++) {
		sg = &t->segs[k];
		e = &t->ents[sg->ent];
		if (e->name_len < 3)
			continue;
		if (off + PERFMAP_FIXED_MAX + e->name_len > cap) {
			err = perfmap__write_all(fd, buf, off);
			if (err)
				goto free_buf;
			off = 0;
		}
		off += perfmap__format_line(buf + off, sg->start, sg->end - sg->start,
					    t->names + e->name_off, e->name_len);
	}
	if (off)
		err = perfmap__write_all(fd, buf, off);
free_buf:
	free(buf);
	return err;
}

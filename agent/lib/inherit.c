/*
 * What a forked child inherited: its mappings, read as its copy begins. An
 * entry is kept when its start lies in one of them. A freed region's
 * entries, and those of regions fork does not pass on (MADV_DONTFORK), name
 * nothing in the child; a shared memfd is passed on, but perf looks its code
 * up as a file, never in a map. The child may map new code at a freed
 * address before we look: that entry is then kept, as before (nothing is
 * lost). Only each line's start address is read: the cost of a copy that
 * leaves nothing out stays a memchr() over the parent's bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/inherit.h"
#include "lib/procfs.h"

static bool kept(const struct perfmap_vma *v)
{
	return !perfmap__vma_is_jit_memfd(v);
}

/* Only what the lookups need: the kept ranges, neighbours merged, the array shrunk. */
static void compact(struct perfmap_vmas *vs)
{
	struct perfmap_vma *nv;
	size_t i, n = 0;

	for (i = 0; i < vs->n; i++) {
		if (!kept(&vs->v[i]))
			continue;
		if (n && vs->v[n - 1].hi == vs->v[i].lo)
			vs->v[n - 1].hi = vs->v[i].hi;
		else
			vs->v[n++] = vs->v[i];
	}
	vs->n = n;
	nv = n ? realloc(vs->v, n * sizeof(*nv)) : NULL;
	if (nv) {
		vs->v = nv;
		vs->cap = n;
	}
}

void inherit_read(pid_t pid, uint64_t start_ticks, struct inherit *in)
{
	in->known = !perfmap__vmas_read_max(pid, INHERIT_MAPS_MAX_BYTES, &in->vs) &&
		    procfs_is(pid, start_ticks);
	if (in->known)
		compact(&in->vs);
}

void inherit_release(struct inherit *in)
{
	perfmap__vmas_release(&in->vs);
	in->known = false;
}

bool inherit_has(const struct inherit *in, uint64_t addr)
{
	return !in->known || perfmap__vmas_find(&in->vs, addr);
}

bool inherit_line_start(const char *p, const char *end, uint64_t *start)
{
	uint64_t v = 0;
	int d, n = 0;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (; p < end && n < 17; p++, n++) {
		d = *p >= '0' && *p <= '9' ? *p - '0' :
		    (*p | 0x20) >= 'a' && (*p | 0x20) <= 'f' ? (*p | 0x20) - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	*start = v;
	return n > 0 && n <= 16;
}

/* A line that is no entry (no address) is not ours to judge: kept. */
static bool line_kept(const struct inherit *in, const char *p, const char *nl)
{
	uint64_t start;

	return !inherit_line_start(p, nl, &start) || inherit_has(in, start);
}

bool inherit_names_other(const struct inherit *in, const char *buf, size_t len)
{
	const char *p, *nl, *end = buf + len;

	if (!in->known)
		return false;
	for (p = buf; (nl = memchr(p, '\n', end - p)); p = nl + 1)
		if (!line_kept(in, p, nl))
			return true;
	return false;
}

size_t inherit_filter(const struct inherit *in, char *buf, size_t len, long *left_out)
{
	char *p, *nl, *end = buf + len, *out = buf;

	if (!in->known)
		return len;
	for (p = buf; (nl = memchr(p, '\n', end - p)); p = nl + 1) {
		if (!line_kept(in, p, nl)) {
			(*left_out)++;
			continue;
		}
		memmove(out, p, nl + 1 - p);
		out += nl + 1 - p;
	}
	memmove(out, p, end - p);
	return (out - buf) + (end - p);
}

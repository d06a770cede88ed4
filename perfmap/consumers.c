/* perf, samply, blazesym and bcc reproduced: how each parses a map line and resolves an address. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "consumers.h"

/*
 * Each function below follows the consumer's source (see docs/format.md for
 * versions and links). perf and bcc call glibc's strtoull(), so do we.
 */

/* perf: tools/perf/util/symbol.c, dso__load_perf_map() and hex2u64(). */
static size_t perf_hex2u64(const char *p, uint64_t *v)
{
	char *end;

	*v = strtoull(p, &end, 16);
	return (size_t)(end - p);
}

static enum sim_result sim_perf(const struct perfmap_line *line, char *s,
				struct sim_entry *e)
{
	/* getline() length; perf then chops one byte, newline or not. */
	size_t line_len = line->len + (line->kind != PERFMAP_LINE_INCOMPLETE);
	size_t len;

	if (!line_len)
		return SIM_NONE;
	line_len--;
	memcpy(s, line->text, line_len);
	s[line_len] = '\0';

	len = perf_hex2u64(s, &e->start) + 1;
	if (len + 2 >= line_len)
		return SIM_NONE;
	len += perf_hex2u64(s + len, &e->size) + 1;
	if (len + 2 >= line_len)
		return SIM_NONE;
	e->name = s + len;
	e->name_len = strlen(e->name);  /* a C string: a NUL ends the name */
	return SIM_ENTRY;
}

/* Rust's u64::from_str_radix(s, 16): optional '+', hex digits only, no overflow. */
static bool rust_hex(const char *s, size_t len, uint64_t *v)
{
	size_t i = 0;
	int d;

	if (len && s[0] == '+')
		i = 1;
	if (i == len)
		return false;
	for (*v = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return false;
		if (*v >> 60)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

/* Rust's trim_start_matches("0x"): every leading "0x", lower case only. */
static void trim_0x(const char **s, size_t *len)
{
	while (*len >= 2 && (*s)[0] == '0' && (*s)[1] == 'x') {
		*s += 2;
		*len -= 2;
	}
}

/* samply: samply/src/shared/perf_map.rs, process_perf_map_line(). */
static enum sim_result sim_samply(const struct perfmap_line *line,
				  struct sim_entry *e)
{
	const char *p = line->text, *end = p + line->len, *a, *b, *sp;
	size_t alen, blen;

	/* str::lines() drops "\r\n" line endings, not a bare final '\r'. */
	if (line->kind != PERFMAP_LINE_INCOMPLETE && p < end && end[-1] == '\r')
		end--;
	/* splitn(3, ' ') */
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp)
		return SIM_NONE;
	a = p;
	alen = (size_t)(sp - p);
	p = sp + 1;
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp)
		return SIM_NONE;
	b = p;
	blen = (size_t)(sp - p);
	p = sp + 1;
	if (p == end)
		return SIM_NONE;
	trim_0x(&a, &alen);
	trim_0x(&b, &blen);
	if (!rust_hex(a, alen, &e->start) || !rust_hex(b, blen, &e->size))
		return SIM_NONE;
	e->name = p;
	e->name_len = (size_t)(end - p);
	return SIM_ENTRY;
}

/* Rust's u8::is_ascii_whitespace(): no vertical tab. */
static bool rust_ascii_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

static const char *find_ws(const char *p, const char *end)
{
	for (; p < end; p++)
		if (rust_ascii_ws((unsigned char)*p))
			return p;
	return NULL;
}

/* blazesym: src/perf_map.rs, parse_perf_map_line() on one piece of a line. */
static enum sim_result blazesym_piece(const char *p, const char *end,
				      struct sim_entry *e)
{
	const char *ws1, *ws2;

	ws1 = find_ws(p, end);
	if (!ws1)
		return SIM_FATAL;
	ws2 = find_ws(ws1 + 1, end);
	if (!ws2)
		return SIM_FATAL;
	if (!rust_hex(p, (size_t)(ws1 - p), &e->start) ||
	    !rust_hex(ws1 + 1, (size_t)(ws2 - ws1 - 1), &e->size) ||
	    !perfmap__utf8_valid(ws2 + 1, (size_t)(end - ws2 - 1)))
		return SIM_FATAL;
	e->name = ws2 + 1;
	e->name_len = (size_t)(end - ws2 - 1);
	return SIM_ENTRY;
}

/*
 * blazesym splits the file on '\n' and '\r' alike and skips empty pieces;
 * any piece that does not parse fails the whole file. A line with an inner
 * '\r' is several pieces: the first is the line's symbol, the others junk
 * (reported as fatal when they do not parse, which is the usual case).
 */
static enum sim_result sim_blazesym(const struct perfmap_line *line,
				    struct sim_entry *e)
{
	const char *p = line->text, *end = p + line->len, *cr;
	enum sim_result res = SIM_NONE;
	struct sim_entry extra;

	while (p < end) {
		cr = memchr(p, '\r', (size_t)(end - p));
		if (!cr)
			cr = end;
		if (cr > p) {
			if (blazesym_piece(p, cr, res == SIM_NONE ? e : &extra) ==
			    SIM_FATAL)
				return SIM_FATAL;
			res = SIM_ENTRY;
		}
		p = cr + 1;
	}
	return res;
}

/* bcc: src/cc/bcc_perf_map.c, bcc_perf_map_foreach_sym(). */
static enum sim_result sim_bcc(const struct perfmap_line *line, char *s,
			       struct sim_entry *e)
{
	size_t len = line->len;
	char *cursor = s, *sep, *nl;

	memcpy(s, line->text, len);
	if (line->kind != PERFMAP_LINE_INCOMPLETE)
		s[len++] = '\n';
	s[len] = '\0';

	errno = 0;
	e->start = strtoull(cursor, &sep, 16);
	if (e->start == 0 || *sep != ' ' || (e->start == ULLONG_MAX && errno == ERANGE))
		return SIM_NONE;
	cursor = sep;
	while (*cursor && isspace((unsigned char)*cursor))
		cursor++;
	errno = 0;
	e->size = strtoull(cursor, &sep, 16);
	if (*sep != ' ' || (sep == cursor && e->size == 0) ||
	    (e->size == ULLONG_MAX && errno == ERANGE))
		return SIM_NONE;
	cursor = sep;
	while (*cursor && isspace((unsigned char)*cursor))
		cursor++;
	nl = strchr(cursor, '\n');
	if (nl)
		*nl = '\0';
	e->name = cursor;
	e->name_len = strlen(cursor);
	return SIM_ENTRY;
}

enum sim_result perfmap__sim_line(enum perfmap_consumer c, const struct perfmap_line *line,
				  char *scratch, struct sim_entry *e)
{
	memset(e, 0, sizeof(*e));
	switch (c) {
	case PERFMAP_CONSUMER_PERF:
		return sim_perf(line, scratch, e);
	case PERFMAP_CONSUMER_SAMPLY:
		return sim_samply(line, e);
	case PERFMAP_CONSUMER_BLAZESYM:
		return sim_blazesym(line, e);
	case PERFMAP_CONSUMER_BCC:
		return sim_bcc(line, scratch, e);
	default:
		return SIM_NONE;
	}
}

/* blazesym: sort_by_key((addr, size)), a stable sort: ties keep file order. */
static int cmp_blazesym(const void *a, const void *b)
{
	const struct sim_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	/* ent grows with the line, so it stands in for file order. */
	return x->ent < y->ent ? -1 : x->ent > y->ent;
}

/* bcc: std::sort by start alone; the order of equal starts is unspecified. */
static int cmp_bcc(const void *a, const void *b)
{
	const struct sim_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->ent < y->ent ? -1 : x->ent > y->ent;
}

void perfmap__sim_sort(enum perfmap_consumer c, struct sim_sym *syms, size_t n)
{
	if (!n)
		return;  /* syms may be NULL, which qsort() must never see */
	qsort(syms, n, sizeof(*syms),
	      c == PERFMAP_CONSUMER_BLAZESYM ? cmp_blazesym : cmp_bcc);
}

/* Index of the first symbol starting after @addr. */
static size_t upper_bound(const struct sim_sym *syms, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * blazesym find_sym(): only the symbols sharing the greatest start <= addr
 * are looked at, smallest first; none covering means unknown, even when an
 * earlier, longer symbol covers addr.
 */
static long lookup_blazesym(const struct sim_sym *syms, size_t n, uint64_t addr)
{
	size_t i = upper_bound(syms, n, addr);
	uint64_t start;

	if (!i)
		return -ENOENT;
	start = syms[i - 1].start;
	while (i > 0 && syms[i - 1].start == start)
		i--;
	for (; i < n && syms[i].start == start; i++)
		if (addr < syms[i].end)
			return (long)i;
	return -ENOENT;
}

/*
 * bcc ProcSyms::Module::find_addr(): from the last symbol starting at or
 * before addr, step back to the first that covers it.
 */
static long lookup_bcc(const struct sim_sym *syms, size_t n, uint64_t addr,
		       size_t *ties)
{
	size_t i = upper_bound(syms, n, addr), j;

	while (i > 0) {
		if (addr < syms[--i].end) {
			/*
			 * Symbols sharing this start sit in any order after
			 * std::sort: count the covering ones just before i so
			 * the caller can compare them all.
			 */
			for (j = i; j > 0 && syms[j - 1].start == syms[i].start &&
				    addr < syms[j - 1].end; j--)
				(*ties)++;
			return (long)i;
		}
	}
	return -ENOENT;
}

long perfmap__sim_lookup(enum perfmap_consumer c, const struct sim_sym *syms, size_t n,
			 uint64_t addr, size_t *ties)
{
	*ties = 0;
	if (c == PERFMAP_CONSUMER_BLAZESYM)
		return lookup_blazesym(syms, n, addr);
	return lookup_bcc(syms, n, addr, ties);
}

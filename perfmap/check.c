/* perfmap_check(): what each consumer would make of a map, compared with what it says. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumers.h"

static const char *const consumer_names[__PERFMAP_CONSUMER_MAX] = {
	"perf", "samply", "blazesym", "bcc",
};

const char *perfmap_consumer_str(enum perfmap_consumer c)
{
	if ((unsigned int)c >= __PERFMAP_CONSUMER_MAX)
		return "unknown";
	return consumer_names[c];
}

struct sim_syms {
	struct sim_sym *v;
	size_t n, cap;
};

struct checker {
	struct perfmap_table *table;
	struct perfmap_report *rep;
	char *scratch;
	size_t max_line;
	/* Symbols each consumer holds, for the lookups that need them. */
	struct sim_syms syms[__PERFMAP_CONSUMER_MAX];
	/* Per entry, bit c: consumer c already dropped or misread it. */
	unsigned char *judged;
	size_t judged_cap;
};

static bool has_lookup_sim(enum perfmap_consumer c)
{
	return c == PERFMAP_CONSUMER_BLAZESYM || c == PERFMAP_CONSUMER_BCC;
}

static void note(struct perfmap_verdict *v, uint64_t lineno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Keep the first problem only: it is where a reader should start looking. */
static void note(struct perfmap_verdict *v, uint64_t lineno, const char *fmt, ...)
{
	va_list ap;

	if (v->reason[0])
		return;
	v->lineno = lineno;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

/* The quirks of a line, in words, for the hint after a problem. */
static const char *quirk_hint(unsigned int quirks, char *buf, size_t len)
{
	unsigned int bit;
	size_t off = 0;

	buf[0] = '\0';
	for (bit = 0; bit < PERFMAP_QUIRK_COUNT && off < len; bit++) {
		if (!(quirks & (1u << bit)))
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					off ? ", " : " (", perfmap_quirk_str(bit));
	}
	if (off && off < len)
		snprintf(buf + off, len - off, ")");
	return buf;
}

/* Up to 48 bytes of @name, C-escaped, for a message. */
static const char *escape_name(const char *name, size_t len, char *buf, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, off = 0;

	for (i = 0; i < len && i < 48 && off + 5 < cap; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch == '\r' || ch == '\t' || ch == '"' || ch == '\\') {
			buf[off++] = '\\';
			buf[off++] = ch == '\r' ? 'r' : ch == '\t' ? 't' : (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			buf[off++] = '\\';
			buf[off++] = 'x';
			buf[off++] = hex[ch >> 4];
			buf[off++] = hex[ch & 0xf];
		} else {
			buf[off++] = (char)ch;
		}
	}
	if (i < len && off + 3 < cap) {
		memcpy(buf + off, "...", 3);
		off += 3;
	}
	buf[off] = '\0';
	return buf;
}

static int syms_add(struct sim_syms *s, const struct sim_entry *e, long ent)
{
	struct sim_sym *v;
	size_t cap;

	if (s->n == s->cap) {
		cap = s->cap ? s->cap * 2 : 256;
		v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	/* A consumer's own END may wrap; a lookup never matches it then. */
	s->v[s->n++] = (struct sim_sym){ e->start, e->start + e->size, ent };
	return 0;
}

static bool same_as_written(const struct sim_entry *e, const struct perfmap_record *rec)
{
	return e->start == rec->start && e->size == rec->size &&
	       e->name_len == rec->name_len &&
	       !memcmp(e->name, rec->name, rec->name_len);
}

/* Not an entry for us, but one as written that a consumer may read as such. */
static bool harmless_reject(const struct perfmap_line *line)
{
	return line->kind == PERFMAP_LINE_REJECTED &&
	       (line->reject == PERFMAP_REJECT_BAD_UTF8 ||
		line->reject == PERFMAP_REJECT_ZERO_SIZE);
}

static const char *line_kind_str(const struct perfmap_line *line)
{
	if (line->kind == PERFMAP_LINE_INCOMPLETE)
		return "the incomplete last line";
	if (line->kind == PERFMAP_LINE_EMPTY)
		return "an empty line";
	return perfmap_reject_str(line->reject);
}

static int judge_line(struct checker *ck, enum perfmap_consumer c,
		      const struct perfmap_line *line, long ent)
{
	struct perfmap_verdict *v = &ck->rep->verdict[c];
	const struct perfmap_record *rec = &line->rec;
	struct sim_entry e;
	char hint[96], esc[200];

	switch (perfmap__sim_line(c, line, ck->scratch, &e)) {
	case SIM_FATAL:
		if (!v->file_lost)
			note(v, line->lineno, "line %lu does not parse: %s fails the whole file%s",
			     (unsigned long)line->lineno, perfmap_consumer_str(c),
			     quirk_hint(rec->quirks, hint, sizeof(hint)));
		v->file_lost = true;
		return 0;
	case SIM_NONE:
		if (ent >= 0) {
			ck->judged[ent] |= 1u << c;
			v->lost++;
			note(v, line->lineno, "line %lu: drops the entry at 0x%lx%s",
			     (unsigned long)line->lineno, (unsigned long)rec->start,
			     quirk_hint(rec->quirks, hint, sizeof(hint)));
		}
		return 0;
	case SIM_ENTRY:
		break;
	}

	if (ent < 0) {
		if (harmless_reject(line) && same_as_written(&e, rec))
			return 0;
		v->junk++;
		note(v, line->lineno, "line %lu: makes a symbol at 0x%lx of %s",
		     (unsigned long)line->lineno, (unsigned long)e.start,
		     line_kind_str(line));
	} else if (!same_as_written(&e, rec)) {
		ck->judged[ent] |= 1u << c;
		v->misread++;
		if (e.start != rec->start || e.size != rec->size)
			note(v, line->lineno, "line %lu: reads 0x%lx+0x%lx as 0x%lx+0x%lx%s",
			     (unsigned long)line->lineno, (unsigned long)rec->start,
			     (unsigned long)rec->size, (unsigned long)e.start,
			     (unsigned long)e.size,
			     quirk_hint(rec->quirks, hint, sizeof(hint)));
		else
			note(v, line->lineno, "line %lu: reads the name as \"%s\"%s",
			     (unsigned long)line->lineno,
			     escape_name(e.name, e.name_len, esc, sizeof(esc)),
			     quirk_hint(rec->quirks, hint, sizeof(hint)));
	} else if (c == PERFMAP_CONSUMER_SAMPLY && e.size > UINT32_MAX) {
		/* samply keeps symbol sizes as u32. */
		v->misread++;
		note(v, line->lineno, "line %lu: size 0x%lx does not fit samply's 32 bits",
		     (unsigned long)line->lineno, (unsigned long)e.size);
	}
	if (has_lookup_sim(c))
		return syms_add(&ck->syms[c], &e, ent);
	return 0;
}

static int check_line(struct checker *ck, const struct perfmap_line *line)
{
	enum perfmap_consumer c;
	long ent = -1;
	int err;

	/* Too long to have been kept whole: nothing to compare against. */
	if ((line->kind == PERFMAP_LINE_REJECTED &&
	     line->reject == PERFMAP_REJECT_TOO_LONG) || line->len > ck->max_line)
		return 0;
	if (line->kind == PERFMAP_LINE_ENTRY) {
		err = perfmap_table__add(ck->table, &line->rec);
		if (err)
			return err;
		ent = (long)perfmap_table__count(ck->table) - 1;
		if ((size_t)ent >= ck->judged_cap) {
			size_t cap = ck->judged_cap ? 2 * ck->judged_cap : 1024;
			unsigned char *j = realloc(ck->judged, cap);

			if (!j)
				return -ENOMEM;
			ck->judged = j;
			ck->judged_cap = cap;
		}
		ck->judged[ent] = 0;
	}
	/* samply reads the file with read_to_string(): one bad byte, no file. */
	if (!perfmap__utf8_valid(line->text, line->len) &&
	    !ck->rep->verdict[PERFMAP_CONSUMER_SAMPLY].file_lost) {
		ck->rep->verdict[PERFMAP_CONSUMER_SAMPLY].file_lost = true;
		note(&ck->rep->verdict[PERFMAP_CONSUMER_SAMPLY], line->lineno,
		     "line %lu is not valid UTF-8: samply ignores the whole file",
		     (unsigned long)line->lineno);
	}
	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++) {
		err = judge_line(ck, c, line, ent);
		if (err)
			return err;
	}
	return 0;
}

static bool same_name(struct perfmap_table *t, long a, long b)
{
	const char *na, *nb;
	uint64_t s, e;
	size_t la, lb;

	if (a == b)
		return true;
	perfmap__table_entry(t, (size_t)a, &s, &e, &na, &la);
	perfmap__table_entry(t, (size_t)b, &s, &e, &nb, &lb);
	return la == lb && !memcmp(na, nb, la);
}

/* Is every symbol the lookup may give (@got and its @ties) named as @truth? */
static bool lookup_right(struct checker *ck, const struct sim_syms *s, long got,
			 size_t ties, long truth)
{
	size_t k;

	if (got < 0)
		return false;
	for (k = 0; k <= ties; k++) {
		long ent = s->v[(size_t)got - k].ent;

		if (ent < 0 || !same_name(ck->table, ent, truth))
			return false;
	}
	return true;
}

/*
 * Probe every address where an answer can change (each start and end of
 * ours and the consumer's) and compare the consumer's lookup with the
 * later-wins answer. Counts entries resolved wrongly somewhere, leaving out
 * those the consumer already dropped or misread.
 */
static int check_lookups(struct checker *ck, enum perfmap_consumer c)
{
	struct perfmap_verdict *v = &ck->rep->verdict[c];
	struct sim_syms *s = &ck->syms[c];
	size_t n = perfmap_table__count(ck->table), i, k, ties, name_len;
	uint64_t probe[2], start, end;
	const char *name;
	long truth, got;
	char *missed;

	missed = calloc(n + 1, 1);
	if (!missed)
		return -ENOMEM;
	perfmap__sim_sort(c, s->v, s->n);
	for (i = 0; i < n + s->n; i++) {
		if (i < n) {
			perfmap__table_entry(ck->table, i, &start, &end, &name, &name_len);
		} else {
			start = s->v[i - n].start;
			end = s->v[i - n].end;
		}
		probe[0] = start;
		probe[1] = end;
		for (k = 0; k < 2; k++) {
			truth = perfmap__table_lookup_entry(ck->table, probe[k]);
			if (truth < 0 && truth != -ENOENT) {
				free(missed);
				return (int)truth;
			}
			if (truth < 0 || missed[truth] || (ck->judged[truth] & (1u << c)))
				continue;
			got = perfmap__sim_lookup(c, s->v, s->n, probe[k], &ties);
			if (lookup_right(ck, s, got, ties, truth))
				continue;
			missed[truth] = 1;
			v->missed++;
			perfmap__table_entry(ck->table, (size_t)truth, &start, &end,
					     &name, &name_len);
			note(v, 0, "0x%lx: %s instead of \"%.*s\" (overlapping entries)",
			     (unsigned long)probe[k],
			     ties ? "depends on sort order" :
			     got < 0 ? "not resolved" : "resolved to another entry",
			     (int)(name_len > 40 ? 40 : name_len), name);
		}
	}
	free(missed);
	return 0;
}

static void finish_verdicts(struct perfmap_report *rep)
{
	struct perfmap_verdict *perf = &rep->verdict[PERFMAP_CONSUMER_PERF];
	enum perfmap_consumer c;

	/*
	 * perf keeps overlapping symbols in an rbtree searched as if they were
	 * disjoint: a lookup can take the wrong branch and miss (symbols__find).
	 * The tree's shape decides, so every overlapping entry is at risk.
	 */
	if (rep->table.overlapping) {
		perf->missed = rep->table.overlapping;
		note(perf, 0, "%lu overlapping entries: perf's symbol lookup can miss covered addresses",
		     (unsigned long)rep->table.overlapping);
	}
	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++) {
		struct perfmap_verdict *v = &rep->verdict[c];

		v->ok = !v->file_lost && !v->lost && !v->misread && !v->junk && !v->missed;
	}
}

int perfmap_check(struct perfmap_reader *r, struct perfmap_report *rep)
{
	struct checker ck = { .rep = rep };
	struct perfmap_line line;
	enum perfmap_consumer c;
	int err = -ENOMEM;

	memset(rep, 0, sizeof(*rep));
	ck.table = perfmap_table__new();
	ck.max_line = r->max_line;
	ck.scratch = malloc(r->max_line + 2);
	if (!ck.table || !ck.scratch)
		goto free_checker;

	while ((err = perfmap_reader__next_line(r, &line)) > 0) {
		err = check_line(&ck, &line);
		if (err)
			goto free_checker;
	}
	if (err)
		goto free_checker;
	rep->read = *perfmap_reader__stats(r);
	err = perfmap_table__stats(ck.table, &rep->table);
	if (err)
		goto free_checker;
	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++) {
		if (!has_lookup_sim(c) || rep->verdict[c].file_lost)
			continue;
		err = check_lookups(&ck, c);
		if (err)
			goto free_checker;
	}
	finish_verdicts(rep);

free_checker:
	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++)
		free(ck.syms[c].v);
	free(ck.judged);
	free(ck.scratch);
	perfmap_table__free(ck.table);
	return err;
}

/*
 * Annotated source, as LuaJIT's -jp=a and =A: each file that has samples,
 * its lines with their share (or count, with r) in the left margin. With a,
 * only excerpts: the lines within three of one with samples, each excerpt
 * headed "@@ N @@". Keys that are no file:line (JIT code without a file,
 * native code without DWARF lines) cannot be annotated, and say so.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile_annotate.h"

#define ANNOTATE_MAX_BYTES (64 << 20)   /* a source file larger than this is not one */

struct line_val {
	char *file;
	long line;
	uint64_t v;                /* percentage, or count with r */
};

static int by_file_line(const void *a, const void *b)
{
	const struct line_val *x = a, *y = b;
	int c = strcmp(x->file, y->file);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* @fl[0..n): @file's lines with samples, sorted; its value at @line, or -1. */
static long long value_at(const struct line_val *fl, size_t n, long line)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (fl[mid].line < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && fl[lo].line == line ? (long long)fl[lo].v : -1;
}

/* @s with its control bytes (tab aside) as \\xNN: a file's text, or its name, never drives a terminal. */
static void put_escaped(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
}

/*
 * The source file @path, opened only if it is a regular file, not a link,
 * no larger than ANNOTATE_MAX_BYTES and readable by everyone: the names come
 * from the profiled processes (a JIT name, an ELF file's DWARF), and root
 * must show no file their owners could not read themselves, nor wait on a
 * FIFO or read a device without end. NULL with errno, EACCES for a file
 * that is not everyone's to read.
 */
static FILE *open_source(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), err = 0;
	struct stat st;
	FILE *f;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st))
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = EINVAL;
	else if (st.st_size > ANNOTATE_MAX_BYTES)
		err = EFBIG;
	else if (!(st.st_mode & S_IROTH))
		err = EACCES;
	if (err) {
		close(fd);
		errno = err;
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

static void annotate_file(FILE *out, const struct prof_view *v, const struct line_val *fl,
			  size_t n, int width)
{
	const int ann = v->annotate;
	long nr = 1, show = 0;
	char *text = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f;

	f = open_source(fl[0].file);
	if (!f) {
		fputs("====== ERROR: ", out);
		put_escaped(out, fl[0].file);
		fprintf(out, ": %s\n", errno == EACCES ? "not readable by everyone: not shown" :
			errno == EINVAL ? "not a regular file" : strerror(errno));
		return;
	}
	fputs("\n====== ", out);
	put_escaped(out, fl[0].file);
	fputs(" ======\n", out);
	if (ann) {
		for (long i = 1; i <= ann; i++) {
			if (value_at(fl, n, i) >= 0) {
				show = 1;
				fputs("@@ 1 @@\n", out);
				break;
			}
		}
	}
	while ((len = getline(&text, &cap, f)) >= 0) {
		long long val = value_at(fl, n, nr);

		if (len && text[len - 1] == '\n')
			text[--len] = '\0';
		if (ann) {
			long long v2 = value_at(fl, n, nr + ann);

			if (show) {
				if (v2 >= 0)
					show = nr + ann;
				else if (val >= 0)
					show = nr;
				else if (show + ann < nr)
					show = 0;
			} else if (v2 >= 0) {
				show = nr + ann;
				fprintf(out, "@@ %ld @@\n", nr);
			}
			if (!show) {
				nr++;
				continue;
			}
		}
		if (val >= 0 && v->raw)
			fprintf(out, "%*lld | ", width, val);
		else if (val >= 0)
			fprintf(out, " %3lld%% | ", val);
		else
			fprintf(out, "%*s | ", v->raw ? width : 5, "");
		put_escaped(out, text);
		fputc('\n', out);
		nr++;
	}
	free(text);
	fclose(f);
}

int prof_annotate(const struct tally *t, size_t n, uint64_t total, const struct prof_view *v,
		  FILE *out)
{
	struct line_val *lv = calloc(n ? n : 1, sizeof(*lv));
	uint64_t most = 0;
	size_t k = 0, i, j;
	int width = 5;

	if (!lv)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		int pct = prof_pct(t[i].count, total);
		const char *colon = strrchr(t[i].key, ':');
		char *end;
		long line = 0;

		if (t[i].count > most)
			most = t[i].count;
		if (pct < v->min_pct)
			continue;
		if (colon && colon[1]) {
			line = strtol(colon + 1, &end, 10);
			if (*end)
				colon = NULL;
		}
		lv[k].file = colon ? strndup(t[i].key, (size_t)(colon - t[i].key)) : strdup(t[i].key);
		lv[k].line = colon ? line : 0;
		lv[k].v = v->raw ? t[i].count : (uint64_t)pct;
		if (lv[k].file)
			k++;
	}
	/* p.lua: max(5, ceil(log10(most))) columns. */
	for (uint64_t p10 = 100000; v->raw && p10 < most; p10 *= 10)
		width++;
	qsort(lv, k, sizeof(*lv), by_file_line);
	for (i = 0; i < k; i = j) {
		for (j = i; j < k && !strcmp(lv[j].file, lv[i].file); j++)
			;
		/* JIT code without a file, native code without lines: nothing to open. */
		if (lv[i].file[0] != '/' || !lv[i].line) {
			fputs("\n====== ", out);
			put_escaped(out, lv[i].file);
			fputs(" ======\n[Cannot annotate non-file]\n", out);
		} else
			annotate_file(out, v, lv + i, j - i, width);
	}
	for (i = 0; i < k; i++)
		free(lv[i].file);
	free(lv);
	return ferror(out) ? -EIO : 0;
}

/* What -j's letters ask for (p.lua's prof_start), and a count's share as the report prints it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile_view.h"

#define DEPTH_GRAPH 100   /* G: the whole stack, as p.lua's -100 */

static const char letters_known[] = "fFlspvzraAG-";

int prof_view_parse(const char *letters, struct prof_view *v, char *err, size_t errlen)
{
	bool m[128] = { false };
	const char *p;
	char *end;
	long n;

	*v = (struct prof_view){ .depth = 1, .min_pct = 3, .annotate = -1, .interval_ms = 10 };
	for (p = letters ? letters : ""; *p;) {
		unsigned char c = (unsigned char)*p;

		if (c == 'i' || c == 'm') {
			n = strtol(p + 1, &end, 10);
			if (end == p + 1 && c == 'm')
				goto bad;
			if (c == 'i' && end != p + 1) {
				if (n < 1 || n > 60000) {
					snprintf(err, errlen, "i%ld: the interval is 1 to 60000 ms", n);
					return -EINVAL;
				}
				v->interval_ms = (unsigned)n;
			} else if (c == 'm') {
				if (n > 100) {
					snprintf(err, errlen, "m%ld: a minimum percentage is 0 to 100", n);
					return -EINVAL;
				}
				v->min_pct = (int)n;
			}
			p = end;
			continue;
		}
		if ((c == '-' && p[1] >= '0' && p[1] <= '9') || (c >= '0' && c <= '9')) {
			n = strtol(p, &end, 10);
			if (!n || n > 1000 || n < -1000) {
				snprintf(err, errlen, "%ld: a depth is 1 to 1000, or -1 to -1000", n);
				return -EINVAL;
			}
			v->depth = (int)n;
			p = end;
			continue;
		}
		if (c >= 128 || !strchr(letters_known, c) || !c)
			goto bad;
		m[c] = true;
		p++;
	}
	v->states = m['z'] ? 'z' : m['v'] ? 'v' : 0;
	v->scope = m['l'] ? 'l' : m['f'] ? 'f' : m['F'] ? 'F' : v->states ? 0 : 'f';
	v->paths = m['p'];
	v->raw = m['r'] ? 'r' : 0;
	if (m['s']) {
		v->split = 2;
		if (v->depth == -1 || m['-'])
			v->depth = -2;
		else if (v->depth == 1)
			v->depth = 2;
	} else if ((m['f'] || m['F']) && m['l'] && letters &&
		   strpbrk(letters, "fF") < strrchr(letters, 'l')) {
		/* "fl": functions first, their lines second. */
		v->split = 3;
	} else {
		const char *st = letters ? strpbrk(letters, "zv") : NULL;
		const char *sc = NULL;

		/* "vf": states first, hotspots second; "fv": the other way round. */
		for (const char *q = letters ? letters : ""; *q; q++)
			if (*q == 'l' || *q == 'f' || *q == 'F')
				sc = q;
		v->split = !v->scope || (st && sc && st < sc) ? 1 : 0;
	}
	/* The stack's letter: f first of "fl", else F wherever it is, else the scope (p.lua). */
	if (v->scope && v->split == 3 && m['f'])
		v->scope = 'f';
	else if (v->scope && m['F'])
		v->scope = 'F';
	if (m['A'] || m['a']) {
		v->annotate = m['A'] ? 0 : 3;
		v->scope = 'l';
		v->paths = true;
		v->split = 0;
		v->depth = 1;
	} else if (m['G'] && v->scope) {
		/* The scope as the letters have it: "GF" is module:name, "Gl" file:line. */
		v->scope = m['l'] ? 'l' : m['f'] ? 'f' : m['F'] ? 'F' : 'f';
		v->depth = -DEPTH_GRAPH;
		v->raw = 'G';
		v->min_pct = 0;
		v->split = 0;
	}
	return 0;
bad:
	if (*p >= 0x20 && *p < 0x7f)
		snprintf(err, errlen, "'%c' is not a letter of -j", *p);
	else
		snprintf(err, errlen, "byte 0x%02x is not a letter of -j", (unsigned char)*p);
	return -EINVAL;
}

int prof_pct(uint64_t v, uint64_t total)
{
	/* p.lua's floor(v * 100 / total + 0.5), in integers. */
	return (int)((v * 200 + total) / (2 * total));
}

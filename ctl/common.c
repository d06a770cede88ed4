/* What perfmapctl's commands share, as bpftool's common.c: the entry file calls them, they call here. */
#include <stdarg.h>
#include <stdio.h>

#include "ctl.h"

void ctl_error(const char *fmt, ...)
{
	va_list ap;

	fputs("perfmapctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void ctl_escape(char *out, size_t cap, const char *in, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < len && o + 5 < cap; i++) {
		c = (unsigned char)in[i];
		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
}

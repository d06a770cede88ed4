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

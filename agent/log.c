/* perfmapd's log lines: "perfmapd: <object>: <what happened>", one write each. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"

enum log_level log_max_level = LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_parse_level(const char *s, enum log_level *out)
{
	unsigned int i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcasecmp(s, level_names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > log_max_level)
		return;
	n = snprintf(line, sizeof(line), "perfmapd: %s",
		     level == LOG_ERROR ? "error: " : level == LOG_WARN ? "warning: " : "");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line: lines from a restart or a test harness never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

void log_printable(char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len && s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			s[i] = '?';
	if (len)
		s[len - 1] = '\0';
}

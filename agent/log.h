/* perfmapd's log: one line per action on stderr, filtered by --log-level. */
#ifndef PERFMAPD_LOG_H
#define PERFMAPD_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_max_level;

int log_parse_level(const char *s, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Make @s (up to @len bytes, NUL-terminated within them) printable ASCII in
 * place: a process's name or a file's words reach the log as nothing else.
 */
void log_printable(char *s, size_t len);

#define pr_err(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* PERFMAPD_LOG_H */

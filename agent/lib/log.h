/* perfmapd's log: one line per action on stderr, filtered by --log-level, escaped, flood-bounded. */
#ifndef PERFMAPD_LOG_H
#define PERFMAPD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_max_level;
/* Where lines go (stderr); a test points it elsewhere. */
extern int log_fd;
/* The clock of the flood bound (CLOCK_MONOTONIC, ns); a test sets its own. */
extern uint64_t (*log_clock)(void);

int log_parse_level(const char *s, enum log_level *out);
/* The level from now on, for every thread (a SIGHUP). */
void log_set_level(enum log_level level);
/*
 * One line. The formatted message is escaped whole (log_escape() without
 * LOG_ESC_REVERSIBLE): no argument, whoever controls it, can end the line or
 * make a second one. Each call site (its format) is a kind of line: past
 * LOG_BURST lines of a kind, at most LOG_PER_S a second pass, and the rest
 * are counted and summed up in one "N similar lines suppressed" line.
 * Debug lines are not bounded: they are asked for.
 */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Say what was suppressed, for kinds quiet since (at the agent's tick, and at exit with @all). */
void log_flush(bool all);

#define LOG_BURST 1000
#define LOG_PER_S 100

/* log_escape(): '\' too, as "\\", so that the original bytes can be told back. */
#define LOG_ESC_REVERSIBLE (1u << 0)

/*
 * @src (@len bytes, or up to a NUL) into @dst (@cap bytes, always
 * NUL-terminated, cut between escapes): control bytes as \n, \t, \r or \xNN,
 * DEL, C1 controls and bytes that are not valid UTF-8 as \xNN, and so are
 * invisible or reordering characters (separators, bidi controls, zero-width
 * ones); other valid UTF-8 stays as it is. The length written.
 */
size_t log_escape(char *dst, size_t cap, const char *src, size_t len, unsigned int flags);
/* A process's name (15 bytes at most) escaped reversibly fits this many bytes. */
#define LOG_COMM_LEN 64

/*
 * True the first time a warning is about the object (@dev, @ino, @name):
 * the same trap found again is not logged again. Remembers the last 4096
 * objects or so (a fixed table): one forgotten is logged once more.
 */
bool log_first_time(uint64_t dev, uint64_t ino, const char *name);

#define pr_err(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* PERFMAPD_LOG_H */

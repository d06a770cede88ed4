/* Helpers shared by the cmocka unit tests: temporary directories, files, children. */
#ifndef PERFMAP_TESTUTIL_H
#define PERFMAP_TESTUTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/types.h>
#include <cmocka.h>

/*
 * A fresh directory under $TMPDIR or /tmp; removed by tu_rmdir(), or else at
 * exit or on a fatal signal (SIGALRM, SIGTERM, SIGINT, SIGHUP, SIGQUIT,
 * SIGABRT, unless the test handles or ignores it) by the process that made it.
 */
char *tu_mkdtemp(void);
void tu_rmdir(char *dir);
/* Whole file, NUL-terminated; *len without the NUL. NULL if unreadable. */
char *tu_read(const char *path, size_t *len);
void tu_write(const char *path, const char *data, size_t len);
/* "<dir>/perf-<pid>.map" in a static buffer. */
const char *tu_map_path(const char *dir, pid_t pid);
size_t tu_count_char(const char *s, size_t len, char c);
/* Whether @line is a whole line of @text. */
bool tu_has_line(const char *text, const char *line);
/* Wait for @pid; its exit status, or 128 + signal. */
int tu_wait(pid_t pid);

#endif /* PERFMAP_TESTUTIL_H */

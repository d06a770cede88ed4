/* perfmapctl subcommands and the helpers they share. */
#ifndef PERFMAPD_CTL_H
#define PERFMAPD_CTL_H

#include <limits.h>
#include <stdint.h>

#include "perfmap_tools.h"

/* Exit statuses, as documented in `perfmapctl help`. */
enum {
	CTL_OK = 0,
	CTL_FINDING = 1,  /* check: a consumer would misread; compact: refused */
	CTL_ERROR = 2,    /* usage, or a file that cannot be read or written */
};

int cmd_check(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_jitdump(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_profile(int argc, char **argv);

/*
 * The status text of the perfmapd running for @map_dir (its socket under
 * @run_dir, named in @sock, which @sock_len >= PATH_MAX holds): 0 with a
 * malloc'd NUL-terminated *@text of *@len bytes, or -errno: -ENOENT or
 * -ECONNREFUSED when none runs, -EACCES when the caller may not ask,
 * -ETIMEDOUT when it does not answer within 10 s (stopped, stuck)
 * (agent_status.c).
 */
int ctl_status_fetch(const char *map_dir, const char *run_dir, char **text, size_t *len,
		     char *sock, size_t sock_len);
/*
 * The same, with @request (a line, "pid N\n"; NULL: none) sent first: the
 * agent's answer to it, or its whole status when the request came too late
 * or the agent takes none (docs/agent.md: the status socket).
 */
int ctl_status_ask(const char *map_dir, const char *run_dir, const char *request, char **text,
		   size_t *len, char *sock, size_t sock_len);

#define CTL_ARCHIVE_DIR_DEFAULT "/var/lib/perfmapd/archive"

/* The archive a command reads, and whose it is (agent_status.c). */
struct ctl_archive {
	char dir[PATH_MAX];
	enum { CTL_ARCHIVE_GIVEN, CTL_ARCHIVE_AGENT, CTL_ARCHIVE_DEFAULT } from;
	/*
	 * For messages, after the directory: "" (--archive-dir), " (perfmapd's,
	 * for /tmp)", " (the default: no perfmapd runs for /tmp)" ...
	 */
	char whose[PATH_MAX + 96];
};

/*
 * @given (--archive-dir) when not NULL; else the --archive-dir of the
 * perfmapd running for @map_dir (asked through its status under @run_dir);
 * else CTL_ARCHIVE_DIR_DEFAULT, with why it is in whose.
 */
void ctl_archive_find(struct ctl_archive *a, const char *given, const char *map_dir,
		      const char *run_dir);

/*
 * @len bytes of @in, from a process, a file or a server, printable in
 * @out (@cap bytes, NUL-terminated, cut to fit): bytes outside printable
 * ASCII, quotes and backslashes as \xNN (common.c).
 */
void ctl_escape(char *out, size_t cap, const char *in, size_t len);

/* "perfmapctl: " and the message on stderr, a line (common.c). */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* PERFMAPD_CTL_H */

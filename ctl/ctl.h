/* perfmapctl subcommands and the helpers they share. */
#ifndef PERFMAPD_CTL_H
#define PERFMAPD_CTL_H

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
 * -ECONNREFUSED when none runs, -EACCES when the caller may not ask.
 */
int ctl_status_fetch(const char *map_dir, const char *run_dir, char **text, size_t *len,
		     char *sock, size_t sock_len);

/* "perfmapctl: " and the message on stderr, a line (common.c). */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* PERFMAPD_CTL_H */

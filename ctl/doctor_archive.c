/*
 * perfmapctl doctor PID for a process that is gone: whether the archive
 * holds its map (the archive of the agent running for --map-dir, unless
 * --archive-dir names one), and the `perfmapctl restore` that puts it back
 * for a late perf report.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl.h"
#include "doctor.h"
#include "restore.h"

/* The options `perfmapctl restore` needs to find what the doctor found. */
static void restore_options(const struct doc_opts *o, const struct ctl_archive *ar, char *buf,
			    size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	if (strcmp(o->map_dir, "/tmp"))
		off += (size_t)snprintf(buf + off, len - off, " --map-dir %s", o->map_dir);
	if (off < len && ar->from == CTL_ARCHIVE_AGENT && strcmp(o->run_dir, PERFMAPD_RUN_DIR))
		off += (size_t)snprintf(buf + off, len - off, " --run-dir %s", o->run_dir);
	if (off < len && ar->from == CTL_ARCHIVE_GIVEN)
		snprintf(buf + off, len - off, " --archive-dir %s", ar->dir);
}

void doc_archive_say(const struct doc_opts *o, pid_t pid)
{
	char newest[sizeof(((struct archived *)0)->name)] = "", when[32] = "?", opts[3 * PATH_MAX];
	struct timespec newest_at = { 0 };
	struct ctl_archive ar;
	struct archived a;
	struct dirent *de;
	unsigned int n = 0;
	struct stat st;
	struct tm tm;
	DIR *d;

	ctl_archive_find(&ar, o->archive_dir, o->map_dir, o->run_dir);
	d = opendir(ar.dir);
	if (!d) {
		ctl_error("doctor: the archive %s%s cannot be read: %s%s", ar.dir, ar.whose,
			  strerror(errno), errno == EACCES ? " (it is root's: run as root)" : "");
		return;
	}
	/* As restore reads it: names the agent gives, regular files; '.' names are its own. */
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || archived_parse_name(de->d_name, &a) || a.pid != pid ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		n++;
		if (n > 1 && (st.st_mtim.tv_sec < newest_at.tv_sec ||
			      (st.st_mtim.tv_sec == newest_at.tv_sec &&
			       st.st_mtim.tv_nsec <= newest_at.tv_nsec)))
			continue;
		newest_at = st.st_mtim;
		memcpy(newest, a.name, sizeof(newest));
	}
	closedir(d);
	if (!n) {
		ctl_error("doctor: the archive %s%s holds no map of pid %d either", ar.dir, ar.whose,
			  (int)pid);
		return;
	}
	if (localtime_r(&newest_at.tv_sec, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	restore_options(o, &ar, opts, sizeof(opts));
	ctl_error("doctor: the archive %s%s holds %u %s of pid %d, the newest %s (archived %s): 'perfmapctl restore%s %d' puts it back at %s/perf-%d.map for a late perf report",
		  ar.dir, ar.whose, n, doc_pl(n, "map", "maps"), (int)pid, newest, when, opts,
		  (int)pid, o->map_dir, (int)pid);
}

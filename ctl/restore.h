/* perfmapctl restore's pieces: archived maps by name, and which one a request means. */
#ifndef PERFMAPD_CTL_RESTORE_H
#define PERFMAPD_CTL_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


/* One archived map, as its name and its inode tell. */
struct archived {
	char name[128];
	pid_t pid;
	bool has_ticks;          /* "perf-<pid>-<ticks>...": the process's start */
	bool execd;              /* "-exec<ms>": an image the process exec'd away from wrote it */
	uint64_t ticks;
	int64_t start_ns;        /* wall clock, from the ticks; INT64_MIN when unknown */
	int64_t mtime_ns;        /* when the agent archived it: the process lived until before */
	uid_t uid;
	gid_t gid;
	ino_t ino;
	uint64_t size;
	long inside, entries;    /* --perf-data: entries in the recorded regions, of all */
};

/*
 * "perf-<pid>-<ticks>[-exec<ms>][-c<12 hex>][-dup<n>].map", or with
 * "stale<ms>" or "exited<ms>" in place of the ticks (start unknown). 0 with
 * @a's name fields set, or -EINVAL for any other name.
 */
int archived_parse_name(const char *name, struct archived *a);

/*
 * Of @n maps of one pid, the one that was the process's at wall time @at_ns:
 * one whose life [start, archived] holds it (the one archived first: an
 * exec'd image's before the image after it); else the latest started at or
 * before it; else one of unknown start archived after it. -1 when none.
 * @rule says which.
 */
int archived_choose_at(const struct archived *a, int n, int64_t at_ns, const char **rule);
/* The newest archived of @n: the index. */
int archived_newest(const struct archived *a, int n);


/*
 * After @a's map was restored (or, @dry_run, would be): the jitdump archived
 * beside it, if there is one, back at <@map_dir>/jit-<pid>.dump, never over
 * a file that is there, its owner's, 0600, marked as restored. Says what it
 * did (nothing when there is no such dump); the exit status it deserves
 * (restore_dump.c).
 */
int restore_dump(int archive_fd, const char *archive_dir, int map_fd, const char *map_dir,
		 const struct archived *a, bool dry_run);

#endif /* PERFMAPD_CTL_RESTORE_H */

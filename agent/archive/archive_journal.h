/*
 * The journal of staged maps: for each map the agent moved aside in the map
 * directory, which file it was (name, device, inode, owner) and the archive
 * name it is for, kept where only root writes, so that after a restart the
 * agent finishes only the moves it made.
 */
#ifndef PERFMAPD_ARCHIVE_JOURNAL_H
#define PERFMAPD_ARCHIVE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every staged map's name begins so (the scan at start looks at all such names). */
#define STAGE_PREFIX ".perfmapd."

/* A fresh staged name, ".perfmapd.<32 hex digits from getrandom()>.map"; 0 or -errno. */
int archive_journal__new_name(char *buf, size_t len);
/* Is @name of that form? Nothing else is ever looked up in the journal. */
bool archive_journal__name_ok(const char *name);

struct staged_rec {
	char staged[64];   /* its name in the map directory */
	char name[96];     /* its archive name */
	dev_t dev;
	ino_t ino;
	uid_t uid;
	gid_t gid;
	/*
	 * The agent's run that made it (archive.c draws one at each start);
	 * 0 in records from before runs were recorded. At start, only
	 * earlier runs' staged maps are finished: this run's are in hand.
	 */
	uint64_t run;
};

/*
 * The journal of the agent for @map_dir, a directory inside @archive_dir
 * (made 0700 if absent): its fd, or -errno.
 */
int archive_journal__open(const char *archive_dir, const char *map_dir);
/* Record @r, atomically (a whole record or none); 0 or -errno. */
int archive_journal__add(int jfd, const struct staged_rec *r);
/* The record of @staged: 0, -ENOENT when there is none, -EINVAL when it is unreadable. */
int archive_journal__get(int jfd, const char *staged, struct staged_rec *r);
void archive_journal__remove(int jfd, const char *staged);
/* Call @fn for every record; @fn may remove the one it is given. */
int archive_journal__for_each(int jfd, void (*fn)(const struct staged_rec *r, void *ctx), void *ctx);

#endif /* PERFMAPD_ARCHIVE_JOURNAL_H */

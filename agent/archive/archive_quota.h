/*
 * The archive's quota, fair between users: over --archive-max-bytes, the
 * user whose maps take the most room loses its oldest first; past
 * ARCHIVE_FILES_PER_UID files, a user loses its own oldest. A file costs
 * what it takes on disk, max(size, blocks): a one-line map costs a block.
 * Age is the time the agent archived a map (the archived file's mtime,
 * which only the agent sets: the directory is root's alone), never a time a
 * user chose; the user is the archived file's owner, the map's uid.
 *
 * The archive's files are listed once, at the start; from then on the
 * index here follows every store and eviction, so that neither a store nor
 * a status request lists the directory (issue 9, M1).
 *
 * A jitdump archived beside its map ("jit-<rest>.dump" beside
 * "perf-<rest>.map") is one entry with it: its bytes count in the map's
 * cost, and it goes when the map goes. One whose map the index does not
 * hold (a crash between the two) is an entry of its own.
 */
#ifndef PERFMAPD_ARCHIVE_QUOTA_H
#define PERFMAPD_ARCHIVE_QUOTA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

struct archived_file {
	char *name;
	uint64_t cost;        /* bytes it takes, and its dump: max(st_size, st_blocks * 512) */
	struct timespec at;   /* when the agent archived it */
	uid_t uid;            /* whose map it was */
	char *dump;           /* the jitdump archived beside it, or NULL: deleted with it */
};

struct archive_quota;

/* An index of no files; NULL and errno when out of memory. */
struct archive_quota *archive_quota__new(void);
void archive_quota__free(struct archive_quota *q);

/* What @st costs the archive. */
uint64_t archive_quota__cost(const struct stat *st);

/*
 * Index every archived map in @dfd (regular files named perf-*), each with
 * its jitdump (jit-*.dump) if there is one: once, at the start.
 */
int archive_quota__load(struct archive_quota *q, int dfd);
/* A file stored just now (the newest of its uid's). */
int archive_quota__add(struct archive_quota *q, const char *name, uint64_t cost, struct timespec at, uid_t uid);
/*
 * The jitdump @dump, stored just now beside the archived map @map (NULL:
 * none): counted with that map when the index holds it, else an entry of
 * its own.
 */
int archive_quota__add_dump(struct archive_quota *q, const char *map, const char *dump,
			    uint64_t cost, struct timespec at, uid_t uid);

/*
 * The next file to delete to keep every uid within @max_files (0: no bound)
 * and then the whole within @max_bytes (0: no bound), or NULL: first the
 * oldest of a uid with too many files; then the oldest file of the uid
 * holding the most bytes (ties: the oldest file).
 */
const struct archived_file *archive_quota__victim(const struct archive_quota *q, uint64_t max_bytes,
					  uint64_t max_files);
/* Forget @f, which archive_quota__victim() returned. */
void archive_quota__drop(struct archive_quota *q, const struct archived_file *f);

/*
 * Delete victims from @dfd until within bounds, each map with its jitdump;
 * returns how many maps went, and in *@dumps how many jitdumps.
 */
uint64_t archive_quota__enforce(struct archive_quota *q, int dfd, const char *dir, uint64_t max_bytes,
			uint64_t max_files, uint64_t *dumps);

/* The totals, read at any time from any thread. */
void archive_quota__usage(const struct archive_quota *q, uint64_t *files, uint64_t *bytes);

#endif /* PERFMAPD_ARCHIVE_QUOTA_H */

/* Where perfmapd writes maps: a forked child's copy of its parent's map. */
#ifndef PERFMAPD_MAPFILE_H
#define PERFMAPD_MAPFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct agent;

/* "perf-<pid>.map", the name runtimes use in the map directory. */
void mapfile_name(pid_t pid, char *buf, size_t len);
/* The pid a name "perf-<pid>.map" is for; false for any other name. */
bool mapfile_pid(const char *name, pid_t *pid);
/* lstat() of the map of @pid: 0, -ENOENT or -errno. */
int mapfile_stat(const struct agent *a, pid_t pid, struct stat *st);
/* Modified before @start_real_ns (CLOCK_REALTIME)? Then its writer was an earlier process. */
bool mapfile_older_than(const struct stat *st, int64_t start_real_ns);
int64_t mapfile_mtime_ns(const struct stat *st);

struct copy_req {
	pid_t parent;
	int64_t parent_start_real_ns;
	pid_t child;
	int64_t child_start_real_ns;
	uid_t uid;                /* the child's, and the parent's at the fork */
	gid_t gid;
};

enum copy_kind {
	COPY_NO_PARENT_MAP,       /* nothing to copy */
	COPY_CREATED,             /* a new map holding the parent's entries */
	COPY_APPENDED,            /* the child's runtime had made its own; entries added */
	COPY_BY_RUNTIME,          /* the child's map already starts with the parent's entries */
};

struct copy_result {
	enum copy_kind kind;
	long entries;
	uint64_t size;            /* the child's map as left, to tell later writes */
	int64_t mtime_ns;
	const char *why;          /* words for an error */
	pid_t on_pid;             /* whose map the error is about */
	bool refused;             /* @why is the hardened open's refusal, whole */
};

/*
 * Give @rq->child the parent's entries as they stand now. -ESTALE when the
 * child's path holds an earlier process's map (move it aside, then retry);
 * -EAGAIN when the child's map ends in a partial line (retry later).
 */
int mapfile_copy(struct agent *a, const struct copy_req *rq, struct copy_result *res);

#endif /* PERFMAPD_MAPFILE_H */

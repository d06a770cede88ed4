/*
 * Reaching into another process's root for a container's map: its map
 * directory (libperfmap's perfmap__root_open_dir(), which jitdumps use too)
 * and its map, resolved inside that root without following any link it
 * planted, and refused when not a plain, single-linked, dense, bounded
 * regular file; the refusals as the mirrors count them.
 */
#ifndef PERFMAPD_NSROOT_H
#define PERFMAPD_NSROOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Why a process's map was not mirrored: counted, and said once per file. */
enum ns_refusal {
	NSR_NONE,
	NSR_SYMLINK,      /* the map is a symlink */
	NSR_NOT_REGULAR,  /* a FIFO, a directory, a device, a socket */
	NSR_HARD_LINKED,  /* a second name may be a file of somebody else's */
	NSR_TOO_LARGE,    /* over --max-map-bytes */
	NSR_SPARSE,       /* holes: gigabytes of nothing to read */
	NSR_DIR,          /* its map directory is a symlink, not a directory, or on another mount */
	NSR_FUSE,         /* on FUSE (or a mount its table does not show): a lookup could hang */
	NSR_ROOT,         /* its root cannot be reached (gone, or /proc refused) */
	NSR_OWNER,        /* owned by another uid than its process's: maybe another user's map */
	NSR__COUNT,
};

const char *ns_refusal_str(enum ns_refusal r);

/*
 * The directory @path (absolute, as the process sees it) inside @pid's root,
 * as an O_PATH fd; its identity in @st. -errno, with @why set when refused
 * rather than failed (-ESRCH/-ENOENT: the process or the directory is gone).
 */
int nsroot_open_dir(pid_t pid, const char *path, struct stat *st, enum ns_refusal *why);
/*
 * @name (one component) in @dirfd opened for reading, never following a
 * link, never opening a FIFO or a device, refused when not a plain,
 * single-linked, dense regular file of at most @max_bytes (0: any size):
 * the fd, or -errno with @why set when refused. @st is the file as opened.
 */
int nsroot_open_file(int dirfd, const char *name, uint64_t max_bytes, struct stat *st,
		     enum ns_refusal *why);
/*
 * perf-<@ns_pid>.map in @dirfd opened for reading, checked as the map of a
 * process the agent does not trust: the fd, -ENOENT when there is none, or
 * -errno with @why set. @st is the file as opened.
 */
int nsroot_open_map(int dirfd, pid_t ns_pid, uint64_t max_bytes, struct stat *st,
		    enum ns_refusal *why);
/*
 * Is mount @id on FUSE ("fuse", "fuse.<name>", "fuseblk"), by the mount
 * table @f (/proc/<pid>/mountinfo)? 1 or 0; -ENOENT when the table does not
 * show it. The file system itself is never asked: a FUSE server answers its
 * own statfs(), and need never answer.
 */
int nsroot_mountinfo_fuse(FILE *f, uint64_t id);
/* Is @st, a file being mirrored, still one to read (a hole may be made later)? */
enum ns_refusal nsroot_check(const struct stat *st, uint64_t max_bytes);
/*
 * Create perf-<@ns_pid>.map in @dirfd, never over anything, with @mode's
 * permissions, owned by the caller's file-system ids (the agent acts as the
 * process it makes it for: actas_begin()): the fd (write-only,
 * O_APPEND), or -errno (-EEXIST: there is one).
 */
int nsroot_create_map(int dirfd, pid_t ns_pid, mode_t mode);

#endif /* PERFMAPD_NSROOT_H */

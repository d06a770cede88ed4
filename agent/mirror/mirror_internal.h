/*
 * The insides of the mirrors, shared by this room's files and included by
 * nothing else: the rest of the agent includes mirror/mirror.h.
 */
#ifndef PERFMAPD_MIRROR_INTERNAL_H
#define PERFMAPD_MIRROR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lib/creds.h"
#include "lib/inherit.h"
#include "lib/log.h"
#include "mirror/mirror.h"
#include "mirror/nsdir.h"
#include "lib/pidmap.h"
#include "lib/subids.h"

/* Bounds on what processes in other namespaces can make the agent do (per tick, per uid, in all). */
#define PASS_BYTES (256u << 10)       /* read of one mirror, or one fork copy, at a time */
#define TICK_BYTES (8u << 20)         /* read of all mirrors and copies in one tick */
#define TICK_POLLS 4096               /* mirrors looked at in one tick */
#define FINAL_BYTES (4u << 20)        /* read at an exit or exec, charged as debt */
/*
 * Open mirrors (an fd on the source, one on the mirror) per uid; root's
 * (every rootful container's) only within the whole. Waiting mirrors cost
 * memory: bounded per uid and in all.
 */
#define MIRRORS_PER_UID 1024
#define MIRRORS_OPEN_MAX 16384
#define WAITING_PER_UID 8192
#define MIRRORS_MAX 65536
#define TAGS_MAX 16384
#define ENDED_MAX 16384
#define MARKS 8
/* A waiting mirror looks for its map again this often, besides inotify. */
#define RETRY_NS (5ull * 1000000000)

/* Copies in progress that hold their child's mappings (up to 1 MiB of /proc text each); the rest copy all. */
#define NS_INHERIT_HELD 16

/* A fork copy in progress: the parent's entries, a bounded part each tick. */
struct ns_copy {
	int src_fd;                  /* the parent's map (a dup) */
	int dst_fd;                  /* the child's map in its directory, or its mirror */
	uint64_t off, end;           /* of the parent's map */
	pid_t parent;
	struct inherit in;           /* the child's mappings: entries of memory it lacks are left out */
};

/* A process's map in its namespace, mirrored to the host's map directory under its host pid. */
struct mirror {
	struct pidmap_node node;     /* by host pid */
	struct pidmap_node name_node; /* in dir->by_name, by its own pid */
	struct nsdir *dir;
	pid_t pid, ns_pid;
	uint64_t start_ticks;
	uid_t uid;
	gid_t gid;
	bool uid_changed;            /* its process changed uid: root's maps are no longer its own */
	/*
	 * Its user namespace's root is the host's (a rootful container's): a
	 * map of root's in its own directory may be its, made before it dropped
	 * root. Elsewhere root's files are nobody's maps but root's.
	 */
	bool root_ok;
	/* Its map in its own directory, read. */
	struct {
		int fd;                      /* -1: waiting for its map to appear */
		dev_t dev;
		ino_t ino;
		uint64_t offset;             /* mirrored: complete lines */
		uint64_t polled_ns;          /* last found up to date */
		uint64_t retry_ns;           /* waiting: when it looks for its map again */
		/* When how much was read: which lines an exec's old image surely wrote. */
		struct { uint64_t ns, offset; } marks[MARKS];
		unsigned int nmarks;
		uint64_t behind;             /* bytes not mirrored yet */
		uint64_t head_hash, tail_hash; /* of the first and last bytes read: a rewrite changes them */
		bool stopped;                /* at the size bound, or a line too long: no more reads */
	} src;
	/* The mirror in the host's map directory, written. */
	struct {
		int fd;                      /* -1: not made yet */
		dev_t dev;
		ino_t ino;
		uint64_t bytes;
		mode_t mode;                 /* its source's permissions, or its parent's */
	} dst;
	/* The mirror an exec let go of, and how far it had read: taken back if it could not be moved. */
	struct {
		dev_t dev;
		ino_t ino;
		uint64_t offset;
	} prev;
	/* The copy made for it at a fork: an exec finding it unwritten removes it. */
	struct {
		dev_t dev;
		ino_t ino;
		uint64_t size;
		struct ns_copy *running;     /* still being made */
	} copy;
	/* Refusals, each counted once. */
	struct {
		bool over_limit;             /* over the bounds on open mirrors */
		bool dest_blocked;           /* another file at its host path */
		dev_t dev;                   /* the file last refused */
		ino_t ino;
	} refused;
	char tag[CONTAINER_SHORT_LEN + 2];
	char where[32];              /* "container <12 hex>", or "its namespace": for the log */
	char comm[LOG_COMM_LEN];
};

struct mirrors {
	struct mirror_config cfg;
	struct nsdirs dirs;
	struct pidmap by_pid;
	struct pidmap tags;          /* struct tag_rec: containers of ended mirrors, until archived */
	struct pidmap ended;         /* struct ended_rec (mirror_ended.c) */
	struct pidmap uids;          /* struct uid_count */
	struct budget *budget;
	size_t poll_bucket;          /* where the last tick's polls stopped */
	size_t open;                 /* mirrors holding their source open */
	char *buf;                   /* PASS_BYTES */
	unsigned int inherit_held;   /* copies in progress holding their child's mappings */
	struct mirror_stats stats;
};

struct uid_count {
	struct pidmap_node node;     /* keyed by uid */
	size_t open, waiting;
};

/*
 * The files of this room, lowest first; each calls only those before it
 * (mirror.c, the set, calls them all):
 *   mirror_act.c    acting in a namespace's own directory, as its process
 *   mirror_ended.c  an ended process's map there, told from the next holder's
 *   mirror_copy.c   a fork copy's parts
 *   mirror_sync.c   one mirror: its source, its destination, kept up to date
 *   mirror_fork.c   a fork's copy started, and dropped at an exec when unwritten
 */

/* Its container, or its namespace, for the log. */
static inline const char *mirror__where(const struct mirror *mi)
{
	return mi->where;
}

/* Counted per user: a user's subordinate uids count as the user. */
static inline struct uid_count *mirror__uid(struct mirrors *m, uid_t uid)
{
	return (struct uid_count *)pidmap_get(&m->uids, (pid_t)subids_owner(uid),
					      sizeof(struct uid_count));
}

/* mirror_act.c */
/*
 * Before the agent creates, appends to or removes anything in @mi's
 * directory for it: its credentials now (@c), its directory opened anew
 * through its own root (@dfd, the caller's to close: what is done is done
 * there), and whether that directory is its namespace's own. 0, or -EPERM
 * (refused, counted and said once per directory and reason; the host's
 * directories silently: never written for a namespace).
 */
int mirror__may_act(struct mirrors *m, const struct mirror *mi, struct proc_creds *c, int *dfd);
/* The calling thread as @c (actas_end() undoes it); said once when the agent cannot. */
int mirror__act_begin(const struct proc_creds *c);
/* The kernel refused what was done as @mi (-@err): counted and said as a refusal. */
void mirror__act_refused(struct mirrors *m, const struct mirror *mi, const struct proc_creds *c,
			 int err);
/* @name removed in @mi's directory, as @mi, while still @fd's file and not open for writing; true when removed. */
bool mirror__unlink_unwritten(struct mirrors *m, struct mirror *mi, const char *name, int fd,
			      const struct stat *st);

/* mirror_ended.c */
/* Pid reuse in its directory: true when the file was an ended process's and is gone (@fd unused). */
bool mirror__earlier_holders(struct mirrors *m, struct mirror *mi, int fd, const struct stat *st);
void mirror__keep_ended(struct mirrors *m, const struct mirror *mi);
void mirror__ended_fini(struct mirrors *m);

/* mirror_copy.c */
/* A fork copy's next part, at most @cap bytes: bytes written (0: none now, or done). */
size_t mirror__copy_step(struct mirrors *m, struct mirror *mi, size_t cap, uint64_t now_ns);
void mirror__copy_free(struct mirrors *m, struct mirror *mi);
/* The child's own map made in its directory, as the child, for the parent's entries: its fd or -errno (-EPERM: not there). */
int mirror__copy_in_dir(struct mirrors *m, struct mirror *child, int parent_fd, mode_t mode);

/* mirror_sync.c: one mirror */
/* A refusal of @st (NULL: of no file), counted and said once per file. */
void mirror__refuse(struct mirrors *m, struct mirror *mi, enum ns_refusal why,
		    const struct stat *st);
/* Is @st, at its name, the process's own map (its uid's, or root's in its own directory)? */
bool mirror__owner_ok(const struct mirror *mi, const struct stat *st);
/* Open its map if it is there now, checked; refusals counted and said. */
void mirror__try_source(struct mirrors *m, struct mirror *mi);
void mirror__close_source(struct mirrors *m, struct mirror *mi);
/* Another file at its name than the one open: followed from its start. */
void mirror__follow_name(struct mirrors *m, struct mirror *mi, uint64_t now_ns);
/* <map dir>/perf-<pid>.map made (or an old one an exec let go of taken back); 0 or -errno. */
int mirror__make_dest(struct mirrors *m, struct mirror *mi);
/* The mirror file removed, while its name is still that file. */
void mirror__drop_dest(struct mirrors *m, struct mirror *mi);
/* The mirror file as the policy sees a map; -ENOENT when there is none. */
int mirror__dest_info(const struct mirror *mi, struct map_info *out);
/* Up to date within @cap bytes (@final: an exit's or exec's read, charged as debt); bytes read. */
size_t mirror__sync(struct mirrors *m, struct mirror *mi, size_t cap, bool final, uint64_t now_ns);
/* The offset before which every line was read before @at_ns; see mirrors__exec(). */
uint64_t mirror__offset_before(const struct mirror *mi, uint64_t at_ns);
/* Note the first and last bytes read, which a rewrite would change. */
void mirror__remember(struct mirror *mi);

/* mirror_fork.c (mirrors__copy() is in mirror.h) */
/* Exec: the map in its directory only the fork's copy, unwritten? Removed there (true). */
bool mirror__drop_copy(struct mirrors *m, struct mirror *mi);

#endif /* PERFMAPD_MIRROR_INTERNAL_H */

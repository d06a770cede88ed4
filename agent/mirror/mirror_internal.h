/*
 * The insides of the mirrors (mirror.c), shared with what they change in a
 * container's own map directory (mirror_ns.c). Nothing else includes this.
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

struct mirror {
	struct pidmap_node node;     /* by host pid */
	struct pidmap_node name_node; /* in dir->by_name, by its own pid */
	struct nsdir *dir;
	pid_t pid, ns_pid;
	uint64_t start_ticks;
	uid_t uid;
	gid_t gid;
	int src_fd;                  /* -1: waiting for its map to appear */
	dev_t src_dev;
	ino_t src_ino;
	uint64_t offset;             /* of the source, mirrored: complete lines */
	int dst_fd;                  /* -1: not made yet */
	dev_t dst_dev;
	ino_t dst_ino;
	uint64_t dst_bytes;
	mode_t mode;                 /* the mirror's permissions: its source's, or its parent's */
	/* The mirror an exec let go of, and how far it had read: taken back if it could not be moved. */
	dev_t prev_dev;
	ino_t prev_ino;
	uint64_t prev_offset;
	uint64_t polled_ns;          /* last found up to date */
	uint64_t retry_ns;           /* waiting: when it looks for its map again */
	/* When how much of the source was read: which lines an exec's old image surely wrote. */
	struct { uint64_t ns, offset; } marks[MARKS];
	unsigned int nmarks;
	uint64_t behind;             /* bytes of the source not mirrored yet */
	uint64_t head_hash, tail_hash; /* of the first and last bytes read: a rewrite changes them */
	bool stopped;                /* at the size bound, or a line too long: no more reads */
	bool over_limit;             /* counted once as over the bounds on open mirrors */
	bool dest_blocked;           /* counted once: another file at its host path */
	bool uid_changed;            /* its process changed uid: root's maps are no longer its own */
	/*
	 * Its user namespace's root is the host's (a rootful container's): a
	 * map of root's in its own directory may be its, made before it dropped
	 * root. Elsewhere root's files are nobody's maps but root's.
	 */
	bool root_ok;
	dev_t refused_dev;           /* the file last refused: counted once */
	ino_t refused_ino;
	/* The copy made for it at a fork: an exec finding it unwritten removes it. */
	dev_t copy_dev;
	ino_t copy_ino;
	uint64_t copy_size;
	struct ns_copy *copy;        /* still being made */
	char tag[CONTAINER_SHORT_LEN + 2];
	char where[32];              /* "container <12 hex>", or "its namespace": for the log */
	char comm[LOG_COMM_LEN];
};

struct mirrors {
	struct mirror_config cfg;
	struct nsdirs dirs;
	struct pidmap by_pid;
	struct pidmap tags;          /* struct tag_rec: containers of ended mirrors, until archived */
	struct pidmap ended;         /* struct ended_rec (mirror_ns.c) */
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

/* mirror.c */
struct uid_count *mirror__uid(struct mirrors *m, uid_t uid);
const char *mirror__where(const struct mirror *mi);

/* mirror_ns.c: acting in a namespace's own directory */
/*
 * Before the agent creates, appends to or removes anything in @mi's
 * directory for it: its credentials now (@c), its directory opened anew
 * through its own root (@dfd, the caller's to close: what is done is done
 * there), and whether that directory is its namespace's own. 0, or -EPERM
 * (refused, counted and said once per directory and reason; the host's
 * directories silently: never written for a namespace).
 */
int mirror__may_act(struct mirrors *m, const struct mirror *mi, struct proc_creds *c, int *dfd);
/* The kernel refused what was done as @mi (-@err): counted and said as a refusal. */
void mirror__act_refused(struct mirrors *m, const struct mirror *mi, const struct proc_creds *c,
			 int err);

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

/* mirror_ns.c */
/* A fork copy's next part, at most @cap bytes: bytes written (0: none now, or done). */
size_t mirror__copy_step(struct mirrors *m, struct mirror *mi, size_t cap, uint64_t now_ns);
void mirror__copy_free(struct mirrors *m, struct mirror *mi);
/* Exec: the map in its directory only the fork's copy, unwritten? Removed there (true). */
bool mirror__drop_copy(struct mirrors *m, struct mirror *mi);
/* Pid reuse in its directory: true when the file was an ended process's and is gone (@fd unused). */
bool mirror__earlier_holders(struct mirrors *m, struct mirror *mi, int fd, const struct stat *st);
void mirror__keep_ended(struct mirrors *m, const struct mirror *mi);
void mirror__ended_fini(struct mirrors *m);

#endif /* PERFMAPD_MIRROR_INTERNAL_H */

/*
 * The directories where processes in other namespaces keep their maps: a
 * container's /tmp, or the map directory itself (a pid namespace that
 * shares it). One record per directory inode, however many processes and
 * mount namespaces use it; watched by inotify for new maps; remembered per
 * mount namespace for processes gone before they could be looked at.
 */
#ifndef PERFMAPD_NSDIR_H
#define PERFMAPD_NSDIR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "mirror/container.h"
#include "lib/pidmap.h"

struct nsdir {
	struct nsdir *next;
	struct pidmap_node wd_node;  /* in nsdirs.by_wd, keyed by its watch */
	int fd;                      /* O_PATH, resolved inside a root */
	int wd;                      /* its inotify watch; -1: none (the map dir is mapwatch's) */
	dev_t dev;
	ino_t ino;
	bool is_map_dir;
	/*
	 * The map directory, or the host's own --ns-map-dir (its /tmp): a name
	 * there is a host pid's, any host process's. Nothing is created or
	 * removed there for a process of another namespace, and only maps of
	 * its own uid are its.
	 */
	bool is_host;
	uid_t uid;                   /* charged to: the first process's that resolved it */
	size_t refs;
	/* The mount namespace it was last resolved for, when, and by which process's root. */
	uint64_t mnt_ns;
	uint64_t resolved_ns;
	pid_t resolver;
	char tag[CONTAINER_SHORT_LEN + 2];  /* "c" and its processes' container id, or "" */
	struct pidmap by_name;       /* the mirrors of maps in it, by the pid in their names */
};

struct nsdirs {
	struct nsdir *list;
	size_t count;
	int ifd;                     /* inotify: IN_CREATE and IN_MOVED_TO of each directory */
	dev_t map_dev;
	ino_t map_ino;
	dev_t host_dev;              /* the host's --ns-map-dir, as the agent's own root has it */
	ino_t host_ino;
	struct nsdir *map_dir;       /* the map directory's record, when one is in use */
	struct pidmap by_wd;
	struct pidmap uids;          /* directories charged to each uid */
};

/* Directories in all, and charged to one uid but root (whose are every rootful container's). */
#define NSDIRS_MAX 4096
#define NSDIRS_PER_UID 256

/* @ns_map_dir: --ns-map-dir, looked up in the agent's own root (the host's /tmp). */
int nsdirs_init(struct nsdirs *t, int map_dir_fd, const char *ns_map_dir);
void nsdirs_fini(struct nsdirs *t);
/*
 * The record of the directory open as @fd (which it takes, closing it when
 * one exists), with a reference; NULL past the bounds. @uid, @mnt_ns,
 * @resolver: the process that resolved it.
 */
struct nsdir *nsdirs_get(struct nsdirs *t, int fd, const struct stat *st, uid_t uid,
			 uint64_t mnt_ns, pid_t resolver, uint64_t now_ns);
void nsdirs_put(struct nsdirs *t, struct nsdir *d);
/* The directory last resolved for @mnt_ns, with a reference; NULL if none. */
struct nsdir *nsdirs_by_mnt_ns(struct nsdirs *t, uint64_t mnt_ns);
struct nsdir *nsdirs_by_wd(const struct nsdirs *t, int wd);

#endif /* PERFMAPD_NSDIR_H */

/*
 * A process's credentials as the host's kernel sees them: its file-system
 * ids, groups and capabilities, and its user namespace's id maps, read from
 * /proc. What the agent does in a process's own directories it does with
 * them (actas.h).
 */
#ifndef PERFMAPD_CREDS_H
#define PERFMAPD_CREDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Supplementary groups taken; a process in more is not acted for (a group left out could allow more). */
#define CREDS_GROUPS_MAX 256
/* Lines of a uid_map or gid_map the kernel accepts (UID_GID_MAP_MAX_EXTENTS). */
#define IDMAP_MAX 340

/* A user namespace's uid_map or gid_map, as read from the host's user namespace. */
struct idmap {
	struct {
		uint32_t inside, outside, count;
	} range[IDMAP_MAX];
	unsigned int n;
};

struct proc_creds {
	uid_t fsuid;                 /* as the host sees them */
	gid_t fsgid;
	gid_t groups[CREDS_GROUPS_MAX];
	unsigned int ngroups;
	bool groups_known;           /* all of them were read: else nothing is done as it */
	uint64_t cap_eff;            /* honoured only in the host's user namespace */
	bool host_userns;            /* in the host's user namespace */
	struct idmap uid_map, gid_map;
};

/*
 * Parsers of /proc text, without system calls (the fuzzers drive them);
 * @buf NUL-terminated; 0 or -EINVAL.
 */
/* "Uid:", "Gid:", "Groups:" and "CapEff:" of /proc/<pid>/status: the fs ids, groups, capabilities. */
int creds_parse_status(const char *buf, struct proc_creds *c);
/* /proc/<pid>/uid_map or gid_map: "inside outside count" lines. */
int idmap_parse(const char *buf, struct idmap *m);
/* Has the host's id @outside a mapping in @m (a name inside the namespace)? */
bool idmap_has(const struct idmap *m, uint32_t outside);

/* Does @uid_map map its namespace's root to the host's root (a rootful container's)? */
bool idmap_root_is_host_root(const struct idmap *uid_map);

/*
 * The credentials of (@pid, @start_ticks) now: 0, -ESRCH when it is gone
 * or its pid is another process's, or -errno.
 */
int creds_read(pid_t pid, uint64_t start_ticks, struct proc_creds *c);
/* /proc/<@pid>/<@name> ("uid_map", "gid_map") into @m: 0, -ESRCH when gone, -errno. */
int idmap_read(pid_t pid, const char *name, struct idmap *m);

#endif /* PERFMAPD_CREDS_H */

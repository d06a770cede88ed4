/*
 * Subordinate ids: the user a uid of its user namespaces belongs to. A user
 * listed in /etc/subuid holds a range of host uids (65,536 by default) that
 * its rootless containers run as; every bound the agent keeps per uid is
 * kept per owner instead, so that such a user's range does not multiply its
 * share into a denial of service for others (docs/security.md 14.3).
 */
#ifndef PERFMAPD_SUBIDS_H
#define PERFMAPD_SUBIDS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Ranges are merged into their owner only for an ordinary user's (uid 1000
 * and up, as login.defs' UID_MIN): root's and system users' ranges hold many
 * users' containers (LXD's, an engine's --userns=auto), kept per uid.
 */
#define SUBIDS_OWNER_MIN 1000
/* Where the agent reads them (its own root's: the host's, unless it runs in a container). */
#define SUBIDS_PATH "/etc/subuid"
/* Ranges taken from the file, and bytes of it read: more is left out (and said). */
#define SUBIDS_MAX 65536
#define SUBIDS_FILE_MAX (4u << 20)

struct subid_range {
	uid_t start, owner;
	unsigned int count;
};

struct subids {
	struct subid_range *r;       /* sorted by start; overlapping later ranges dropped */
	size_t n;
};

/*
 * The lines of an /etc/subuid in @buf (@len bytes): "USER:START:COUNT",
 * USER a name (@uid_of resolves it: 0 and the uid, or -ENOENT) or a number.
 * Lines that are not so are skipped. 0, or -ENOMEM. Without system calls
 * but @uid_of's (the fuzzer and the unit tests drive it).
 */
int subids_parse(const char *buf, size_t len, int (*uid_of)(const char *name, uid_t *uid),
		 struct subids *t);
void subids_release(struct subids *t);
/* The owner of @uid in @t: the user whose range holds it, else @uid itself. */
uid_t subids_owner_in(const struct subids *t, uid_t uid);

/*
 * The agent's table, from @path (/etc/subuid), read once at start, before
 * any thread: 0 (a missing file is an empty table) or -errno.
 */
int subids_load(const char *path);
/* subids_owner_in() of the agent's table: what every per-uid bound is keyed by. */
uid_t subids_owner(uid_t uid);
size_t subids_count(void);
void subids_unload(void);

#endif /* PERFMAPD_SUBIDS_H */

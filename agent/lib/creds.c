/* A process's credentials as the host sees them, read from /proc. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds.h"
#include "lib/procfs.h"

/* "Key:\t..." at a line's start in @buf: what follows the tab, or NULL. */
static const char *field(const char *buf, const char *key)
{
	size_t n = strlen(key);
	const char *p = buf;

	while (p && *p) {
		if (!strncmp(p, key, n))
			return p + n;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* The @nth (0-based) of the whitespace-separated numbers at @p, on its line. */
static int nth_id(const char *p, unsigned int nth, uint32_t *out)
{
	unsigned long long v;
	char *end;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || v > UINT32_MAX)
			return -EINVAL;
		if (!nth--) {
			*out = (uint32_t)v;
			return 0;
		}
		p = end;
	}
}

/*
 * The groups, all of them or none: a group can deny what others may do (a
 * directory 0707 of group "blocked"), so a group left out could allow more.
 * Past CREDS_GROUPS_MAX, or a line the read cut short, they are not known.
 */
static void parse_groups(const char *p, struct proc_creds *c)
{
	unsigned long long v;
	char *end;

	c->ngroups = 0;
	c->groups_known = false;
	if (!p)
		return;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n') {
			c->groups_known = true;
			return;
		}
		if (*p < '0' || *p > '9' || c->ngroups == CREDS_GROUPS_MAX)
			return;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || v > UINT32_MAX)
			return;
		c->groups[c->ngroups++] = (gid_t)v;
		p = end;
	}
}

int creds_parse_status(const char *buf, struct proc_creds *c)
{
	const char *uid = field(buf, "Uid:"), *gid = field(buf, "Gid:");
	const char *caps = field(buf, "CapEff:");
	uint32_t fsuid, fsgid;
	char *end;

	/* The fourth of real, effective, saved and fs: the one the kernel checks files with. */
	if (!uid || !gid || nth_id(uid, 3, &fsuid) || nth_id(gid, 3, &fsgid))
		return -EINVAL;
	c->fsuid = fsuid;
	c->fsgid = fsgid;
	parse_groups(field(buf, "Groups:"), c);
	c->cap_eff = 0;
	if (caps) {
		while (*caps == ' ' || *caps == '\t')
			caps++;
		c->cap_eff = strtoull(caps, &end, 16);
		if (end == caps)
			c->cap_eff = 0;
	}
	return 0;
}

int idmap_parse(const char *buf, struct idmap *m)
{
	const char *p = buf;
	uint32_t in, out, count;

	m->n = 0;
	while (*p) {
		if (*p == '\n') {
			p++;
			continue;
		}
		if (m->n >= IDMAP_MAX || nth_id(p, 0, &in) || nth_id(p, 1, &out) ||
		    nth_id(p, 2, &count))
			return -EINVAL;
		m->range[m->n].inside = in;
		m->range[m->n].outside = out;
		m->range[m->n].count = count;
		m->n++;
		p = strchr(p, '\n');
		if (!p)
			break;
	}
	return 0;
}

bool idmap_has(const struct idmap *m, uint32_t outside)
{
	unsigned int i;

	for (i = 0; i < m->n; i++)
		if (outside >= m->range[i].outside &&
		    outside - m->range[i].outside < m->range[i].count)
			return true;
	return false;
}

bool idmap_root_is_host_root(const struct idmap *uid_map)
{
	unsigned int i;

	for (i = 0; i < uid_map->n; i++)
		if (uid_map->range[i].inside == 0 && uid_map->range[i].count)
			return uid_map->range[i].outside == 0;
	return false;
}

int idmap_read(pid_t pid, const char *name, struct idmap *m)
{
	char buf[16384];
	int err;

	m->n = 0;
	err = procfs_read_text(pid, name, buf, sizeof(buf));
	return err ?: idmap_parse(buf, m);
}

int creds_read(pid_t pid, uint64_t start_ticks, struct proc_creds *c)
{
	char buf[16384];
	uint64_t userns;
	int err;

	memset(c, 0, sizeof(*c));
	err = procfs_read_text(pid, "status", buf, sizeof(buf));
	if (!err)
		err = creds_parse_status(buf, c);
	if (!err)
		err = idmap_read(pid, "uid_map", &c->uid_map);
	if (!err)
		err = idmap_read(pid, "gid_map", &c->gid_map);
	if (err)
		return err;
	userns = procfs_ns(pid, "user");
	c->host_userns = userns && userns == procfs_ns(0, "user");
	/* Read after the files: their pid was still this process's when they were read. */
	return procfs_is(pid, start_ticks) ? 0 : -ESRCH;
}

/*
 * libFuzzer target: the /proc/<pid>/stat and /proc/<pid>/status parsers
 * (agent/lib/procfs.c) on any bytes, and on lines as the kernel writes them
 * around any comm: spaces, parentheses, newlines and ") " inside it; and
 * the /proc/<pid>/cgroup parser (agent/mirror/container.c) on any bytes; the
 * credentials and id-map parsers (agent/lib/creds.c) and /etc/subuid's
 * (agent/lib/subids.c) on any bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "mirror/container.h"
#include "lib/creds.h"
#include "fuzz.h"
#include "lib/procfs.h"
#include "lib/subids.h"

#define COMM_MAX 15  /* TASK_COMM_LEN - 1 */

static void require_comm_bounded(const struct proc_info *pi)
{
	REQUIRE(memchr(pi->comm, '\0', sizeof(pi->comm)) != NULL);
}

/* A container id is 64 lowercase hex digits found in the text, or none; the path is bounded. */
static void cgroup(const char *buf)
{
	struct container_id c;
	size_t i, n;
	int err;

	memset(&c, 0xa5, sizeof(c));
	err = container_parse_cgroup(buf, &c);
	REQUIRE(err == 0 || err == -EINVAL);
	if (err)
		return;
	REQUIRE(memchr(c.cgroup, '\0', sizeof(c.cgroup)) != NULL);
	n = strlen(c.id);
	REQUIRE(n == 0 || n == CONTAINER_ID_LEN);
	for (i = 0; i < n; i++)
		REQUIRE((c.id[i] >= '0' && c.id[i] <= '9') || (c.id[i] >= 'a' && c.id[i] <= 'f'));
	REQUIRE(!n || strstr(buf, c.id));
}

/* Groups bounded; a map's ranges bounded, and every id it says it has within one of them. */
static void creds(const char *buf)
{
	struct proc_creds c;
	struct idmap m;
	unsigned int i;
	int err;

	memset(&c, 0xa5, sizeof(c));
	err = creds_parse_status(buf, &c);
	REQUIRE(err == 0 || err == -EINVAL);
	REQUIRE(err || (strstr(buf, "Uid:") && strstr(buf, "Gid:")));
	REQUIRE(err || c.ngroups <= CREDS_GROUPS_MAX);
	memset(&m, 0xa5, sizeof(m));
	err = idmap_parse(buf, &m);
	REQUIRE(err == 0 || err == -EINVAL);
	if (err)
		return;
	REQUIRE(m.n <= IDMAP_MAX);
	for (i = 0; i < m.n; i++)
		REQUIRE(!m.range[i].count || idmap_has(&m, m.range[i].outside));
	(void)idmap_root_is_host_root(&m);
}

/* Ranges sorted, disjoint, within 32 bits; each id of one belongs to its owner. */
static void subuids(const char *buf)
{
	struct subids t;
	size_t i;

	REQUIRE(subids_parse(buf, strlen(buf), NULL, &t) == 0);
	REQUIRE(t.n <= SUBIDS_MAX);
	for (i = 0; i < t.n; i++) {
		REQUIRE(t.r[i].count);
		REQUIRE((uint64_t)t.r[i].start + t.r[i].count - 1 <= UINT32_MAX);
		REQUIRE(!i || t.r[i].start - t.r[i - 1].start >= t.r[i - 1].count);
		REQUIRE(subids_owner_in(&t, t.r[i].start) == t.r[i].owner);
		REQUIRE(subids_owner_in(&t, t.r[i].start + t.r[i].count - 1) == t.r[i].owner);
	}
	subids_release(&t);
}

/* Any bytes: no read past the NUL, and a success means the fields were there. */
static void raw(const char *buf)
{
	const char *close = strrchr(buf, ')');
	struct proc_info pi;
	int err;

	memset(&pi, 0xa5, sizeof(pi));
	err = procfs_parse_stat(buf, &pi);
	REQUIRE(err == 0 || err == -EINVAL);
	if (!err) {
		require_comm_bounded(&pi);
		REQUIRE(strchr(buf, '(') && close && close[1] == ' ');
		REQUIRE(pi.state == close[2]);
		REQUIRE(strlen(pi.comm) <= COMM_MAX);
	}
	memset(&pi, 0xa5, sizeof(pi));
	err = procfs_parse_status(buf, &pi);
	REQUIRE(err == 0 || err == -EINVAL);
	REQUIRE(err || (strstr(buf, "\nUid:") && strstr(buf, "\nGid:")));
	REQUIRE(err || pi.ns_pid >= 0);
	cgroup(buf);
	creds(buf);
	subuids(buf);
}

/* The comm from @data, as a process may name itself: any byte but NUL, up to @max. */
static size_t comm_from(const uint8_t *data, size_t size, char *comm, size_t max)
{
	size_t n = 0;

	for (; n < size && n < max && data[n]; n++)
		comm[n] = (char)data[n];
	comm[n] = '\0';
	return n;
}

/* A stat line as the kernel writes it: the parser must find every field, whatever the comm. */
static void stat_round_trip(const uint8_t *data, size_t size)
{
	static const char states[] = "RSDZTtXIP";
	char comm[64], line[1024];
	struct proc_info pi;
	size_t n = comm_from(data, size, comm, sizeof(comm) - 1);
	uint64_t start = fuzz_num(data, size, 1, 8);
	unsigned long flags = (unsigned long)fuzz_num(data, size, 3, 4);
	int ppid = (int)(fuzz_num(data, size, 5, 3) & 0x3fffff);
	char state = states[fuzz_num(data, size, 7, 1) % (sizeof(states) - 1)];

	snprintf(line, sizeof(line),
		 "4242 (%s) %c %d 4242 4242 0 -1 %lu 103 0 0 0 1 2 0 0 20 0 1 0 %" PRIu64
		 " 5738496 397 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		 comm, state, ppid, flags, start);
	memset(&pi, 0xa5, sizeof(pi));
	REQUIRE(procfs_parse_stat(line, &pi) == 0);
	require_comm_bounded(&pi);
	REQUIRE(strlen(pi.comm) == (n < COMM_MAX ? n : COMM_MAX));
	REQUIRE(!memcmp(pi.comm, comm, strlen(pi.comm)));
	REQUIRE(pi.state == state);
	REQUIRE(pi.ppid == ppid);
	REQUIRE(pi.flags == flags);
	REQUIRE(pi.start_ticks == start);
}

/* A status file as the kernel writes it: Name escaped (fs/proc/array.c), ids as numbers. */
static void status_round_trip(const uint8_t *data, size_t size)
{
	char comm[COMM_MAX + 1], name[4 * COMM_MAX + 1], text[1024], *o = name;
	unsigned int uid = (unsigned int)fuzz_num(data, size, 2, 4);
	unsigned int gid = (unsigned int)fuzz_num(data, size, 6, 4);
	struct proc_info pi;
	size_t i, n = comm_from(data, size, comm, COMM_MAX);

	for (i = 0; i < n; i++) {
		if (comm[i] == '\n' || comm[i] == '\\' || comm[i] == '\t') {
			*o++ = '\\';
			*o++ = comm[i] == '\n' ? 'n' : comm[i] == '\t' ? 't' : '\\';
		} else {
			*o++ = comm[i];
		}
	}
	*o = '\0';
	snprintf(text, sizeof(text),
		 "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\n"
		 "Pid:\t4242\nPPid:\t1\nTracerPid:\t0\nUid:\t1\t%u\t%u\t%u\nGid:\t2\t%u\t%u\t%u\n"
		 "FDSize:\t64\n", name, uid, uid, uid, gid, gid, gid);
	memset(&pi, 0xa5, sizeof(pi));
	REQUIRE(procfs_parse_status(text, &pi) == 0);
	REQUIRE(pi.uid == uid && pi.gid == gid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);

	REQUIRE(buf);
	memcpy(buf, data, size);
	buf[size] = '\0';
	raw(buf);
	free(buf);
	stat_round_trip(data, size);
	status_round_trip(data, size);
	return 0;
}

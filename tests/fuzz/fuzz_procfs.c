/*
 * libFuzzer target: the /proc/<pid>/stat parser (perfmap/procstat.c, the one
 * the agent, the profiler and perfmapctl share), against a reference parser
 * of its own and the line written back, and the agent's view of it and
 * /proc/<pid>/status parser (agent/lib/procfs.c) on any bytes, and on lines
 * as the kernel writes them
 * around any comm: spaces, parentheses, newlines and ") " inside it; and
 * the /proc/<pid>/cgroup parser (agent/mirror/container.c) on any bytes; the
 * credentials and id-map parsers (agent/lib/creds.c) and /etc/subuid's
 * (agent/lib/subids.c) on any bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "mirror/container.h"
#include "lib/creds.h"
#include "fuzz.h"
#include "perfmap_tools.h"
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

/*
 * A second parser of a stat line, written apart from libperfmap's to check
 * it: the comm between the first '(' and the last ')', the fields found by
 * splitting the rest at each space (strsep()), a number read where its
 * field begins. 0, or -EINVAL without field 24.
 */
static int ref_stat(const char *buf, struct perfmap_proc_stat *out)
{
	const char *open = NULL, *close = NULL, *field[25] = { 0 };
	char *tail, *rest, *tok;
	size_t i, n, len;

	for (i = 0; buf[i]; i++) {
		if (buf[i] == '(' && !open)
			open = buf + i;
		if (buf[i] == ')')
			close = buf + i;
	}
	if (!open || !close || close < open || close[1] != ' ' || close[2] == '\0')
		return -EINVAL;
	tail = strdup(close + 2);
	REQUIRE(tail);
	rest = tail;
	for (n = 3; n <= 24 && (tok = strsep(&rest, " ")); n++)
		field[n] = close + 2 + (tok - tail);
	free(tail);
	if (!field[24])
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	len = (size_t)(close - open - 1);
	memcpy(out->comm, open + 1, len < sizeof(out->comm) ? len : sizeof(out->comm) - 1);
	out->state = *field[3];
	out->ppid = (pid_t)strtol(field[4], NULL, 10);
	out->flags = strtoul(field[9], NULL, 10);
	out->utime_ticks = strtoull(field[14], NULL, 10);
	out->stime_ticks = strtoull(field[15], NULL, 10);
	out->start_ticks = strtoull(field[22], NULL, 10);
	out->vsize_bytes = strtoull(field[23], NULL, 10);
	out->rss_pages = strtoull(field[24], NULL, 10);
	return 0;
}

/* Field by field: the structs' padding is no field, and need not be equal. */
static bool same_stat(const struct perfmap_proc_stat *a, const struct perfmap_proc_stat *b)
{
	return !memcmp(a->comm, b->comm, sizeof(a->comm)) && a->state == b->state &&
	       a->ppid == b->ppid && a->flags == b->flags && a->utime_ticks == b->utime_ticks &&
	       a->stime_ticks == b->stime_ticks && a->start_ticks == b->start_ticks &&
	       a->vsize_bytes == b->vsize_bytes && a->rss_pages == b->rss_pages;
}

/*
 * libperfmap's parser on any bytes: a failure writes nothing; a success
 * found what the reference parser finds, a comm of at most 15 bytes with
 * no NUL before its end, and the same again from the line written back as
 * the kernel would write it.
 */
static void raw_stat(const char *buf)
{
	struct perfmap_proc_stat st, before, ref, again;
	char line[512];
	size_t comm_len;
	int err;

	memset(&before, 0x5a, sizeof(before));
	memset(&st, 0x5a, sizeof(st));
	err = perfmap__proc_stat_parse(buf, &st);
	REQUIRE(err == 0 || err == -EINVAL);
	REQUIRE(ref_stat(buf, &ref) == err);
	if (err) {
		REQUIRE(!memcmp(&st, &before, sizeof(st)));
		return;
	}
	REQUIRE(memchr(st.comm, '\0', sizeof(st.comm)));
	comm_len = (size_t)(strrchr(buf, ')') - strchr(buf, '(') - 1);
	REQUIRE(strlen(st.comm) == (comm_len < COMM_MAX ? comm_len : COMM_MAX));
	REQUIRE(same_stat(&st, &ref));
	/* A state that is a space would move every field after it: no line the kernel writes. */
	if (st.state == ' ')
		return;
	snprintf(line, sizeof(line),
		 "4242 (%s) %c %d 4242 4242 0 -1 %lu 103 0 0 0 %" PRIu64 " %" PRIu64
		 " 0 0 20 0 1 0 %" PRIu64 " %" PRIu64 " %" PRIu64 " 18446744073709551615\n",
		 st.comm, st.state, (int)st.ppid, st.flags, st.utime_ticks, st.stime_ticks,
		 st.start_ticks, st.vsize_bytes, st.rss_pages);
	REQUIRE(perfmap__proc_stat_parse(line, &again) == 0);
	REQUIRE(same_stat(&st, &again));
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
	raw_stat(buf);
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
	struct perfmap_proc_stat st;
	struct proc_info pi;
	size_t n = comm_from(data, size, comm, sizeof(comm) - 1);
	uint64_t start = fuzz_num(data, size, 1, 8);
	unsigned long flags = (unsigned long)fuzz_num(data, size, 3, 4);
	int ppid = (int)(fuzz_num(data, size, 5, 3) & 0x3fffff);
	char state = states[fuzz_num(data, size, 7, 1) % (sizeof(states) - 1)];
	uint64_t utime = fuzz_num(data, size, 9, 5), stime = fuzz_num(data, size, 13, 5);
	uint64_t vsize = fuzz_num(data, size, 17, 8), rss = fuzz_num(data, size, 25, 6);

	snprintf(line, sizeof(line),
		 "4242 (%s) %c %d 4242 4242 0 -1 %lu 103 0 0 0 %" PRIu64 " %" PRIu64
		 " 0 0 20 0 1 0 %" PRIu64 " %" PRIu64 " %" PRIu64
		 " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		 comm, state, ppid, flags, utime, stime, start, vsize, rss);
	memset(&st, 0xa5, sizeof(st));
	REQUIRE(perfmap__proc_stat_parse(line, &st) == 0);
	REQUIRE(st.utime_ticks == utime && st.stime_ticks == stime);
	REQUIRE(st.vsize_bytes == vsize && st.rss_pages == rss);
	/* The agent's view of the same line. */
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

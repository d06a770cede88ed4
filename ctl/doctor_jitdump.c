/*
 * perfmapctl doctor: the process's jitdump. A producer maps its dump
 * (jit-<N>.dump) executable, perf's marker, which /proc/<pid>/maps shows;
 * the dump is opened inside the process's root without following anything
 * planted there (openat2 RESOLVE_IN_ROOT, no symlinks, no magic links) and
 * with the refusals the agent makes (a link, a FIFO or other non-regular
 * file, several hard links, another user's file, not the file mapped), then
 * read once to its present end as untrusted input by the bounded reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "doctor.h"

void doc_jitdump_read(const struct doc_proc *p, const struct perfmap_vmas *vs, struct doc_jitdump *j)
{
	enum perfmap_root_refusal why;
	struct perfmap_jitdump *rd;
	char shown[PATH_MAX];
	long n;
	int fd;

	memset(j, 0, sizeof(*j));
	if (!vs->marker[0])
		return;
	j->found = true;
	j->named_pid = perfmap__jitdump_name_pid(vs->marker, strlen(vs->marker));
	/* The path a command on the host can use: through the root of a process in another mount namespace. */
	if (p->other_mnt_ns)
		snprintf(shown, sizeof(shown), "/proc/%d/root%s", (int)p->pid, vs->marker);
	else
		snprintf(shown, sizeof(shown), "%s", vs->marker);
	ctl_escape(j->path, sizeof(j->path), shown, strlen(shown));

	/* As the agent opens it: inside its root, no link, no FIFO, its uid's, the inode mapped. */
	fd = perfmap__jitdump_open(p->pid, vs->marker, p->fsuid, vs->marker_ino, &j->st, &why);
	if (fd < 0) {
		j->refused = fd;
		return;
	}
	rd = perfmap__jitdump_new();
	if (!rd) {
		j->read_err = -errno;
		goto close_fd;
	}
	/* A header naming another pid than the file's name is malformed, as the agent has it. */
	if (j->named_pid)
		perfmap__jitdump_expect_pid(rd, (uint32_t)j->named_pid);
	/* One pass to the size it has now: what is appended meanwhile is not waited for. */
	n = perfmap__jitdump_read(rd, fd, 0);
	j->stats = *perfmap__jitdump_stats(rd);
	if (n < 0 && n != -EBADMSG)
		j->read_err = (int)n;
	else
		j->read = true;
	perfmap__jitdump_free(rd);
close_fd:
	close(fd);
}

const char *doc_jitdump_refused_str(int err)
{
	if (err == -ESTALE)
		return "is not the file the process mapped (replaced since), refused";
	if (err == -ENOENT)
		return "is no longer there (removed since it was mapped)";
	return perfmap_open_strerror(err);
}

enum doc_jd_map doc_jitdump_map(const struct doc_agent *a)
{
	if (!a->running)
		return DOC_JD_NO_AGENT;
	if (!a->has_jitdump)
		return DOC_JD_NOT_LISTED;
	if (!strcmp(a->jd_map, "written"))
		return DOC_JD_WRITTEN;
	if (!strcmp(a->jd_map, "own_map"))
		return DOC_JD_OWN_MAP;
	/* Read, no function of the process named yet: written once there is one, unless reading stopped. */
	if ((!strcmp(a->jd_map, "new") || !strcmp(a->jd_map, "none")) && !a->jd_stopped)
		return DOC_JD_PENDING;
	return DOC_JD_NOT_WRITTEN;
}

const char *doc_jd_map_str(enum doc_jd_map m)
{
	static const char *const s[] = {
		[DOC_JD_NO_AGENT] = "no_agent", [DOC_JD_WRITTEN] = "written",
		[DOC_JD_OWN_MAP] = "own_map", [DOC_JD_PENDING] = "pending",
		[DOC_JD_NOT_WRITTEN] = "not_written", [DOC_JD_NOT_LISTED] = "not_listed",
	};

	return (unsigned int)m < sizeof(s) / sizeof(s[0]) ? s[m] : "?";
}

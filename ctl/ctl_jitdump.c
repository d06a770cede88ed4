/* perfmapctl jitdump: a jitdump (jit-<pid>.dump) converted offline into a canonical perf map. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "ctl.h"
#include "perfmap.h"

static void summary(const char *path, const struct perfmap_jitdump_stats *s, uint32_t pid,
		    long lines)
{
	fprintf(stderr,
		"perfmapctl: jitdump %s: pid %u: %ld functions written, %lu live in the dump; "
		"%lu loads, %lu moves (%lu unmatched), %lu debug-info records (%lu entries), "
		"%lu closes, %lu skipped, %lu torn tail bytes\n",
		path, pid, lines, (unsigned long)s->funcs, (unsigned long)s->loads,
		(unsigned long)s->moves, (unsigned long)s->moves_unmatched,
		(unsigned long)s->debug_info, (unsigned long)s->debug_entries,
		(unsigned long)s->closes, (unsigned long)(s->skipped + s->debug_unread),
		(unsigned long)s->torn_bytes);
}

/* A new file only: never over an existing one, never through a link at @out. */
static int open_out(const char *out)
{
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		ctl_error("jitdump: -o %s: %s%s", out, strerror(errno),
			  errno == EEXIST ? " (never written over)" : "");
	return fd;
}

static int convert(const char *path, const char *out, uint32_t pid)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	const struct perfmap_jitdump_stats *s;
	struct perfmap_jitdump *j;
	int fd, ofd = STDOUT_FILENO, ret = CTL_ERROR;
	long n, lines;

	fd = perfmap_open_map(path, &oopts);
	if (fd < 0) {
		ctl_error("jitdump %s: %s", path, perfmap_open_strerror(fd));
		return CTL_ERROR;
	}
	j = perfmap__jitdump_new();
	if (!j) {
		ctl_error("jitdump %s: %s", path, strerror(errno));
		goto close_fd;
	}
	/* One pass, a record at a time: memory grows with the live functions alone. */
	n = perfmap__jitdump_read(j, fd, 0);
	s = perfmap__jitdump_stats(j);
	if (n < 0 && n != -EBADMSG) {
		ctl_error("jitdump %s: %s", path, strerror((int)-n));
		goto free_dump;
	}
	if (!s->header) {
		if (n == -EBADMSG)
			ctl_error("jitdump %s: bad header: %s; nothing written", path,
				  perfmap__jitdump_stop_str(s->stop));
		else
			ctl_error("jitdump %s: %lu bytes, shorter than a jitdump header; "
				  "nothing written", path, (unsigned long)s->torn_bytes);
		ret = CTL_FINDING;
		goto free_dump;
	}
	if (!pid)
		pid = s->pid;
	if (out) {
		ofd = open_out(out);
		if (ofd < 0)
			goto free_dump;
	}
	/* What was read before a malformed record is written: those records were whole. */
	lines = perfmap__jitdump_write_map(j, ofd, pid);
	if (lines < 0) {
		ctl_error("jitdump %s: writing %s: %s", path, out ? out : "standard output",
			  strerror((int)-lines));
		goto close_out;
	}
	summary(path, s, pid, lines);
	ret = CTL_OK;
	if (n == -EBADMSG) {
		ctl_error("jitdump %s: malformed record at offset %lu: %s; "
			  "stopped there, the functions read before it written",
			  path, (unsigned long)s->stop_offset, perfmap__jitdump_stop_str(s->stop));
		ret = CTL_FINDING;
	}
close_out:
	if (out && close(ofd) && ret == CTL_OK) {
		ctl_error("jitdump: -o %s: %s", out, strerror(errno));
		ret = CTL_ERROR;
	}
free_dump:
	perfmap__jitdump_free(j);
close_fd:
	close(fd);
	return ret;
}

int cmd_jitdump(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL;
	unsigned long pid = 0;
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, "o:p:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 'p':
			errno = 0;
			pid = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || !pid || pid > UINT32_MAX ||
			    optarg[0] == '-') {
				ctl_error("jitdump: --pid %s: not a pid", optarg);
				return CTL_ERROR;
			}
			break;
		case 'h':
			printf("Usage: perfmapctl jitdump FILE [-o MAP] [--pid PID]\n");
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (argc - optind != 1) {
		ctl_error("jitdump: give exactly one FILE");
		return CTL_ERROR;
	}
	if (out && !strcmp(out, "-"))
		out = NULL;
	return convert(argv[optind], out, (uint32_t)pid);
}

/* perfmapctl compact: rewrite a map in canonical form, beside it or in place. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "ctl.h"
#include "perfmap.h"

static uint64_t rejected_lines(const struct perfmap_reader_stats *s)
{
	uint64_t n = s->empty + (s->incomplete_bytes ? 1 : 0);
	unsigned int i;

	for (i = 1; i < __PERFMAP_REJECT_MAX; i++)
		n += s->rejected[i];
	return n;
}

static void report(const char *path, const char *out, const struct perfmap_compact_job *job)
{
	fprintf(stderr,
		"perfmapctl: compact %s -> %s: %lu entries -> %lu lines "
		"(%lu duplicates, %lu overlapping, %lu names under 3 bytes, "
		"%lu other lines dropped)\n",
		path, out, (unsigned long)job->table.entries,
		(unsigned long)job->table.lines_out,
		(unsigned long)job->table.duplicates,
		(unsigned long)job->table.overlapping,
		(unsigned long)job->table.short_names,
		(unsigned long)rejected_lines(&job->read));
}

static void explain_refusal(const char *path, int err, const struct perfmap_replace_result *res)
{
	char who[64];
	size_t i;

	if (err == -EBUSY && res->writers.count) {
		fprintf(stderr, "perfmapctl: compact %s: open for writing by", path);
		for (i = 0; i < res->writers.count && i < 8; i++) {
			perfmap__writer_describe(res->writers.pid[i], who, sizeof(who));
			fprintf(stderr, "%s %s", i ? "," : "", who);
		}
		fprintf(stderr, "; it would keep appending to the old file. "
			"Refused: nothing changed (use -o OUT for a compacted copy)\n");
	} else if (err == -EBUSY) {
		ctl_error("compact %s: %s; refused, nothing changed", path, res->why);
	} else {
		ctl_error("compact %s: %s%s%s", path, res->why ? res->why : strerror(-err),
			  res->why ? ": " : "", res->why ? strerror(-err) : "");
	}
	if (res->kept[0])
		ctl_error("compact %s: the original map is now at %s", path, res->kept);
}

static bool same_inode(int fd, const char *path)
{
	struct stat a, b;

	return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int compact(const char *path, const char *out, uint64_t max_bytes)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	struct perfmap_compact_job job = { .max_bytes = max_bytes };
	struct perfmap_replace_result res = { 0 };
	int fd, err;

	fd = perfmap_open_map(path, &oopts);
	if (fd < 0) {
		ctl_error("compact %s: %s", path, perfmap_open_strerror(fd));
		return CTL_ERROR;
	}
	if (out && !strcmp(out, "-"))
		err = perfmap__compact_fill(fd, STDOUT_FILENO, &job);
	else if (out && !same_inode(fd, out))
		err = perfmap__write_atomic(out, fd, perfmap__compact_fill, &job, &res);
	else
		err = perfmap__replace(path, fd, perfmap__compact_fill, &job, &res);
	close(fd);

	if (err == -EFBIG) {
		ctl_error("compact %s: larger than --max-bytes (%lu bytes read); nothing written",
			  path, (unsigned long)job.read.bytes);
		return CTL_ERROR;
	}
	if (err) {
		explain_refusal(path, err, &res);
		return err == -EBUSY ? CTL_FINDING : CTL_ERROR;
	}
	report(path, out ? out : path, &job);
	return CTL_OK;
}

int cmd_compact(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "max-bytes", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL;
	uint64_t max_bytes = 0;
	int opt;

	while ((opt = getopt_long(argc, argv, "o:m:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 'm':
			if (perfmap__parse_bytes(optarg, &max_bytes)) {
				ctl_error("compact: --max-bytes %s: not a size", optarg);
				return CTL_ERROR;
			}
			break;
		case 'h':
			printf("Usage: perfmapctl compact [--max-bytes N] FILE [-o OUT]\n");
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (argc - optind != 1) {
		ctl_error("compact: give exactly one FILE");
		return CTL_ERROR;
	}
	return compact(argv[optind], out, max_bytes);
}

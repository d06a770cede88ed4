/* perfmapctl check: how a map reads, line by line and consumer by consumer. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "perfmap.h"

static void print_counts(const struct perfmap_report *rep)
{
	const struct perfmap_reader_stats *r = &rep->read;
	const char *sep = "";
	unsigned int i;

	for (i = 1; i < __PERFMAP_REJECT_MAX; i++) {
		if (!r->rejected[i])
			continue;
		printf("%s%lu %s", *sep ? sep : "  rejected lines: ",
		       (unsigned long)r->rejected[i], perfmap_reject_str(i));
		sep = ", ";
	}
	if (*sep)
		printf("\n");
	sep = "";
	for (i = 0; i < PERFMAP_QUIRK_COUNT; i++) {
		if (!r->quirks[i])
			continue;
		printf("%s%lu %s", *sep ? sep : "  not canonical: ",
		       (unsigned long)r->quirks[i], perfmap_quirk_str(i));
		sep = ", ";
	}
	if (r->empty) {
		printf("%s%lu empty", *sep ? sep : "  not canonical: ",
		       (unsigned long)r->empty);
		sep = ", ";
	}
	if (*sep)
		printf("\n");
	if (r->incomplete_bytes)
		printf("  incomplete last line: %lu bytes without a newline (a write in progress?)\n",
		       (unsigned long)r->incomplete_bytes);
	if (r->truncated)
		printf("  read only the first %lu bytes (--max-bytes)\n",
		       (unsigned long)r->bytes);
	printf("  duplicates: %lu, overlapping: %lu (%lu nested, %lu cut and %lu hidden by later lines)\n",
	       (unsigned long)rep->table.duplicates, (unsigned long)rep->table.overlapping,
	       (unsigned long)rep->table.nested, (unsigned long)rep->table.trimmed,
	       (unsigned long)rep->table.hidden);
}

static void print_verdict(enum perfmap_consumer c, const struct perfmap_verdict *v)
{
	char counts[160];
	size_t off = 0;

	if (v->ok) {
		printf("  %-9s ok\n", perfmap_consumer_str(c));
		return;
	}
	counts[0] = '\0';
#define COUNT(field, what)                                                     \
	if (v->field && off < sizeof(counts))                                  \
		off += (size_t)snprintf(counts + off, sizeof(counts) - off,    \
					"%s%lu " what, off ? ", " : "",        \
					(unsigned long)v->field)
	COUNT(lost, "dropped");
	COUNT(misread, "misread");
	COUNT(junk, "junk symbols");
	COUNT(missed, "unresolved by lookup");
#undef COUNT
	printf("  %-9s %s  %s%s%s\n", perfmap_consumer_str(c),
	       v->file_lost ? "FAILS   " : "MISREADS", v->file_lost ? "" : counts,
	       v->file_lost || !off ? "" : "; ", v->reason);
}

/* 0: every consumer reads it as written; 1: one does not; 2: cannot read it. */
static int check_one(const char *path, uint64_t max_bytes)
{
	PERFMAP_OPTS(perfmap_reader_opts, ropts, .max_bytes = max_bytes);
	struct perfmap_report rep;
	struct perfmap_reader *r;
	enum perfmap_consumer c;
	int fd, err, status = CTL_OK;
	bool is_stdin = !strcmp(path, "-");

	fd = is_stdin ? STDIN_FILENO : perfmap_open_map(path, NULL);
	if (fd < 0) {
		ctl_error("check %s: %s", path, perfmap_open_strerror(fd));
		return CTL_ERROR;
	}
	r = perfmap_reader__from_fd(fd, &ropts);
	if (!r) {
		err = -errno;
		goto close_fd;
	}
	err = perfmap_check(r, &rep);
	perfmap_reader__free(r);
	if (err)
		goto close_fd;

	printf("%s: %lu entries in %lu lines, %lu bytes\n", path,
	       (unsigned long)rep.read.entries, (unsigned long)rep.read.lines,
	       (unsigned long)rep.read.bytes);
	print_counts(&rep);
	for (c = 0; c < __PERFMAP_CONSUMER_MAX; c++) {
		print_verdict(c, &rep.verdict[c]);
		if (!rep.verdict[c].ok)
			status = CTL_FINDING;
	}

close_fd:
	if (!is_stdin)
		close(fd);
	if (err) {
		ctl_error("check %s: %s", path, strerror(-err));
		return CTL_ERROR;
	}
	return status;
}

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "max-bytes", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t max_bytes = 0;
	int opt, i, status = CTL_OK, one;

	while ((opt = getopt_long(argc, argv, "m:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (perfmap__parse_bytes(optarg, &max_bytes)) {
				ctl_error("check: --max-bytes %s: not a size", optarg);
				return CTL_ERROR;
			}
			break;
		case 'h':
			printf("Usage: perfmapctl check [--max-bytes N] FILE...\n");
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (optind >= argc) {
		ctl_error("check: no FILE given");
		return CTL_ERROR;
	}
	for (i = optind; i < argc; i++) {
		one = check_one(argv[i], max_bytes);
		if (one > status)
			status = one;
	}
	return status;
}

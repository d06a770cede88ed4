/*
 * perfmapctl doctor: what the running agent knows of the process, from the
 * status text `perfmapctl status` shows, and from its answer to "pid N" (the
 * mmaps it kept of the process). The fields read here are optional: an agent
 * that does not send them (or none at all) leaves them unsaid.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "doctor.h"

/*
 * The value after the last " @key=" in @v: the agent's own fields come after
 * the process's comm, which the process chose and may spell like them.
 */
static const char *field(const char *v, const char *key)
{
	char pat[32];
	const char *s, *last = NULL;

	snprintf(pat, sizeof(pat), " %s=", key);
	for (s = v; (s = strstr(s, pat)); s++)
		last = s;
	if (!last && !strncmp(v, pat + 1, strlen(pat + 1)))
		return v + strlen(pat + 1);
	return last ? last + strlen(pat) : NULL;
}

/* "[comm=C ]regions=N bytes=B [memfd_bytes=M ]lost=yes|no" */
static void parse_jit(const char *v, struct doc_agent *a)
{
	const char *s;

	a->has_jit = true;
	if ((s = field(v, "regions")))
		a->jit_regions = strtoull(s, NULL, 10);
	if ((s = field(v, "bytes")))
		a->jit_bytes = strtoull(s, NULL, 10);
	if ((s = field(v, "memfd_bytes")))
		a->jit_memfd_bytes = strtoull(s, NULL, 10);
	if ((s = field(v, "lost")))
		a->jit_lost = !strncmp(s, "yes", 3);
}

/* "path=P records=R functions=F ... maps_written=N map=M stopped=yes|no": P is the process's to choose. */
static void parse_jitdump(const char *v, struct doc_agent *a)
{
	const char *s;

	a->has_jitdump = true;
	if ((s = field(v, "records")))
		a->jd_records = strtoull(s, NULL, 10);
	if ((s = field(v, "functions")))
		a->jd_functions = strtoull(s, NULL, 10);
	if ((s = field(v, "maps_written")))
		a->jd_maps_written = strtoull(s, NULL, 10);
	if ((s = field(v, "map")))
		ctl_escape(a->jd_map, sizeof(a->jd_map), s, strcspn(s, " "));
	if ((s = field(v, "stopped")))
		a->jd_stopped = !strncmp(s, "yes", 3);
}

/* "addr=0x7f12a000 len=4096": one of the mmaps the agent kept, in its order; past the bound, left. */
static void parse_region(const char *v, struct doc_agent *a)
{
	struct doc_region *r;
	const char *s, *l;

	if (a->nregions == DOC_AGENT_REGIONS || !(s = field(v, "addr")) || !(l = field(v, "len")))
		return;
	r = &a->regions[a->nregions];
	*r = (struct doc_region){ .addr = strtoull(s, NULL, 16), .len = strtoull(l, NULL, 10) };
	if (r->len && r->addr + r->len > r->addr)
		a->nregions++;
}

static void parse_line(char *line, pid_t pid, struct doc_agent *a)
{
	char jit[32], jitdump[32], mirror[32], *v = strstr(line, ": ");

	if (!v)
		return;
	*v = '\0';
	v += 2;
	snprintf(jit, sizeof(jit), "jit_%d", (int)pid);
	snprintf(jitdump, sizeof(jitdump), "jitdump_%d", (int)pid);
	snprintf(mirror, sizeof(mirror), "mirror_%d", (int)pid);
	if (!strcmp(line, "exec_mappings_source"))
		ctl_escape(a->exec_mappings_source, sizeof(a->exec_mappings_source), v, strlen(v));
	else if (!strcmp(line, "lost_symbol_processes"))
		a->lost_symbol_processes = strtoll(v, NULL, 10);
	else if (!strcmp(line, jit))
		parse_jit(v, a);
	else if (!strcmp(line, jitdump))
		parse_jitdump(v, a);
	else if (!strcmp(line, mirror)) {
		a->has_mirror = true;
		ctl_escape(a->mirror, sizeof(a->mirror), v, strlen(v));
	}
}

/* What the answer to "pid N" holds besides the process's jit_ line. */
static void parse_answer_line(char *line, pid_t pid, struct doc_agent *a)
{
	char regions[32], region[32], *v = strstr(line, ": ");
	const char *s;
	size_t klen;

	if (!v)
		return;
	klen = (size_t)(v - line);
	snprintf(regions, sizeof(regions), "jit_regions_%d", (int)pid);
	snprintf(region, sizeof(region), "jit_region_%d", (int)pid);
	if (klen == strlen(regions) && !memcmp(line, regions, klen)) {
		if ((s = field(v + 2, "kept")))
			a->regions_kept = strtoull(s, NULL, 10);
		if ((s = field(v + 2, "not_kept")))
			a->regions_not_kept = strtoull(s, NULL, 10);
	} else if (klen == strlen(region) && !memcmp(line, region, klen)) {
		parse_region(v + 2, a);
	} else {
		parse_line(line, pid, a);
	}
}

/*
 * The process's lines (the regions the agent kept): asked with "pid N". An
 * agent that takes no request answers its whole status, whose first line
 * is not "request: pid N": nothing more is said then.
 */
static void ask_pid(const struct doc_opts *o, pid_t pid, struct doc_agent *a)
{
	char sock[PATH_MAX], req[32], want[48], *text, *line, *save = NULL;
	size_t len;

	snprintf(req, sizeof(req), "pid %d\n", (int)pid);
	snprintf(want, sizeof(want), "request: %s", req);
	if (ctl_status_ask(o->map_dir, o->run_dir, req, &text, &len, sock, sizeof(sock)))
		return;
	if (!strncmp(text, want, strlen(want))) {
		a->has_regions = true;
		for (line = strtok_r(text + strlen(want), "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			parse_answer_line(line, pid, a);
	}
	free(text);
}

void doc_agent_ask(const struct doc_opts *o, pid_t pid, struct doc_agent *a)
{
	char sock[PATH_MAX] = "", *text, *line, *save = NULL;
	size_t len;
	int err;

	memset(a, 0, sizeof(*a));
	a->lost_symbol_processes = -1;
	err = ctl_status_fetch(o->map_dir, o->run_dir, &text, &len, sock, sizeof(sock));
	if (err) {
		snprintf(a->error, sizeof(a->error), "%s",
			 err == -ENOENT || err == -ECONNREFUSED ? "not running" :
			 err == -EACCES || err == -EPERM ? "its status may not be read by this user" :
			 strerror(-err));
		return;
	}
	a->running = true;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		parse_line(line, pid, a);
	free(text);
	ask_pid(o, pid, a);
}

/*
 * perfmapctl doctor: what the running agent knows of the process, from the
 * status text `perfmapctl status` shows. The fields read here are optional:
 * an agent that does not send them (or none at all) leaves them unsaid.
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

static void parse_line(char *line, pid_t pid, struct doc_agent *a)
{
	char jit[32], mirror[32], *v = strstr(line, ": ");

	if (!v)
		return;
	*v = '\0';
	v += 2;
	snprintf(jit, sizeof(jit), "jit_%d", (int)pid);
	snprintf(mirror, sizeof(mirror), "mirror_%d", (int)pid);
	if (!strcmp(line, "exec_mappings_source"))
		doc_escape(a->exec_mappings_source, sizeof(a->exec_mappings_source), v, strlen(v));
	else if (!strcmp(line, "lost_symbol_processes"))
		a->lost_symbol_processes = strtoll(v, NULL, 10);
	else if (!strcmp(line, jit))
		parse_jit(v, a);
	else if (!strcmp(line, mirror)) {
		a->has_mirror = true;
		doc_escape(a->mirror, sizeof(a->mirror), v, strlen(v));
	}
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
}

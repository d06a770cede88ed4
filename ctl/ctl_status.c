/*
 * perfmapctl status: ask the running perfmapd what it tracks. The agent
 * sends "key: value" lines; a person reads a summary of them, or every one
 * by group with --all (status_view.c); --json turns them into one JSON
 * object, as bpftool's -j does, through json-c: numbers stay numbers, yes
 * and no become booleans, everything else a string, escaped by the library.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "ctl.h"
#include "perfmap_tools.h"
#include "status_view.h"

enum status_format { STATUS_SUMMARY, STATUS_ALL, STATUS_JSON, STATUS_JSON_PRETTY };

/* The agent's lines for a person: a summary, or every line by group. */
static int print_text(char *text, const char *map_dir, bool all)
{
	struct status_view v;
	int err;

	err = status_view__parse(&v, text);
	if (!err && all)
		status_view__all(&v, stdout);
	else if (!err)
		status_view__summary(&v, map_dir, stdout);
	status_view__free(&v);
	if (err)
		ctl_error("status: %s", strerror(-err));
	return err ? CTL_ERROR : CTL_OK;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static struct json_object *json_value(const char *v)
{
	if (all_digits(v) && strlen(v) < 20)
		return json_object_new_uint64(strtoull(v, NULL, 10));
	if (!strcmp(v, "yes") || !strcmp(v, "no"))
		return json_object_new_boolean(!strcmp(v, "yes"));
	return json_object_new_string(v);
}

/* The agent's "key: value" lines as one JSON object on stdout. */
static int print_json(char *text, bool pretty)
{
	struct json_object *obj = json_object_new_object();
	char *line, *save = NULL, *sep;

	if (!obj)
		return CTL_ERROR;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		sep = strstr(line, ": ");
		if (!sep)
			continue;
		*sep = '\0';
		json_object_object_add(obj, line, json_value(sep + 2));
	}
	puts(json_object_to_json_string_ext(obj, pretty ? JSON_C_TO_STRING_PRETTY :
					    JSON_C_TO_STRING_PLAIN));
	json_object_put(obj);
	return CTL_OK;
}

/* Who may read the agent's status, from its socket's owner and mode. */
static void say_who_may(const char *sock)
{
	struct group *gr;
	struct stat st;

	if (stat(sock, &st)) {
		ctl_error("status: %s: permission denied", sock);
		return;
	}
	if (!(st.st_mode & S_IWGRP)) {
		ctl_error("status: %s: permission denied: only root may read perfmapd's status (run it as root, or start perfmapd with --status-group GROUP)",
			  sock);
		return;
	}
	gr = getgrgid(st.st_gid);
	if (gr)
		ctl_error("status: %s: permission denied: only root and the group %s may read perfmapd's status",
			  sock, gr->gr_name);
	else
		ctl_error("status: %s: permission denied: only root and the group %u may read perfmapd's status",
			  sock, (unsigned int)st.st_gid);
}

static int status(const char *map_dir, const char *run_dir, enum status_format format)
{
	char sock[PATH_MAX] = "";
	char *buf;
	size_t len;
	int err;

	err = ctl_status_fetch(map_dir, run_dir, &buf, &len, sock, sizeof(sock));
	if (err == -ENOENT || err == -ECONNREFUSED) {
		ctl_error("status: no perfmapd is running for %s (nothing listens on %s)",
			  map_dir, sock);
		return CTL_ERROR;
	}
	if (err == -EACCES || err == -EPERM) {
		say_who_may(sock);
		return CTL_ERROR;
	}
	if (err == -ETIMEDOUT) {
		ctl_error("status: %s: perfmapd for %s did not answer within 10 s (stopped? stuck?)",
			  sock, map_dir);
		return CTL_ERROR;
	}
	if (err) {
		ctl_error("status: %s%s: %s", sock[0] ? "" : "map directory ", sock[0] ? sock : map_dir, strerror(-err));
		return CTL_ERROR;
	}
	if (format == STATUS_SUMMARY || format == STATUS_ALL)
		err = print_text(buf, map_dir, format == STATUS_ALL);
	else
		err = print_json(buf, format == STATUS_JSON_PRETTY);
	free(buf);
	return err ? CTL_ERROR : CTL_OK;
}

int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "map-dir", required_argument, NULL, 'd' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *map_dir = "/tmp", *run_dir = PERFMAPD_RUN_DIR;
	enum status_format format = STATUS_SUMMARY;
	int opt;

	while ((opt = getopt_long(argc, argv, "d:r:ajph", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			map_dir = optarg;
			break;
		case 'r':
			run_dir = optarg;
			break;
		case 'a':
			format = format == STATUS_SUMMARY ? STATUS_ALL : format;
			break;
		case 'j':
			format = format == STATUS_JSON_PRETTY ? format : STATUS_JSON;
			break;
		case 'p':
			format = STATUS_JSON_PRETTY;
			break;
		case 'h':
			printf("Usage: perfmapctl status [--map-dir DIR] [--run-dir DIR] [--all | --json | --pretty]\n"
			       "\n"
			       "A summary of what the running perfmapd manages, what it did and what\n"
			       "went wrong; --all: every counter, by group, one 'key: value' a line;\n"
			       "--json: every counter as one JSON object (--pretty: indented).\n");
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (optind != argc) {
		ctl_error("status: unexpected argument '%s'", argv[optind]);
		return CTL_ERROR;
	}
	return status(map_dir, run_dir, format);
}

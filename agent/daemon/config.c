/* perfmapd's config file: read as root's alone, parsed, and each key applied as its option. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/options.h"

/* @s without the white space around it (in place). */
static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

int config__parse(struct daemon_config *cfg, const char *path, char *text, char *err, size_t errlen)
{
	/* Applied to a copy: a bad line anywhere leaves @cfg as it was. */
	struct daemon_config next = *cfg, scratch;
	unsigned int first_line[OPT__COUNT] = { 0 };
	unsigned int lineno = 0;
	char *line, *eol, *eq, *key, *value;
	int id;

	for (line = text; line; line = eol) {
		lineno++;
		eol = strchr(line, '\n');
		if (eol)
			*eol++ = '\0';
		line = trim(line);
		if (!*line || *line == '#')
			continue;
		eq = strchr(line, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: not KEY = VALUE", path, lineno);
			return -EINVAL;
		}
		*eq = '\0';
		key = trim(line);
		value = trim(eq + 1);
		id = opt_lookup(key);
		if (id < 0 || !opt_defs[id].in_file) {
			snprintf(err, errlen, "%s:%u: unknown key \"%s\"%s", path, lineno, key,
				 id == OPT_CONFIG ? " (--config is for the command line)" : "");
			return -EINVAL;
		}
		if (first_line[id]) {
			snprintf(err, errlen, "%s:%u: duplicate key \"%s\" (first on line %u)",
				 path, lineno, key, first_line[id]);
			return -EINVAL;
		}
		first_line[id] = lineno;
		/* Checked even where the command line wins: the file is wrong either way. */
		scratch = next;
		if (apply_option(&scratch, (enum opt_id)id, value)) {
			snprintf(err, errlen, "%s:%u: %s = \"%s\": not a valid value%s; see perfmapd --help",
				 path, lineno, key, value, opt_defs[id].flag ? " (yes or no)" : "");
			return -EINVAL;
		}
		if (!(next.cmdline_set & (1ull << id)))
			next = scratch;
	}
	*cfg = next;
	return 0;
}

/* Open @path as a file only root can have written, or say why not. */
static int open_checked(const char *path, char *err, size_t errlen, struct stat *st)
{
	/* O_NONBLOCK: a FIFO put there must not hang the agent before it is refused. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	int e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, st)) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		goto close_fd;
	}
	e = EPERM;
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file; refused", path);
		goto close_fd;
	}
	/* Whoever can write it runs code as root: --map-dir and --archive-dir are where root writes. */
	if (st->st_uid != 0) {
		snprintf(err, errlen, "%s: owned by uid %u, not root; refused: the agent runs as root",
			 path, (unsigned int)st->st_uid);
		goto close_fd;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "%s: writable by %s (mode %04o); refused: the agent runs as root",
			 path, st->st_mode & S_IWOTH ? "others" : "its group",
			 (unsigned int)(st->st_mode & 07777));
		goto close_fd;
	}
	if (st->st_size > CONFIG_MAX_BYTES) {
		e = EFBIG;
		snprintf(err, errlen, "%s: larger than %u bytes; refused", path, CONFIG_MAX_BYTES);
		goto close_fd;
	}
	return fd;

close_fd:
	close(fd);
	return -e;
}

int config__load(struct daemon_config *cfg, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n = 0;
	size_t len = 0;
	int fd, ret;

	fd = open_checked(cfg->config_path, err, errlen, &st);
	if (fd == -ENOENT && !cfg->config_explicit)
		return 0;  /* the default file is optional */
	if (fd < 0)
		return fd;
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		ret = -ENOMEM;
		snprintf(err, errlen, "%s: %s", cfg->config_path, strerror(ENOMEM));
		goto close_fd;
	}
	/* Up to the size fstat() saw: a file growing meanwhile is read as it was. */
	while (len < (size_t)st.st_size) {
		n = read(fd, text + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (n < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", cfg->config_path, strerror(errno));
		goto free_text;
	}
	text[len] = '\0';
	if (memchr(text, '\0', len)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s: holds a NUL byte: not a text file", cfg->config_path);
		goto free_text;
	}
	ret = config__parse(cfg, cfg->config_path, text, err, errlen);
	if (ret)
		goto free_text;
	/* Its values point into the text: kept as long as @cfg is. */
	free(cfg->config_text);
	cfg->config_text = text;
	close(fd);
	return 0;

free_text:
	free(text);
close_fd:
	close(fd);
	return ret;
}

void config__free(struct daemon_config *cfg)
{
	free(cfg->config_text);
	cfg->config_text = NULL;
}

/*
 * perfmapctl restore: what an archived map's name says (agent/archive/archive.c's
 * archive_name() and archive_file.c's dup_name() make them), the name of the
 * jitdump archived beside it, and which of a pid's archived maps a request
 * means. No system calls: decisions only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "restore.h"

/* Digits at *@s, moved past; false when there are none or too many. */
static bool take_number(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t n = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	*s = p;
	*v = n;
	return true;
}

static bool take_word_number(const char **s, const char *word)
{
	size_t n = strlen(word);
	const char *p = *s;
	uint64_t v;

	if (strncmp(p, word, n))
		return false;
	p += n;
	if (!take_number(&p, &v))
		return false;
	*s = p;
	return true;
}

/* "c" and 12 lower-case hex digits: a container's tag. */
static bool take_tag(const char **s)
{
	const char *p = *s;
	int i;

	if (*p++ != 'c')
		return false;
	for (i = 0; i < 12; i++, p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	*s = p;
	return true;
}

int archived_parse_name(const char *name, struct archived *a)
{
	const char *p = name;
	uint64_t pid;

	if (strncmp(p, "perf-", 5) || strlen(name) >= sizeof(a->name))
		return -EINVAL;
	p += 5;
	if (!take_number(&p, &pid) || !pid || pid > INT_MAX || *p++ != '-')
		return -EINVAL;
	a->pid = (pid_t)pid;
	a->has_ticks = take_number(&p, &a->ticks);
	if (!a->has_ticks && !take_word_number(&p, "stale") && !take_word_number(&p, "exited"))
		return -EINVAL;
	/* Then any of "-exec<ms>", "-c<tag>", "-dup<n>", and ".map". */
	while (*p == '-') {
		p++;
		if (take_word_number(&p, "exec"))
			a->execd = true;
		else if (!take_tag(&p) && !take_word_number(&p, "dup"))
			return -EINVAL;
	}
	if (strcmp(p, ".map"))
		return -EINVAL;
	strcpy(a->name, name);
	return 0;
}

int archived_newest(const struct archived *a, int n)
{
	int i, best = -1;

	for (i = 0; i < n; i++)
		if (best < 0 || a[i].mtime_ns > a[best].mtime_ns)
			best = i;
	return best;
}

static bool known(const struct archived *a)
{
	return a->start_ns != INT64_MIN;
}

int archived_choose_at(const struct archived *a, int n, int64_t at_ns, const char **rule)
{
	int i, best = -1;

	for (i = 0; i < n; i++)
		if (known(&a[i]) && a[i].start_ns <= at_ns && at_ns <= a[i].mtime_ns &&
		    (best < 0 || a[i].mtime_ns < a[best].mtime_ns))
			best = i;
	if (best >= 0) {
		*rule = "its process lived then";
		return best;
	}
	for (i = 0; i < n; i++)
		if (known(&a[i]) && a[i].start_ns <= at_ns &&
		    (best < 0 || a[i].start_ns > a[best].start_ns ||
		     (a[i].start_ns == a[best].start_ns && a[i].mtime_ns > a[best].mtime_ns)))
			best = i;
	if (best >= 0) {
		*rule = "the latest started before then";
		return best;
	}
	for (i = 0; i < n; i++)
		if (!known(&a[i]) && at_ns <= a[i].mtime_ns &&
		    (best < 0 || a[i].mtime_ns < a[best].mtime_ns))
			best = i;
	*rule = best >= 0 ? "start unknown, archived after then" : NULL;
	return best;
}

/* A table of strings kept once per content: names a profile's frames share are copied once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STRTAB_MIN 256

static size_t str_hash(const char *str, size_t len)
{
	size_t h = 5381;

	while (len--)
		h = h * 33 + (unsigned char)*str++;
	return h;
}

/* Twice the slots when half are taken: the probes stay short. 0 or -ENOMEM (@t as it was). */
static int strtab_grow(struct perfmap_strtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : STRTAB_MIN, i, k;
	char **slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++) {
		if (!t->slot[i])
			continue;
		for (k = str_hash(t->slot[i], strlen(t->slot[i])) % cap; slot[k]; k = (k + 1) % cap)
			;
		slot[k] = t->slot[i];
	}
	free(t->slot);
	t->slot = slot;
	t->cap = cap;
	return 0;
}

const char *perfmap__strtab_intern_n(struct perfmap_strtab *t, const char *str, size_t len)
{
	size_t i;

	len = strnlen(str, len);
	if (2 * (t->count + 1) > t->cap && strtab_grow(t))
		return NULL;
	/* A copy ends where the string does: strncmp() reads no further into it than its NUL. */
	for (i = str_hash(str, len) % t->cap; t->slot[i]; i = (i + 1) % t->cap)
		if (!strncmp(t->slot[i], str, len) && !t->slot[i][len])
			return t->slot[i];
	t->slot[i] = strndup(str, len);
	if (!t->slot[i])
		return NULL;
	t->count++;
	return t->slot[i];
}

const char *perfmap__strtab_intern(struct perfmap_strtab *t, const char *str)
{
	return perfmap__strtab_intern_n(t, str, strlen(str));
}

void perfmap__strtab_release(struct perfmap_strtab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cap; i++)
		free(t->slot[i]);
	free(t->slot);
	*t = (struct perfmap_strtab){ 0 };
}

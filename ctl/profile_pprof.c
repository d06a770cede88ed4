/*
 * pprof output: the profile format go tool pprof, pprof's web UI and the
 * profile stores of fleets read. Each distinct named frame becomes a
 * Location with one Line (its Function, named as people read it with the
 * mangled symbol its system_name, and source line) in a Mapping (its
 * module and build id; native code's addresses in the file's own terms,
 * so that a store can name it itself); a sample lists its locations leaf
 * first, with two values:
 * samples/count and cpu/nanoseconds (count times the interval). Encoded
 * with protobuf-c from ctl/proto/profile.proto, gzipped with zlib.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "profile_pprof.h"

/* An open-addressing index from a key's bytes to an id (1-based), for strings and records. */
struct index {
	char **keys;
	uint64_t *ids;
	size_t n, cap;
};

static size_t hash_of(const char *k)
{
	size_t h = 5381;

	while (*k)
		h = h * 33 + (unsigned char)*k++;
	return h;
}

static int index_grow(struct index *x)
{
	size_t cap = x->cap ? x->cap * 2 : 1024, i, k;
	char **keys = calloc(cap, sizeof(*keys));
	uint64_t *ids = calloc(cap, sizeof(*ids));

	if (!keys || !ids) {
		free(keys);
		free(ids);
		return -ENOMEM;
	}
	for (i = 0; i < x->cap; i++) {
		if (!x->keys[i])
			continue;
		for (k = hash_of(x->keys[i]) % cap; keys[k]; k = (k + 1) % cap)
			;
		keys[k] = x->keys[i];
		ids[k] = x->ids[i];
	}
	free(x->keys);
	free(x->ids);
	x->keys = keys;
	x->ids = ids;
	x->cap = cap;
	return 0;
}

/*
 * @key's id, and *@fresh when it was given one now (@next_id); the index's
 * own copy of the key in *@stored when not NULL. 0 without memory.
 */
static uint64_t index_get_stored(struct index *x, const char *key, uint64_t next_id, bool *fresh,
				 char **stored)
{
	size_t k;

	*fresh = false;
	if (2 * (x->n + 1) > x->cap && index_grow(x))
		return 0;
	for (k = hash_of(key) % x->cap; x->keys[k]; k = (k + 1) % x->cap)
		if (!strcmp(x->keys[k], key))
			return x->ids[k];
	x->keys[k] = strdup(key);
	if (!x->keys[k])
		return 0;
	x->ids[k] = next_id;
	x->n++;
	*fresh = true;
	if (stored)
		*stored = x->keys[k];
	return next_id;
}

static uint64_t index_get(struct index *x, const char *key, uint64_t next_id, bool *fresh)
{
	return index_get_stored(x, key, next_id, fresh, NULL);
}

static void index_free(struct index *x)
{
	for (size_t i = 0; i < x->cap; i++)
		free(x->keys[i]);
	free(x->keys);
	free(x->ids);
}

struct builder {
	Perftools__Profiles__Profile p;
	struct index strings, functions, locations, mappings;
	bool failed;
};

/* One more slot in the array @arr of @n; on no memory the builder has failed, and 0 is returned. */
#define GROW(arr, n) do {							\
	void *na_ = realloc((arr), ((n) + 1) * sizeof(*(arr)));			\
	if (!na_) { b->failed = true; return 0; }				\
	(arr) = na_;								\
} while (0)

/* A string's index in the string table; the index owns the copy the table points at. */
/* Bytes of one valid UTF-8 sequence at @s (no overlong form, no surrogate), 0 if none. */
size_t prof_utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[0] == 0xe0 && s[1] < 0xa0) ||
		    (s[0] == 0xed && s[1] >= 0xa0))
			return 0;
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80 ||
		    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

/*
 * @s with each byte that is no valid UTF-8 as the text \xNN, in a buffer of
 * its own; NULL when @s is valid as it is (or without memory). A path or a
 * JIT name is any local user's to choose, and Pyroscope refuses a whole
 * push whose profile holds one string that is not UTF-8.
 */
static char *utf8_escaped(const char *s)
{
	size_t n = strlen(s), o = 0, k, i;
	char *out;

	for (i = 0; i < n && (k = prof_utf8_len((const unsigned char *)s + i)); i += k)
		;
	if (i >= n || !(out = malloc(4 * n + 1)))
		return NULL;
	for (i = 0; i < n; i += k) {
		k = prof_utf8_len((const unsigned char *)s + i);
		if (k) {
			memcpy(out + o, s + i, k);
			o += k;
			continue;
		}
		o += (size_t)sprintf(out + o, "\\x%02x", (unsigned char)s[i]);
		k = 1;
	}
	out[o] = '\0';
	return out;
}

static int64_t str_id(struct builder *b, const char *s)
{
	char *stored = NULL, *esc = s ? utf8_escaped(s) : NULL;
	bool fresh;
	uint64_t id;

	id = index_get_stored(&b->strings, esc ? esc : s ? s : "", b->p.n_string_table, &fresh, &stored);
	free(esc);
	if (!fresh)
		return (int64_t)id;
	GROW(b->p.string_table, b->p.n_string_table);
	b->p.string_table[b->p.n_string_table++] = stored;
	return (int64_t)id;
}

/* @n strings joined by newlines (NULL as ""), in a buffer of its own: an index key, never cut short. */
static char *key_of(const char *const *parts, size_t n)
{
	size_t len = 1, at = 0, k;
	char *key;

	for (size_t i = 0; i < n; i++)
		len += (parts[i] ? strlen(parts[i]) : 0) + 1;
	key = malloc(len);
	for (size_t i = 0; key && i < n; i++) {
		k = parts[i] ? strlen(parts[i]) : 0;
		memcpy(key + at, parts[i] ? parts[i] : "", k);
		at += k;
		key[at++] = '\n';
	}
	if (key)
		key[at] = '\0';
	return key;
}

/*
 * A frame's Mapping: for code in a file one per (file, build id, mapping),
 * in the file's own terms as its Location.address is (normalized: Parca's
 * and Pyroscope's symbolizers take the address as the file's symbols have
 * it), so that a store names from the file what was not named here; one per
 * module name for the rest (JIT code, the kernel).
 */
static uint64_t mapping_id(struct builder *b, const struct prof_frame *fr)
{
	Perftools__Profiles__Profile *p = &b->p;
	Perftools__Profiles__Mapping *m;
	char start[24] = "";
	const char *parts[3];
	uint64_t id;
	bool fresh;
	char *key;

	if (fr->in_file)
		snprintf(start, sizeof(start), "%llx", (unsigned long long)fr->map_start);
	parts[0] = fr->module;
	parts[1] = fr->build_id;
	parts[2] = start;
	key = key_of(parts, 3);
	id = key ? index_get(&b->mappings, key, p->n_mapping + 1, &fresh) : 0;
	free(key);
	if (!id) {
		b->failed = true;
		return 0;
	}
	if (!fresh)
		return id;
	GROW(p->mapping, p->n_mapping);
	m = calloc(1, sizeof(*m));
	if (!m) {
		b->failed = true;
		return 0;
	}
	perftools__profiles__mapping__init(m);
	m->id = id;
	m->filename = str_id(b, fr->module);
	m->build_id = str_id(b, fr->build_id);
	if (fr->in_file) {
		m->memory_start = fr->map_start;
		m->memory_limit = fr->map_limit;
		m->file_offset = fr->map_offset;
	}
	/* Until one of its locations is left for the store to name (location_id()). */
	m->has_functions = true;
	p->mapping[p->n_mapping++] = m;
	return id;
}

/* One per (name, symbol, file): the name as people read it, the symbol as its file has it (mangled). */
static uint64_t function_id(struct builder *b, const char *name, const char *system_name,
			    const char *file)
{
	Perftools__Profiles__Profile *p = &b->p;
	Perftools__Profiles__Function *f;
	const char *parts[3] = { name, system_name ? system_name : name, file };
	uint64_t id;
	bool fresh;
	char *key;

	key = key_of(parts, 3);
	id = key ? index_get(&b->functions, key, p->n_function + 1, &fresh) : 0;
	free(key);
	if (!id) {
		b->failed = true;
		return 0;
	}
	if (!fresh)
		return id;
	GROW(p->function, p->n_function);
	f = calloc(1, sizeof(*f));
	if (!f) {
		b->failed = true;
		return 0;
	}
	perftools__profiles__function__init(f);
	f->id = id;
	f->name = str_id(b, name);
	f->system_name = str_id(b, system_name ? system_name : name);
	f->filename = str_id(b, file);
	p->function[p->n_function++] = f;
	return id;
}

/*
 * The Location of a frame: one per (function, line, module), and for code in
 * a file per address too, which it carries. Code in a file none named here,
 * whose file has a build id, gets no Line: a store names it from the file
 * (its Mapping's has_functions false); other code none named is "module+0xoff".
 */
static uint64_t location_id(struct builder *b, const struct prof_frame *fr)
{
	Perftools__Profiles__Profile *p = &b->p;
	Perftools__Profiles__Location *l;
	Perftools__Profiles__Line *line = NULL;
	bool for_store = !fr->name && fr->in_file && fr->build_id;
	char addr[24] = "", start[24] = "", off[24] = "", ln[16];
	const char *parts[8];
	char *name = NULL, *key;
	uint64_t id;
	bool fresh;

	if (fr->in_file) {
		snprintf(addr, sizeof(addr), "%llx", (unsigned long long)fr->address);
		snprintf(start, sizeof(start), "%llx", (unsigned long long)fr->map_start);
	}
	if (!fr->name)
		snprintf(off, sizeof(off), "%llx", (unsigned long long)fr->offset);
	snprintf(ln, sizeof(ln), "%d", fr->line);
	parts[0] = fr->name;
	parts[1] = off;
	parts[2] = fr->module;
	parts[3] = fr->build_id;
	parts[4] = start;
	parts[5] = addr;
	parts[6] = fr->file;
	parts[7] = ln;
	key = key_of(parts, 8);
	id = key ? index_get(&b->locations, key, p->n_location + 1, &fresh) : 0;
	free(key);
	if (!id) {
		b->failed = true;
		return 0;
	}
	if (!fresh)
		return id;
	GROW(p->location, p->n_location);
	l = calloc(1, sizeof(*l));
	if (!for_store) {
		line = calloc(1, sizeof(*line));
		if (!fr->name && asprintf(&name, "%s+0x%llx", fr->module, (unsigned long long)fr->offset) < 0)
			name = NULL;
	}
	if (l)
		perftools__profiles__location__init(l);
	if (l)
		l->line = calloc(1, sizeof(*l->line));
	if (!l || (!for_store && (!line || (!fr->name && !name))) || !l->line) {
		free(l ? l->line : NULL);
		free(l);
		free(line);
		free(name);
		b->failed = true;
		return 0;
	}
	l->id = id;
	l->mapping_id = mapping_id(b, fr);
	if (fr->in_file)
		l->address = fr->address;
	if (line) {
		perftools__profiles__line__init(line);
		line->function_id = function_id(b, fr->name ? fr->name : name, fr->system_name, fr->file);
		line->line = fr->line;
		l->line[0] = line;
		l->n_line = 1;
	} else if (l->mapping_id) {
		p->mapping[l->mapping_id - 1]->has_functions = false;
	}
	p->location[p->n_location++] = l;
	free(name);
	return id;
}

/* Grows @p->sample by one; 0 (and b->failed) without memory, as GROW() does. */
static int grow_samples(struct builder *b)
{
	Perftools__Profiles__Profile *p = &b->p;

	GROW(p->sample, p->n_sample);
	return 1;
}

static int add_sample(struct builder *b, const struct prof_sample *s, uint64_t interval_ns)
{
	Perftools__Profiles__Profile *p = &b->p;
	Perftools__Profiles__Sample *ps;

	if (!grow_samples(b))
		return -ENOMEM;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	perftools__profiles__sample__init(ps);
	p->sample[p->n_sample++] = ps;
	ps->location_id = calloc(s->n ? s->n : 1, sizeof(uint64_t));
	ps->value = calloc(2, sizeof(int64_t));
	if (!ps->location_id || !ps->value)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n && !b->failed; i++)
		ps->location_id[ps->n_location_id++] = location_id(b, &s->frames[i]);
	ps->n_value = 2;
	ps->value[0] = (int64_t)s->count;
	ps->value[1] = (int64_t)(s->count * interval_ns);
	return b->failed ? -ENOMEM : 0;
}

static void builder_free(struct builder *b)
{
	Perftools__Profiles__Profile *p = &b->p;
	size_t i;

	for (i = 0; i < p->n_sample; i++) {
		free(p->sample[i]->location_id);
		free(p->sample[i]->value);
		free(p->sample[i]);
	}
	for (i = 0; i < p->n_location; i++) {
		free(p->location[i]->line[0]);
		free(p->location[i]->line);
		free(p->location[i]);
	}
	for (i = 0; i < p->n_function; i++)
		free(p->function[i]);
	for (i = 0; i < p->n_mapping; i++)
		free(p->mapping[i]);
	free(p->sample);
	free(p->location);
	free(p->function);
	free(p->mapping);
	free(p->string_table);
	if (p->sample_type) {
		free(p->sample_type[0]);
		free(p->sample_type[1]);
	}
	free(p->sample_type);
	free(p->period_type);
	index_free(&b->strings);
	index_free(&b->functions);
	index_free(&b->locations);
	index_free(&b->mappings);
}

bool prof_pprof_wanted(const char *path)
{
	size_t n = path ? strlen(path) : 0;

	return n > 6 && !strcmp(path + n - 6, ".pb.gz");
}

static int value_type(struct builder *b, Perftools__Profiles__ValueType **vt, const char *type,
		      const char *unit)
{
	*vt = calloc(1, sizeof(**vt));
	if (!*vt)
		return -ENOMEM;
	perftools__profiles__value_type__init(*vt);
	(*vt)->type = str_id(b, type);
	(*vt)->unit = str_id(b, unit);
	return b->failed ? -ENOMEM : 0;
}

/* @buf gzipped into a buffer of its own (*@out, *@out_len; the caller frees it): what a file or a push carries. */
static int gzip_buf(const uint8_t *buf, size_t len, uint8_t **out, size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap;
	uint8_t *o;
	int zr;

	/* windowBits 15 + 16: the gzip wrapper pprof readers and servers expect, not bare zlib. */
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&z, len) + 32;
	o = malloc(cap);
	if (!o) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)buf;
	z.avail_in = (uInt)len;
	z.next_out = o;
	z.avail_out = (uInt)cap;
	zr = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (zr != Z_STREAM_END) {
		free(o);
		return -EIO;
	}
	*out = o;
	*out_len = cap - z.avail_out;
	return 0;
}

static int write_file(const char *path, bool fresh, const uint8_t *buf, size_t len)
{
	/* Not through a link another user left at the name. */
	int fd = open(path, O_WRONLY | O_CREAT | (fresh ? O_EXCL : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC,
		      0644), err = 0;
	ssize_t w;

	if (fd < 0)
		return -errno;
	while (len) {
		w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? -errno : -EIO;
			break;
		}
		buf += w;
		len -= (size_t)w;
	}
	if (close(fd) && !err)
		err = -errno;
	return err;
}

int prof_pprof_encode(const struct prof_sample *s, size_t n, const struct prof_pprof_info *info,
		      uint8_t **out, size_t *out_len)
{
	struct builder b = { 0 };
	uint8_t *buf = NULL;
	size_t len;
	int err = -ENOMEM;

	perftools__profiles__profile__init(&b.p);
	/* The string table begins with "", as the format wants. */
	str_id(&b, "");
	b.p.sample_type = calloc(2, sizeof(*b.p.sample_type));
	if (!b.p.sample_type || value_type(&b, &b.p.sample_type[0], "samples", "count") ||
	    value_type(&b, &b.p.sample_type[1], "cpu", "nanoseconds") ||
	    value_type(&b, &b.p.period_type, "cpu", "nanoseconds"))
		goto free_builder;
	b.p.n_sample_type = 2;
	b.p.period = (int64_t)info->interval_ns;
	b.p.time_nanos = (int64_t)info->time_ns;
	b.p.duration_nanos = (int64_t)info->duration_ns;
	for (size_t i = 0; i < n; i++)
		if (add_sample(&b, &s[i], info->interval_ns))
			goto free_builder;
	if (b.failed)
		goto free_builder;
	len = perftools__profiles__profile__get_packed_size(&b.p);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto free_builder;
	perftools__profiles__profile__pack(&b.p, buf);
	err = gzip_buf(buf, len, out, out_len);
free_builder:
	free(buf);
	builder_free(&b);
	return err;
}

int prof_pprof_write(const struct prof_sample *s, size_t n, const struct prof_pprof_info *info,
		     const char *path)
{
	uint8_t *gz;
	size_t len;
	int err;

	err = prof_pprof_encode(s, n, info, &gz, &len);
	if (err)
		return err;
	err = write_file(path, info->fresh, gz, len);
	free(gz);
	return err;
}

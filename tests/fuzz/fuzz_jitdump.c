/*
 * libFuzzer target: the jitdump reader on any bytes. No crash, memory within
 * its bounds, the map it writes read clean by libperfmap's reader and
 * checker, and the dump fed in arbitrary chunks read as when fed whole,
 * line tables and lookups too (kept up to a bound small enough to be met).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "perfmap.h"
#include "perfmap_tools.h"

/* Small enough that a few tables reach it: the bound's path is taken too. */
#define LINES_BOUND 600u

struct result {
	long rc;
	struct perfmap_jitdump_stats st;
	char *map;
	size_t map_len;
	long lines;
	uint64_t lookups;    /* a hash of what each map line's first and last byte look up to */
};

static uint64_t hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * 0x100000001b3ull;
	return h;
}

/* Each function of the map, looked up at its first and last byte: its very name, and a line within bounds. */
static uint64_t lookups(const struct perfmap_jitdump *j, const struct result *r)
{
	const char *p = r->map, *nl, *name;
	struct perfmap_jitdump_sym sym;
	uint64_t h = 0xcbf29ce484222325ull, start, size, at;
	char *end;
	int k;

	for (; (nl = strchr(p, '\n')); p = nl + 1) {
		start = strtoull(p, &end, 16);
		size = strtoull(end, &end, 16);
		name = end + 1;
		for (k = 0; k < 2; k++) {
			at = k ? start + size - 1 : start;
			REQUIRE(perfmap__jitdump_lookup(j, r->st.pid, at, &sym) == 0);
			REQUIRE(sym.start == start && sym.size == size);
			REQUIRE(sym.name_len == (size_t)(nl - name) && !memcmp(sym.name, name, sym.name_len));
			REQUIRE(!sym.file || (strlen(sym.file) <= PERFMAP_JITDUMP_FILE_MAX && *sym.file));
			h = hash(h, &at, sizeof(at));
			if (sym.file) {
				h = hash(h, sym.file, strlen(sym.file));
				h = hash(h, &sym.line, sizeof(sym.line));
			}
		}
	}
	return h;
}

static char *map_text(const struct perfmap_jitdump *j, uint32_t pid, size_t *len, long *lines)
{
	int fd = memfd_create("map", MFD_CLOEXEC);
	off_t end;
	char *text;

	REQUIRE(fd >= 0);
	*lines = perfmap__jitdump_write_map(j, fd, pid);
	REQUIRE(*lines >= 0);
	end = lseek(fd, 0, SEEK_END);
	REQUIRE(end >= 0);
	text = malloc((size_t)end + 1);
	REQUIRE(text);
	REQUIRE(pread(fd, text, (size_t)end, 0) == end);
	text[end] = '\0';
	*len = (size_t)end;
	close(fd);
	return text;
}

static void finish(struct perfmap_jitdump *j, long rc, struct result *out)
{
	out->rc = rc;
	out->st = *perfmap__jitdump_stats(j);
	out->map = map_text(j, out->st.pid, &out->map_len, &out->lines);
	out->lookups = lookups(j, out);
	REQUIRE(out->st.lines_bytes <= LINES_BOUND && out->st.lines_tables <= out->st.funcs);
	REQUIRE(!out->st.lines_tables == !out->st.lines_bytes);
	REQUIRE(out->st.funcs <= PERFMAP_JITDUMP_FUNCS_MAX);
	REQUIRE(out->st.name_bytes <= PERFMAP_JITDUMP_NAME_BYTES_MAX);
	REQUIRE(out->st.funcs <= out->st.loads);
	REQUIRE((out->rc == -EBADMSG) == (out->st.stop != PERFMAP_JITDUMP_OK));
	perfmap__jitdump_free(j);
}

static void whole(const uint8_t *data, size_t size, struct result *out)
{
	struct perfmap_jitdump *j = perfmap__jitdump_new();
	int fd = memfd_create("dump", MFD_CLOEXEC);
	long rc;

	REQUIRE(j && fd >= 0);
	perfmap__jitdump_keep_lines(j, LINES_BOUND);
	REQUIRE(write(fd, data, size) == (ssize_t)size);
	rc = perfmap__jitdump_read(j, fd, 0);
	REQUIRE(rc >= 0 || rc == -EBADMSG);
	if (rc >= 0) {
		/* All of it consumed, but for a torn tail. */
		REQUIRE(perfmap__jitdump_stats(j)->offset + perfmap__jitdump_stats(j)->torn_bytes ==
			size);
		REQUIRE(perfmap__jitdump_read(j, fd, 0) == 0);
		rc = 0;
	}
	close(fd);
	finish(j, rc, out);
}

/* Appended in chunks whose lengths the input draws, read after each, a few records at a time. */
static void chunked(const uint8_t *data, size_t size, struct result *out)
{
	struct perfmap_jitdump *j = perfmap__jitdump_new();
	int fd = memfd_create("dump", MFD_CLOEXEC);
	size_t off = 0, n, k = 0, max;
	long rc = 0;

	REQUIRE(j && fd >= 0);
	perfmap__jitdump_keep_lines(j, LINES_BOUND);
	while (off < size) {
		n = 1 + fuzz_num(data, size, k * 7 + 3, 1) % 97;
		if (n > size - off)
			n = size - off;
		REQUIRE(pwrite(fd, data + off, n, (off_t)off) == (ssize_t)n);
		off += n;
		max = fuzz_num(data, size, k * 5 + 1, 1) % 4;
		rc = perfmap__jitdump_read(j, fd, max);
		REQUIRE(rc >= 0 || rc == -EBADMSG);
		if (rc < 0)
			break;
		k++;
	}
	/* Then to the end, a record at a time. */
	while (rc >= 0) {
		rc = perfmap__jitdump_read(j, fd, 1);
		REQUIRE(rc >= 0 || rc == -EBADMSG);
		if (rc == 0)
			break;
	}
	close(fd);
	finish(j, rc, out);
}

static void map_reads_clean(const struct result *r)
{
	struct perfmap_reader *rd;
	struct perfmap_report rep;
	unsigned int q;

	rd = perfmap_reader__from_mem(r->map, r->map_len, NULL);
	REQUIRE(rd);
	REQUIRE(perfmap_check(rd, &rep) == 0);
	REQUIRE(rep.read.lines == rep.read.entries && !rep.read.incomplete_bytes);
	REQUIRE(rep.read.entries == (uint64_t)r->lines);
	for (q = 0; q < PERFMAP_QUIRK_COUNT; q++)
		REQUIRE(rep.read.quirks[q] == 0);
	REQUIRE(rep.table.duplicates == 0 && rep.table.overlapping == 0);
	REQUIRE(rep.verdict[PERFMAP_CONSUMER_SAMPLY].ok);
	REQUIRE(rep.verdict[PERFMAP_CONSUMER_BLAZESYM].ok);
	perfmap_reader__free(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result a, b;

	whole(data, size, &a);
	chunked(data, size, &b);
	map_reads_clean(&a);
	REQUIRE(a.rc == b.rc);
	REQUIRE(a.st.stop == b.st.stop && a.st.stop_offset == b.st.stop_offset);
	REQUIRE(a.st.offset == b.st.offset && a.st.records == b.st.records);
	REQUIRE(a.st.loads == b.st.loads && a.st.moves == b.st.moves);
	REQUIRE(a.st.funcs == b.st.funcs && a.st.replaced == b.st.replaced);
	REQUIRE(a.st.debug_entries == b.st.debug_entries && a.st.skipped == b.st.skipped);
	REQUIRE(a.map_len == b.map_len && !memcmp(a.map, b.map, a.map_len));
	REQUIRE(a.st.lines_tables == b.st.lines_tables && a.st.lines_bytes == b.st.lines_bytes);
	REQUIRE(a.st.lines_over == b.st.lines_over &&
		a.st.lines_unattached == b.st.lines_unattached);
	REQUIRE(a.lookups == b.lookups);
	free(a.map);
	free(b.map);
	return 0;
}

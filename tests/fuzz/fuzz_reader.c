/* libFuzzer target: the reader, the compactor and the consumer checks on any bytes at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "perfmap.h"

#define REQUIRE(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz_reader: %s:%d: %s\n", __FILE__,  \
				__LINE__, #cond);                              \
			abort();                                               \
		}                                                              \
	} while (0)

/* Every line is counted once, as exactly one kind. */
static uint64_t read_all(struct perfmap_reader *r)
{
	const struct perfmap_reader_stats *s;
	struct perfmap_line line;
	uint64_t rejected = 0, entries = 0;
	unsigned int i;

	while (perfmap_reader__next_line(r, &line) > 0) {
		REQUIRE(line.kind != PERFMAP_LINE_ENTRY || line.rec.size > 0);
		entries += line.kind == PERFMAP_LINE_ENTRY;
	}
	s = perfmap_reader__stats(r);
	for (i = 0; i < __PERFMAP_REJECT_MAX; i++)
		rejected += s->rejected[i];
	REQUIRE(s->entries == entries);
	REQUIRE(s->lines == s->entries + s->empty + rejected);
	return entries;
}

static int memfd_with(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	REQUIRE(fd >= 0);
	REQUIRE(write(fd, data, size) == (ssize_t)size);
	REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
	return fd;
}

/* The canonical form of @data into a memfd, left at offset 0. */
static int canonical(const void *data, size_t size, size_t *out_len)
{
	struct perfmap_reader *r = perfmap_reader__from_mem(data, size, NULL);
	struct perfmap_table *t = perfmap_table__new();
	struct perfmap_table_stats st;
	int fd = memfd_create("canon", MFD_CLOEXEC);

	REQUIRE(r && t && fd >= 0);
	REQUIRE(perfmap_table__load(t, r) == 0);
	REQUIRE(perfmap_table__stats(t, &st) == 0);
	REQUIRE(perfmap_table__write_canonical(t, fd) == 0);
	*out_len = (size_t)lseek(fd, 0, SEEK_END);
	REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
	perfmap_table__free(t);
	perfmap_reader__free(r);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Small line bounds make the fd reader refill and drop often. */
	PERFMAP_OPTS(perfmap_reader_opts, opts, .max_line = 16 + (size ? data[0] : 0));
	struct perfmap_report rep;
	struct perfmap_reader *r;
	uint64_t from_mem, from_fd;
	size_t len, len2;
	char *out, *out2;
	int fd, fd2;
	unsigned int q;

	r = perfmap_reader__from_mem(data, size, &opts);
	REQUIRE(r);
	from_mem = read_all(r);
	REQUIRE(perfmap_reader__stats(r)->bytes == size);
	perfmap_reader__free(r);

	fd = memfd_with(data, size);
	r = perfmap_reader__from_fd(fd, &opts);
	REQUIRE(r);
	from_fd = read_all(r);
	REQUIRE(from_fd == from_mem);
	REQUIRE(perfmap_reader__stats(r)->bytes == size);
	perfmap_reader__free(r);
	close(fd);

	r = perfmap_reader__from_mem(data, size, NULL);
	REQUIRE(perfmap_check(r, &rep) == 0);
	perfmap_reader__free(r);

	/* The canonical form reads cleanly everywhere and is a fixed point. */
	fd = canonical(data, size, &len);
	out = malloc(len + 1);
	REQUIRE(out && read(fd, out, len) == (ssize_t)len);
	r = perfmap_reader__from_mem(out, len, NULL);
	REQUIRE(perfmap_check(r, &rep) == 0);
	REQUIRE(rep.read.lines == rep.read.entries && !rep.read.incomplete_bytes);
	for (q = 0; q < PERFMAP_QUIRK_COUNT; q++)
		REQUIRE(rep.read.quirks[q] == 0);
	REQUIRE(rep.table.duplicates == 0 && rep.table.overlapping == 0);
	REQUIRE(rep.verdict[PERFMAP_CONSUMER_SAMPLY].ok);
	REQUIRE(rep.verdict[PERFMAP_CONSUMER_BLAZESYM].ok);
	perfmap_reader__free(r);
	fd2 = canonical(out, len, &len2);
	out2 = malloc(len2 + 1);
	REQUIRE(out2 && read(fd2, out2, len2) == (ssize_t)len2);
	REQUIRE(len2 == len && !memcmp(out, out2, len));
	free(out2);
	free(out);
	close(fd2);
	close(fd);
	return 0;
}

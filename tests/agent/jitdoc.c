/*
 * jitdoc: a test JIT for perfmapctl doctor, with one region of each kind it
 * tells apart, at addresses it prints:
 *
 *   named    2 anonymous executable pages, named by two entries (0x0-0x800,
 *            0x800-0x1000 of the first page); the second page unnamed
 *   unnamed  1 anonymous executable page no entry names      (--unnamed)
 *   freed    1 page named by an entry, then unmapped           (--freed)
 *   memfd    1 page of a memfd mapped shared and executable, named (--memfd)
 *
 * and on request a duplicate line (--dup), an entry overlapping the two named
 * ones (--overlap), a `0x`-prefixed line for the second page (--hex), and
 * (--gap) in place of the second entry one at 0xf00-0x1000 alone, leaving
 * 0x800-0xf00 of the code below it unnamed.
 *
 * --adjacent, in place of the named pages: three anonymous executable pages
 * mapped by three mmaps, each beside the last, never written (written pages
 * get anonymous memory of their own, which the kernel does not merge), so
 * that /proc/<pid>/maps shows them as one mapping; entries name 0x10 bytes
 * of the first two, none the third ("adjacent" and "adjacent_unnamed").
 * Other regions are separated by PROT_NONE pages so that the kernel never
 * merges them. The map is <dir>/perf-<pid>.map, opened O_APPEND|O_CREAT as CPython
 * does (pid as the process sees it); a map it cannot open is skipped, as
 * CPython skips it. It prints "KIND 0xADDR" lines, then "ready", and pauses
 * until killed.
 *
 *   jitdoc [--dir DIR] [--unnamed] [--freed] [--memfd] [--dup] [--overlap] [--hex] [--gap]
 *          [--adjacent]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

struct opts {
	const char *dir;
	int unnamed, freed, memfd, dup, overlap, hex, gap, adjacent;
};

static int map_fd = -1;

static void entry(uintptr_t start, size_t size, const char *name, int hex)
{
	char line[256];
	int n;

	if (map_fd < 0)
		return;
	n = snprintf(line, sizeof(line), hex ? "0x%lx 0x%zx %s\n" : "%lx %zx %s\n",
		     (unsigned long)start, size, name);
	if (write(map_fd, line, (size_t)n) != n)
		perror("jitdoc: write");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "unnamed", no_argument, NULL, 'u' },
		{ "freed", no_argument, NULL, 'f' },
		{ "memfd", no_argument, NULL, 'm' },
		{ "dup", no_argument, NULL, 'D' },
		{ "overlap", no_argument, NULL, 'o' },
		{ "hex", no_argument, NULL, 'x' },
		{ "gap", no_argument, NULL, 'g' },
		{ "adjacent", no_argument, NULL, 'a' },
		{ 0 },
	};
	int opt;

	o->dir = "/tmp";
	while ((opt = getopt_long(argc, argv, "d:ufmDoxga", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': o->dir = optarg; break;
		case 'u': o->unnamed = 1; break;
		case 'f': o->freed = 1; break;
		case 'm': o->memfd = 1; break;
		case 'D': o->dup = 1; break;
		case 'o': o->overlap = 1; break;
		case 'x': o->hex = 1; break;
		case 'g': o->gap = 1; break;
		case 'a': o->adjacent = 1; break;
		default: return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

/* A page of the reserve made executable, filled with ret instructions. */
static char *code_page(char *reserve, int page, size_t pages)
{
	char *p = reserve + (size_t)page * PAGE;

	if (mprotect(p, pages * PAGE, PROT_READ | PROT_WRITE) ||
	    (memset(p, 0xc3, pages * PAGE), mprotect(p, pages * PAGE, PROT_READ | PROT_EXEC))) {
		perror("jitdoc: mprotect");
		exit(2);
	}
	return p;
}

/* Pages 10 to 12 of the reserve, each its own mmap beside the last: the kernel merges them. */
static char *adjacent_pages(char *reserve)
{
	char *p = reserve + 10 * PAGE;
	int i;

	for (i = 0; i < 3; i++)
		if (mmap(p + i * PAGE, PAGE, PROT_READ | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
			perror("jitdoc: mmap");
			exit(2);
		}
	return p;
}

int main(int argc, char **argv)
{
	char path[4096], *reserve, *named, *unnamed = NULL, *freed = NULL, *mem = NULL;
	struct opts o = { 0 };
	int fd;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: jitdoc [--dir DIR] [--unnamed] [--freed] [--memfd] [--dup] [--overlap] [--hex] [--gap] [--adjacent]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	reserve = mmap(NULL, 16 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (reserve == MAP_FAILED)
		return 2;
	if (o.adjacent)
		named = adjacent_pages(reserve);
	else
		named = code_page(reserve, 1, 2);
	if (o.unnamed)
		unnamed = code_page(reserve, 5, 1);
	if (o.freed)
		freed = code_page(reserve, 8, 1);
	if (o.memfd) {
		fd = memfd_create("jitdoc", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, PAGE))
			return 2;
		mem = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
		if (mem == MAP_FAILED)
			return 2;
		close(fd);
	}

	snprintf(path, sizeof(path), "%s/perf-%d.map", o.dir, (int)getpid());
	map_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (map_fd < 0)
		fprintf(stderr, "jitdoc: %s: %s (going on without a map, as CPython does)\n", path,
			strerror(errno));
	if (o.adjacent) {
		entry((uintptr_t)named, 0x10, "jit::adjacent_a", 0);
		entry((uintptr_t)named + PAGE, 0x10, "jit::adjacent_b", 0);
	} else {
		entry((uintptr_t)named, 0x800, "jit::named_a", 0);
		if (o.gap)
			entry((uintptr_t)named + 0xf00, 0x100, "jit::named_top", 0);
		else
			entry((uintptr_t)named + 0x800, 0x800, "jit::named_b", 0);
	}
	if (o.dup)
		entry((uintptr_t)named, 0x800, "jit::named_a", 0);
	if (o.overlap)
		entry((uintptr_t)named + 0x400, 0x800, "jit::overlap", 0);
	if (o.hex)
		entry((uintptr_t)named + PAGE, 0x40, "jit::hexline", 1);
	if (freed)
		entry((uintptr_t)freed, 0x100, "jit::freed", 0);
	if (mem)
		entry((uintptr_t)mem, 0x100, "jit::in_memfd", 0);

	if (o.adjacent) {
		printf("adjacent 0x%lx\n", (unsigned long)(uintptr_t)named);
		printf("adjacent_unnamed 0x%lx\n", (unsigned long)(uintptr_t)named + 2 * PAGE);
	} else {
		printf("named 0x%lx\n", (unsigned long)(uintptr_t)named);
	}
	if (unnamed)
		printf("unnamed 0x%lx\n", (unsigned long)(uintptr_t)unnamed);
	if (freed)
		printf("freed 0x%lx\n", (unsigned long)(uintptr_t)freed);
	if (mem)
		printf("memfd 0x%lx\n", (unsigned long)(uintptr_t)mem);
	/* Freed after its entry was written, as a runtime frees code it named. */
	if (freed && munmap(freed, PAGE))
		return 2;
	printf("ready\n");
	for (;;)
		pause();
}

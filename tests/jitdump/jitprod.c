/*
 * A live jitdump producer for the agent's jitdump tests, driven line by line
 * on stdin so that a test orders every step and waits for the agent between
 * them (no sleeps). It writes jit-<pid>.dump in DIR as V8 and CPython do:
 * the header, then the marker (the dump mapped PROT_READ|PROT_EXEC, which
 * the kernel reports to perf), then a record per command, each function's
 * code a real loop in an anonymous executable region (so perf samples land
 * in it). Every reply is one line on stdout.
 *
 *   jitprod DIR                 "ready <pid> <dump path>"
 *   load NAME                   JIT_CODE_LOAD            "loaded NAME 0xADDR"
 *   move NAME                   JIT_CODE_MOVE to a new slot "moved NAME 0xADDR"
 *   reload NAME NEWNAME         a load over NAME's range  "loaded NEWNAME 0xADDR"
 *   debug NAME                  JIT_CODE_DEBUG_INFO (3 lines) "debug NAME"
 *   torn NAME                   a load, its last 10 bytes held back "torn NAME 0xADDR"
 *   finish                      the held-back bytes      "finished"
 *   fork N                      a child writes N loads into this dump under its own
 *                               pid (child_fn_<k>), then runs them   "forked PID"
 *   run MS                      every live function run for MS ms   "ran"
 *   region                      where the code is, nothing written "region 0xADDR"
 *   close                       JIT_CODE_CLOSE            "closed"
 *   exec PATH [ARG]             replaces its image (no dump any more) "exec PATH"
 *   exit                        exits 0
 *
 * Hostile dumps, for the security scenarios:
 *   jitprod DIR --header-pid N  the header names pid N
 *   jitprod DIR --existing      DIR/jit-<pid>.dump is someone's file already: mapped, not made
 *   jitprod DIR --swap symlink|fifo  the name is replaced by a symlink (to /etc/passwd) or a
 *                               FIFO just after the marker is mapped
 *   rawrec ID TOTAL             a record prefix claiming TOTAL bytes, nothing after "raw"
 *   nonul                       a load whose name fills its record, without a NUL "raw"
 *   hugecode                    a load claiming 1 TiB of code              "raw"
 *   flood N                     N records of an unknown kind (16 bytes each) "flooded"
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../agent/jitloop.h"
#include "../unit/jdbuild.h"

#define SLOT 256
#define SLOTS 4096
#define FUNCS 1024

static unsigned char *region;
static unsigned int next_slot;
static int fd;
static uint32_t self;
static struct {
	char name[128];
	uint64_t addr;
	uint32_t pid;
} funcs[FUNCS];
static unsigned int nfuncs;
static unsigned char held[64];
static size_t held_len;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Each record's timestamp, as perf inject -j wants it (perf record -k mono). */
static void stamp(struct jdb *b, size_t at)
{
	uint64_t t = now_ns();

	memcpy(b->p + at + 8, &t, 8);
}

static void put(struct jdb *b, size_t hold)
{
	size_t n = b->len - hold;

	if (write(fd, b->p, n) != (ssize_t)n)
		exit(3);
	memcpy(held, b->p + n, hold);
	held_len = hold;
	b->len = 0;
}

static uint64_t slot(void)
{
	unsigned char *p;

	if (next_slot == SLOTS)
		exit(4);
	p = region + (size_t)next_slot++ * SLOT;
	emit_loop(p);
	return (uint64_t)(uintptr_t)p;
}

static int find(const char *name)
{
	unsigned int i;

	for (i = 0; i < nfuncs; i++)
		if (funcs[i].pid == self && !strcmp(funcs[i].name, name))
			return (int)i;
	return -1;
}

static uint64_t load_at(struct jdb *b, uint32_t pid, uint64_t addr, const char *name, size_t hold)
{
	static uint64_t code_index;

	jdb_load(b, pid, addr, SLOT, name);
	stamp(b, 0);
	/* A code index of its own: perf inject -j names each function's ELF file by it. */
	code_index++;
	memcpy(b->p + 48, &code_index, 8);
	put(b, hold);
	if (nfuncs < FUNCS) {
		snprintf(funcs[nfuncs].name, sizeof(funcs[nfuncs].name), "%s", name);
		funcs[nfuncs].addr = addr;
		funcs[nfuncs++].pid = pid;
	}
	return addr;
}

static void run(unsigned int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	unsigned int i;

	while (now_ns() < end)
		for (i = 0; i < nfuncs; i++)
			if (funcs[i].pid == self && funcs[i].addr)
				((uint64_t (*)(uint64_t))(uintptr_t)funcs[i].addr)(20000);
}

static pid_t do_fork(struct jdb *b, unsigned int n)
{
	char name[64];
	int p[2];
	pid_t child;
	unsigned int k;
	char c;

	if (pipe(p))
		exit(5);
	fflush(stdout);
	child = fork();
	if (child < 0)
		exit(5);
	if (child == 0) {
		self = (uint32_t)getpid();
		for (k = 0; k < n; k++) {
			snprintf(name, sizeof(name), "child_fn_%u", k);
			load_at(b, self, slot(), name, 0);
		}
		c = 'r';
		if (write(p[1], &c, 1) != 1)
			_exit(6);
		for (;;)
			run(1000);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		exit(6);
	close(p[0]);
	return child;
}

/* Hostile records: what no runtime writes. */
static int hostile(struct jdb *b, const char *cmd, const char *a1, const char *a2)
{
	unsigned long n, i;

	if (!strcmp(cmd, "rawrec")) {
		jdb_prefix(b, (uint32_t)strtoul(a1, NULL, 0), (uint32_t)strtoul(a2, NULL, 0));
	} else if (!strcmp(cmd, "nonul")) {
		jdb_prefix(b, 0, 56 + 32);
		jdb_u32(b, self);
		jdb_u32(b, self);
		jdb_u64(b, slot());
		jdb_u64(b, b->len);
		jdb_u64(b, 0);
		jdb_u64(b, 1);
		jdb_bytes(b, "nonul_fn_nonul_fn_nonul_fn_xxxxx", 32);
	} else if (!strcmp(cmd, "hugecode")) {
		jdb_prefix(b, 0, 56 + 16);
		jdb_u32(b, self);
		jdb_u32(b, self);
		jdb_u64(b, slot());
		jdb_u64(b, 0x7f0000000000ull);
		jdb_u64(b, 1ull << 40);
		jdb_u64(b, 2);
		jdb_bytes(b, "huge_fn", 8);
		jdb_bytes(b, NULL, 8);
	} else if (!strcmp(cmd, "flood")) {
		n = strtoul(a1, NULL, 0);
		for (i = 0; i < n; i++) {
			jdb_prefix(b, 99, 16);
			if (b->len >= 65536)
				put(b, 0);
		}
		put(b, 0);
		printf("flooded\n");
		return 1;
	} else {
		return 0;
	}
	put(b, 0);
	printf("raw\n");
	return 1;
}

int main(int argc, char **argv)
{
	char line[512], cmd[32], a1[128], a2[128], path[4096];
	uint32_t header_pid;
	const char *swap = NULL;
	struct jdb b = { 0 };
	pid_t children[64];
	unsigned int nchildren = 0, i;
	bool existing = false;
	void *marker;
	int k;

	if (argc < 2) {
		fprintf(stderr, "usage: jitprod DIR [--header-pid N|--existing|--swap symlink|fifo]\n");
		return 2;
	}
	self = header_pid = (uint32_t)getpid();
	for (k = 2; k < argc; k++) {
		if (!strcmp(argv[k], "--header-pid") && k + 1 < argc)
			header_pid = (uint32_t)strtoul(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--existing"))
			existing = true;
		else if (!strcmp(argv[k], "--swap") && k + 1 < argc)
			swap = argv[++k];
	}
	region = mmap(NULL, (size_t)SLOT * SLOTS, PROT_READ | PROT_WRITE | PROT_EXEC,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 2;
	snprintf(path, sizeof(path), "%s/jit-%u.dump", argv[1], self);
	fd = existing ? open(path, O_RDONLY | O_CLOEXEC)
		      : open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	if (!existing) {
		jdb_header(&b, header_pid);
		memcpy(b.p + 24, &(uint64_t){ now_ns() }, 8);
		put(&b, 0);
	}
	/* The marker: perf (and perfmapd) find the dump by this executable mapping. */
	marker = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (marker == MAP_FAILED)
		return 2;
	if (swap) {
		/* The name changes under the mapping: the agent must refuse what is there now. */
		if (unlink(path) || (!strcmp(swap, "fifo") ? mkfifo(path, 0600) : symlink("/etc/passwd", path)))
			return 2;
	}
	printf("ready %u %s\n", self, path);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		a1[0] = a2[0] = '\0';
		if (sscanf(line, "%31s %127s %127s", cmd, a1, a2) < 1)
			continue;
		if (!strcmp(cmd, "load")) {
			printf("loaded %s 0x%llx\n", a1, (unsigned long long)load_at(&b, self, slot(), a1, 0));
		} else if (!strcmp(cmd, "move") && (k = find(a1)) >= 0) {
			uint64_t to = slot();

			jdb_move(&b, self, funcs[k].addr, to, SLOT);
			stamp(&b, 0);
			put(&b, 0);
			funcs[k].addr = to;
			printf("moved %s 0x%llx\n", a1, (unsigned long long)to);
		} else if (!strcmp(cmd, "reload") && (k = find(a1)) >= 0) {
			uint64_t at = funcs[k].addr;

			funcs[k].addr = 0;
			printf("loaded %s 0x%llx\n", a2, (unsigned long long)load_at(&b, self, at, a2, 0));
		} else if (!strcmp(cmd, "debug") && (k = find(a1)) >= 0) {
			jdb_debug(&b, funcs[k].addr, 3, "/app/jitprod.js");
			stamp(&b, 0);
			put(&b, 0);
			printf("debug %s\n", a1);
		} else if (!strcmp(cmd, "torn")) {
			printf("torn %s 0x%llx\n", a1, (unsigned long long)load_at(&b, self, slot(), a1, 10));
		} else if (!strcmp(cmd, "finish")) {
			if (write(fd, held, held_len) != (ssize_t)held_len)
				return 3;
			held_len = 0;
			printf("finished\n");
		} else if (!strcmp(cmd, "fork") && nchildren < 64) {
			children[nchildren] = do_fork(&b, (unsigned int)atoi(a1));
			printf("forked %d\n", (int)children[nchildren++]);
		} else if (!strcmp(cmd, "run")) {
			run((unsigned int)atoi(a1));
			printf("ran\n");
		} else if (!strcmp(cmd, "region")) {
			printf("region 0x%llx\n", (unsigned long long)(uintptr_t)region);
		} else if (!strcmp(cmd, "close")) {
			jdb_close(&b);
			stamp(&b, 0);
			put(&b, 0);
			printf("closed\n");
		} else if (!strcmp(cmd, "exit")) {
			break;
		} else if (!strcmp(cmd, "exec")) {
			/* Another image at the same pid: its old map and dump are the old image's. */
			printf("exec %s\n", a1);
			fflush(stdout);
			execl(a1, a1, a2[0] ? a2 : NULL, (char *)NULL);
			return 3;
		} else if (hostile(&b, cmd, a1, a2)) {
			;
		} else {
			printf("error %s\n", cmd);
		}
		fflush(stdout);
	}
	for (i = 0; i < nchildren; i++) {
		kill(children[i], SIGKILL);
		waitpid(children[i], NULL, 0);
	}
	jdb_free(&b);
	return 0;
}

/*
 * symbolizer: perfmap_symbolizer_lookup_frame() on this very process, no
 * BPF: a function under a C++ symbol (an asm label) reads demangled, its
 * symbol kept; the frame carries the test binary's build id (as its
 * PT_NOTE has it) and the address in the file's own terms, with a mapping
 * consistent with the file's PT_LOAD; a caller's smaller or larger struct
 * gets what its size holds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "perfmap_profile.h"
#include "symbolizer.h"
#include "testutil.h"

/* A C function under the symbol of a C++ member: what the symbolizer demangles. */
long grid_lrem(long n, long m) __asm__("_ZN6shapes4Grid4lremEll");
__attribute__((noinline)) long grid_lrem(long n, long m)
{
	long x = 7;

	for (long i = 0; i < n; i++)
		x = (x * 31 + i) % m;
	return x;
}

__attribute__((noinline)) long plain_c(long n);
__attribute__((noinline)) long plain_c(long n)
{
	return n * 3 + 1;
}

/* What the loader says of the main program: its load bias, build id (hex) and PT_LOAD segments. */
struct self {
	uintptr_t bias;
	char build_id[129];
	const ElfW(Phdr) *ph;
	size_t nph;
};

static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct self *me = data;

	(void)size;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0;   /* the main program is the one without a name */
	me->bias = info->dlpi_addr;
	me->ph = info->dlpi_phdr;
	me->nph = info->dlpi_phnum;
	for (size_t i = 0; i < me->nph; i++) {
		const char *p, *end;

		if (me->ph[i].p_type != PT_NOTE)
			continue;
		p = (const char *)(info->dlpi_addr + me->ph[i].p_vaddr);
		end = p + me->ph[i].p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const unsigned char *desc = (const unsigned char *)p + sizeof(*n) + ((n->n_namesz + 3) & ~3u);

			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(p + sizeof(*n), "GNU", 4) && n->n_descsz <= 64) {
				for (size_t k = 0; k < n->n_descsz; k++)
					snprintf(me->build_id + 2 * k, 3, "%02x", desc[k]);
				return 1;
			}
			p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

/* The file offset of @vaddr (the file's own address), through its PT_LOAD. */
static uint64_t file_off_of(const struct self *me, uint64_t vaddr)
{
	for (size_t i = 0; i < me->nph; i++)
		if (me->ph[i].p_type == PT_LOAD && vaddr >= me->ph[i].p_vaddr &&
		    vaddr < me->ph[i].p_vaddr + me->ph[i].p_filesz)
			return vaddr - me->ph[i].p_vaddr + me->ph[i].p_offset;
	fail_msg("0x%llx in no PT_LOAD", (unsigned long long)vaddr);
	return 0;
}

static void test_frame_of_native_code(void **state)
{
	struct perfmap_symbolizer *s = perfmap_symbolizer_new(NULL);
	uint64_t at = (uintptr_t)&grid_lrem + 4;
	struct perfmap_frame f = { .sz = sizeof(f) };
	struct perfmap_symbol sym;
	struct self me = { 0 };

	(void)state;
	assert_non_null(s);
	dl_iterate_phdr(on_object, &me);
	if (!me.build_id[0])
		skip();   /* linked without --build-id */
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX, at, &f), 0);
	assert_string_equal(f.sym.name, "_ZN6shapes4Grid4lremEll");
	assert_string_equal(f.demangled, "shapes::Grid::lrem(long, long)");
	assert_int_equal(f.sym.offset, 4);
	assert_int_equal(f.sym.state, PERFMAP_STATE_NATIVE);
	assert_non_null(f.build_id);
	assert_string_equal(f.build_id, me.build_id);
	assert_true(f.in_file);
	/* The address as the file's symbols have it: the process's less the load bias. */
	assert_int_equal(f.file_addr, at - me.bias);
	assert_true(f.map_start <= f.file_addr && f.file_addr < f.map_limit);
	/* As pprof reads a Mapping: address - start + offset is the byte's offset in the file. */
	assert_int_equal(f.file_addr - f.map_start + f.map_offset, file_off_of(&me, f.file_addr));
	/* The old call is as it was: the symbol as the file has it. */
	assert_int_equal(perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX, at, &sym), 0);
	assert_string_equal(sym.name, "_ZN6shapes4Grid4lremEll");
	/* A C name is its own demangled name. */
	f = (struct perfmap_frame){ .sz = sizeof(f) };
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX,
							 (uintptr_t)&plain_c, &f), 0);
	assert_string_equal(f.sym.name, "plain_c");
	assert_ptr_equal(f.demangled, f.sym.name);
	assert_int_equal(f.file_addr, (uintptr_t)&plain_c - me.bias);
	/* The kernel's code in user space is named by its mapping, [vdso], no file to read. */
	assert_int_equal(perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX,
							 getauxval(AT_SYSINFO_EHDR) + 16, &sym), -ENOENT);
	assert_string_equal(sym.module, "[vdso]");
	assert_int_equal(sym.offset, 16);
	perfmap_symbolizer_free(s);
}

static void test_callers_sizes(void **state)
{
	struct perfmap_symbolizer *s = perfmap_symbolizer_new(NULL);
	uint64_t at = (uintptr_t)&grid_lrem;
	const size_t old = offsetof(struct perfmap_frame, demangled);
	_Alignas(struct perfmap_frame) unsigned char big[sizeof(struct perfmap_frame) + 16];
	struct perfmap_frame f;
	unsigned char *b = (unsigned char *)&f;

	(void)state;
	assert_non_null(s);
	/* Too small for the symbol: refused, nothing written past sz. */
	memset(&f, 0xa5, sizeof(f));
	f.sz = sizeof(f.sz);
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX, at, &f), -EINVAL);
	for (size_t i = sizeof(f.sz); i < sizeof(f); i++)
		assert_int_equal(b[i], 0xa5);
	/* A caller whose struct ends at sym: sym filled, nothing after. */
	memset(&f, 0xa5, sizeof(f));
	f.sz = old;
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX, at, &f), 0);
	assert_string_equal(f.sym.name, "_ZN6shapes4Grid4lremEll");
	for (size_t i = old; i < sizeof(f); i++)
		assert_int_equal(b[i], 0xa5);
	/* A newer caller's larger struct: what this library does not know is zeroed. */
	memset(big, 0xa5, sizeof(big));
	f.sz = sizeof(big);
	memcpy(big, &f.sz, sizeof(f.sz));
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX, at,
							 (struct perfmap_frame *)(void *)big), 0);
	memcpy(&f, big, sizeof(f));
	assert_string_equal(f.demangled, "shapes::Grid::lrem(long, long)");
	for (size_t i = sizeof(f); i < sizeof(big); i++)
		assert_int_equal(big[i], 0);
	assert_int_equal(perfmap_symbolizer_lookup_frame(s, getpid(), 0, UINT32_MAX, at, NULL), -EINVAL);
	perfmap_symbolizer_free(s);
}

/*
 * A read keeps the executable mappings an earlier read had that are gone
 * since and overlap none now (V8 unmaps its code before it exits: the last
 * read must not lose what every sample ran in); a mapping now at their
 * place wins; a read of a process gone leaves the last one as it was.
 */
static void test_reread_keeps_unmapped_code(void **state)
{
	struct perfmap_symbolizer *s = perfmap_symbolizer_new(NULL);
	struct perfmap_symbol sym;
	char *a, *b;
	int fd;

	(void)state;
	assert_non_null(s);
	a = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* Writable too, so that the kernel does not merge it with a: two mappings. */
	b = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(a != MAP_FAILED && b != MAP_FAILED);
	assert_int_equal(perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX,
							 (uintptr_t)a + 16, &sym), -ENOENT);
	assert_int_equal(sym.state, PERFMAP_STATE_UNNAMED);
	assert_string_equal(sym.module, "[anon]");

	/* a's first page unmapped, its second now a file's: read again. */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(munmap(a, 4096), 0);
	assert_true(mmap(a + 4096, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0) ==
		    a + 4096);
	close(fd);
	assert_int_equal(munmap(b, 4096), 0);
	assert_int_equal(perfmap_prof__symbolizer_read(s, getpid(), 0, PSNAP_LATEST, 0), 0);
	/* b, unmapped and nothing there now: kept. */
	assert_int_equal(perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX,
							 (uintptr_t)b + 8, &sym), -ENOENT);
	assert_int_equal(sym.state, PERFMAP_STATE_UNNAMED);
	assert_string_equal(sym.module, "[anon]");
	/* a's first page: the earlier mapping overlapped the file's page, so it is not kept. */
	perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX, (uintptr_t)a + 16, &sym);
	assert_string_not_equal(sym.module, "[anon]");
	/* a's second page: the file's. */
	perfmap_symbolizer_lookup_image(s, getpid(), 0, UINT32_MAX, (uintptr_t)a + 4096 + 16, &sym);
	assert_string_not_equal(sym.module, "[anon]");
	assert_string_not_equal(sym.module, "[unknown]");
	munmap(a + 4096, 4096);
	perfmap_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_of_native_code),
		cmocka_unit_test(test_callers_sizes),
		cmocka_unit_test(test_reread_keeps_unmapped_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

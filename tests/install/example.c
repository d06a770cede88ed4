/* The README's example: a tiny JIT naming its code for perf. Built against the installed library. */
#include <perfmap.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
	static const unsigned char ret[] = { 0xc3 };  /* x86-64 "ret" */
	unsigned char *code;
	struct perfmap_entry batch[2];

	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	memcpy(code, ret, sizeof(ret));
	memcpy(code + 16, ret, sizeof(ret));
	memcpy(code + 32, ret, sizeof(ret));
	mprotect(code, 4096, PROT_READ | PROT_EXEC);

	/* One function: one whole line, safe from any thread. */
	if (perfmap_write_entry(code, 1, "jit::hello")) {
		perror("perfmap_write_entry");
		return 1;
	}
	/* Many at once: as few write() calls as whole lines allow. */
	batch[0] = (struct perfmap_entry){ code + 16, 1, "jit::add" };
	batch[1] = (struct perfmap_entry){ code + 32, 1, "jit::mul" };
	if (perfmap_write_entries(batch, 2)) {
		perror("perfmap_write_entries");
		return 1;
	}
	/* Children forked from now on start with these names in their own map. */
	perfmap_set_persist_after_fork(1);
	perfmap_fini();
	return 0;
}

/* The test JITs' generated code: a counting loop, machine code written into executable memory. */
#ifndef PERFMAPD_TEST_JITLOOP_H
#define PERFMAPD_TEST_JITLOOP_H

#include <stdint.h>
#include <string.h>

/* uint64_t f(uint64_t n): counts n down to 0 and returns; the hot code a profiler must name. */
static inline void emit_loop(unsigned char *p)
{
#if defined(__x86_64__)
	static const unsigned char code[] = {
		0x48, 0x89, 0xf8,  /* mov rax, rdi */
		0x48, 0xff, 0xc8,  /* 1: dec rax */
		0x75, 0xfb,        /* jnz 1b */
		0xc3,              /* ret */
	};
#elif defined(__aarch64__)
	static const uint32_t code[] = {
		0xf1000400,        /* 1: subs x0, x0, #1 */
		0x54ffffe1,        /* b.ne 1b */
		0xd65f03c0,        /* ret */
	};
#else
#error "no code generator for this architecture"
#endif
	memcpy(p, code, sizeof(code));
}

#endif /* PERFMAPD_TEST_JITLOOP_H */

/*
 * C++ and Rust symbols as people read them, as perf report -v shows them:
 * libiberty's demangler (Itanium C++; Rust legacy, its ::h<hash> dropped,
 * and v0), C++ with parameters and qualifiers, which keep overloads apart
 * (perf without -v drops them), bounded. A mangled name is a file's bytes, and
 * the demangler's output can grow exponentially with its input (a 267-byte
 * C++ name of nested substitutions prints 218 MB in a second): the output
 * is taken through libiberty's allocation-free callback interface and the
 * demangler is left (longjmp) at DEMANGLED_MAX, the name cut with a marker.
 */
#include <libiberty/demangle.h>
#include <setjmp.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

/* As perf -v: parameters (DMGL_PARAMS) and const, volatile (DMGL_ANSI). */
#define DEMANGLE_OPTS (DMGL_PARAMS | DMGL_ANSI)
#define CUT_MARKER "[...]"

struct out {
	char *buf;
	size_t room;               /* what the name may take of @buf */
	volatile size_t len;       /* volatile: read after the longjmp */
	volatile bool cut;
	bool rust;
	jmp_buf leave;
};

/* No byte past ASCII: the Rust demangler's output that comes from no allocation of its own. */
static bool ascii(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			return false;
	return true;
}

/*
 * The demangler's output, in pieces. Past the bound the name is cut and the
 * demangler left: its C++ side allocates nothing in callback mode (its state
 * is on the stack we jump over), nor does its Rust side but for a v0
 * identifier's punycode, whose decoded (non-ASCII) text it prints from a
 * buffer it frees after: that piece is not jumped out of, the next is.
 */
static void put(const char *s, size_t n, void *opaque)
{
	struct out *o = opaque;
	size_t len = o->len, take;

	if (!o->cut) {
		take = n < o->room - len ? n : o->room - len;
		memcpy(o->buf + len, s, take);
		o->len = len + take;
		if (take < n)
			o->cut = true;
	}
	if (o->cut && (!o->rust || ascii(s, n)))
		longjmp(o->leave, 1);
}

/* Back from @len to the start of a UTF-8 sequence: a cut name stays valid text. */
static size_t utf8_floor(const char *s, size_t len)
{
	size_t i = len;

	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0 && (unsigned char)s[i - 1] >= 0xc0) {
		/* A lead byte: is its sequence whole within @len? */
		unsigned char c = (unsigned char)s[i - 1];
		size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

		return len - (i - 1) >= need ? len : i - 1;
	}
	return len;
}

/* One demangler over @name into @o; true when it took the name (whole, or cut at the bound). */
static bool run(struct out *o, const char *name, bool rust)
{
	int ok;

	o->len = 0;
	o->cut = false;
	o->rust = rust;
	if (setjmp(o->leave))
		return true;
	if (rust)
		ok = rust_demangle_callback(name, DEMANGLE_OPTS, put, o);
	else
		ok = cplus_demangle_v3_callback(name, DEMANGLE_OPTS, put, o);
	return ok && o->len;
}

const char *perfmap_prof__demangle(const char *name, char *buf, size_t len)
{
	struct out o = { .buf = buf };
	size_t n;

	if (!name || len < sizeof(CUT_MARKER) + 1 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* A longer name stays as it is (DEMANGLE_IN_MAX). */
	if (strnlen(name, DEMANGLE_IN_MAX + 1) > DEMANGLE_IN_MAX)
		return NULL;
	o.room = (len > DEMANGLED_MAX + 1 ? DEMANGLED_MAX + 1 : len) - 1;
	/* Rust first, as libiberty's own cplus_demangle(): a legacy Rust name is also a C++ one. */
	if (!run(&o, name, true) && !run(&o, name, false))
		return NULL;
	n = o.len;
	if (o.cut) {
		n = utf8_floor(buf, o.room - (sizeof(CUT_MARKER) - 1));
		memcpy(buf + n, CUT_MARKER, sizeof(CUT_MARKER) - 1);
		n += sizeof(CUT_MARKER) - 1;
	}
	buf[n] = '\0';
	return buf;
}

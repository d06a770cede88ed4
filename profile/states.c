/*
 * Which native code is a runtime's interpreter loop (I) or its garbage
 * collector (G): one table of symbol patterns (fnmatch), runtime by runtime,
 * which a user extends with a file of "I PATTERN" and "G PATTERN" lines
 * (--states FILE). Symbols are matched as the ELF file has them (C++ names
 * mangled). The first pattern that matches decides; the user's come first.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct state_pat {
	char state;
	const char *pattern;
};

static const struct state_pat builtin[] = {
	/* CPython */
	{ 'I', "_PyEval_EvalFrameDefault" },
	{ 'I', "_PyEval_EvalFrame" },
	{ 'G', "gc_collect_main" },
	{ 'G', "gc_collect_region" },
	{ 'G', "_PyGC_Collect*" },
	{ 'G', "visit_reachable" },
	{ 'G', "subtract_refs" },
	{ 'G', "move_unreachable" },
	/* Node (V8): the ignition interpreter's builtins, the heap's collectors */
	{ 'I', "Builtins_InterpreterEntryTrampoline" },
	{ 'I', "Builtins_*Handler" },
	{ 'I', "Builtins_InterpreterEnterAtBytecode" },
	{ 'G', "_ZN2v88internal4Heap*" },
	{ 'G', "_ZN2v88internal*MarkCompact*" },
	{ 'G', "_ZN2v88internal*Scaveng*" },
	{ 'G', "_ZN2v88internal*Sweeper*" },
	{ 'G', "_ZN2v88internal*Marking*" },
	/* Ruby */
	{ 'I', "vm_exec_core" },
	{ 'I', "rb_vm_exec" },
	{ 'G', "gc_mark*" },
	{ 'G', "gc_sweep*" },
	{ 'G', "gc_start*" },
	{ 'G', "rb_gc_*" },
	/* LuaJIT */
	{ 'I', "lj_BC_*" },
	{ 'I', "lj_vm_*" },
	{ 'G', "lj_gc_*" },
	{ 'G', "gc_onestep" },
	/* PyPy */
	{ 'G', "pypy_g_IncrementalMiniMarkGC_*" },
	/* HotSpot */
	{ 'I', "_ZN19TemplateInterpreter*" },
	{ 'I', "_ZN15BytecodeInterpreter*" },
	{ 'G', "_ZN*G1*" },
	{ 'G', "_ZN*ParallelGC*" },
	{ 'G', "_ZN*ZCollect*" },
	/* .NET */
	{ 'G', "_ZN3WKS*gc_heap*" },
	{ 'G', "_ZN3SVR*gc_heap*" },
};

struct states {
	struct state_pat *user;    /* from the file, first */
	size_t n;
	char *text;                /* the file's bytes, the patterns point into */
};

static int parse(struct states *s, char *text)
{
	struct state_pat *np;
	char *line, *save = NULL, *p;
	size_t cap = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#')
			continue;
		if ((line[0] != 'I' && line[0] != 'G') || (line[1] != ' ' && line[1] != '\t'))
			return -EINVAL;
		for (p = line + 1; *p == ' ' || *p == '\t'; p++)
			;
		if (!*p)
			return -EINVAL;
		p[strcspn(p, " \t\r")] = '\0';
		if (s->n == cap) {
			cap = cap ? cap * 2 : 16;
			np = realloc(s->user, cap * sizeof(*np));
			if (!np)
				return -ENOMEM;
			s->user = np;
		}
		s->user[s->n++] = (struct state_pat){ line[0], p };
	}
	return 0;
}

struct states *perfmap_prof__states_load(const char *path, int *err)
{
	struct states *s = calloc(1, sizeof(*s));
	size_t len = 0;
	FILE *f;

	*err = 0;
	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	if (!path)
		return s;
	f = fopen(path, "re");
	if (!f) {
		*err = -errno;
		goto free_states;
	}
	s->text = calloc(1, 1 << 20);
	if (s->text)
		len = fread(s->text, 1, (1 << 20) - 1, f);
	fclose(f);
	if (!s->text) {
		*err = -ENOMEM;
		goto free_states;
	}
	s->text[len] = '\0';
	*err = parse(s, s->text);
	if (*err)
		goto free_states;
	return s;
free_states:
	perfmap_prof__states_free(s);
	return NULL;
}

char perfmap_prof__states_of(const struct states *s, const char *name)
{
	size_t i;

	if (!name)
		return 0;
	for (i = 0; s && i < s->n; i++)
		if (!fnmatch(s->user[i].pattern, name, 0))
			return s->user[i].state;
	for (i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (!fnmatch(builtin[i].pattern, name, 0))
			return builtin[i].state;
	return 0;
}

void perfmap_prof__states_free(struct states *s)
{
	if (!s)
		return;
	free(s->user);
	free(s->text);
	free(s);
}

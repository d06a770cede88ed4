/*
 * A module's sized symbols sorted by address, to make libdwfl's choice of
 * symbol for an address without its scan of the whole table at each
 * lookup (symindex.c); not installed.
 */
#ifndef PERFMAP_PROFILE_SYMINDEX_H
#define PERFMAP_PROFILE_SYMINDEX_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>

#include "internal.h"

struct symindex;

/* @mod's symbols indexed, NULL with errno (ENOENT: it has no symbol table). */
PROF_HIDDEN struct symindex *perfmap_prof__symindex_build(Dwfl_Module *mod);
/*
 * The symbol dwfl_module_addrinfo() would give for @addr (a module
 * address, its bias in), when the index can tell: true, with *@name, *@off
 * from its start and *@sym as libdwfl gives them (*@name NULL: libdwfl
 * names it nothing, and *@sym is not set). False: the index cannot
 * tell (no sized symbol holds @addr, so libdwfl's choice among sizeless
 * assembly labels applies, or too many symbols overlap there): ask libdwfl.
 */
PROF_HIDDEN bool perfmap_prof__symindex_lookup(const struct symindex *x, Dwfl_Module *mod,
					       GElf_Addr addr, const char **name, GElf_Off *off,
					       GElf_Sym *sym);
PROF_HIDDEN void perfmap_prof__symindex_free(struct symindex *x);

#endif /* PERFMAP_PROFILE_SYMINDEX_H */

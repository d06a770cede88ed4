# The tree's one direction (docs/hacking.md), checked in `make test`; no root.
#   rooms.py     agent/'s rooms: no include of a room above, nor of another room's private header
#   includes.py  no circle of #include between headers, in agent, perfmap, profile and ctl
#   calls.py     no circle of calls between source files, from the objects' symbol tables (nm):
#                each program's objects apart, so that a name two products define is not mixed up
# selftest.sh first shows each of them failing on a tree made to break its rule.
LAYERING_OBJS = $(AGENTD_OBJS) $(LIB_OBJS) $(PROF_OBJS) $(CTL_OBJS)

layering-test: $(LAYERING_OBJS)
	@CC=$(CC) bash tests/layering/selftest.sh
	@python3 tests/layering/rooms.py .
	@python3 tests/layering/includes.py .
	@python3 tests/layering/calls.py $(AGENTD_OBJS) $(LIB_OBJS)
	@python3 tests/layering/calls.py $(CTL_OBJS) $(PROF_OBJS) $(LIB_OBJS)

.PHONY: layering-test

# perfmapd: build, install and test libperfmap, perfmapctl and the perfmapd agent.
#
#   make               build/ : libperfmap.a, libperfmap.so, perfmap.pc, perfmapctl,
#                      perfmapd (BPF object and skeleton in build/bpf/)
#   make deps          install missing Debian build and test packages
#   make test          deps, build, every test (unit, ASan+UBSan, CLI, clang, fuzz,
#                      install, man pages, and the agent's integration tests, on the plain
#                      agent and on an ASan+UBSan one: root and BPF)
#   make bench         the writer beside write() and CPython; the agent's latency and
#                      cost to the host, with and without it (root)
#   make fuzz          a longer run of each libFuzzer target (FUZZ_SECONDS=300 each)
#   make install       PREFIX=/usr/local DESTDIR= (man pages in $(PREFIX)/share/man/man8,
#                      the systemd units in $(PREFIX)/lib/systemd/system)
#   make run           deps, build, run the agent in the foreground

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man
# /usr/local/lib/systemd/system is on systemd's search path.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR ?=

ifeq ($(origin CC),default)
CC := gcc
endif
CLANG ?= clang
BPFTOOL ?= $(or $(shell command -v bpftool 2>/dev/null),/usr/sbin/bpftool)
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
O ?= build

VERSION := 0.1.0
SOVERSION := 0

CFLAGS ?= -O2 -g
LDFLAGS ?=
WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wundef
# Each object's header dependencies, from the compiler (-MMD -MP).
BASE_CFLAGS := -std=gnu11 $(WARNINGS) -D_GNU_SOURCE -pthread -MMD -MP
# A room per product: the library sees its internals; the tools see only its
# public header and perfmap_tools.h, the interface it offers them.
LIB_INCLUDES := -Iperfmap/include -Iperfmap
AGENT_INCLUDES := -Iperfmap/include -Iagent -Ibpf -I$(O)/bpf
CTL_INCLUDES := -Iperfmap/include -Iprofile/include -Ictl -I$(O)/proto
# libperfmap-profile sees libperfmap's tools interface, its BPF object's header and skeleton.
PROF_INCLUDES := -Iprofile/include -Iprofile -Iperfmap/include -Ibpf -I$(O)/bpf
# Only the PERFMAP_API functions leave the shared library.
LIB_CFLAGS := -fPIC -fvisibility=hidden

# Quiet by default; V=1 shows every command.
V ?=
ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

LIB_SRCS := $(wildcard perfmap/*.c)
PROF_SRCS := $(wildcard profile/*.c)
CTL_SRCS := $(wildcard ctl/*.c)
# The agent's rooms (docs/hacking.md): main.c and one folder per role.
AGENT_ROOMS := lib policy archive mirror in store report daemon
AGENTD_SRCS := agent/main.c $(foreach r,$(AGENT_ROOMS),$(wildcard agent/$(r)/*.c))

LIB_OBJS := $(LIB_SRCS:%.c=$(O)/obj/%.o)
PROF_OBJS := $(PROF_SRCS:%.c=$(O)/obj/%.o)
CTL_OBJS := $(CTL_SRCS:%.c=$(O)/obj/%.o)
AGENTD_OBJS := $(AGENTD_SRCS:%.c=$(O)/obj/%.o)
# perfmapctl --json writes through json-c (see scripts/deps.sh for why).
JSON_CFLAGS := $(shell pkg-config --cflags json-c 2>/dev/null)
JSON_LIBS := $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)
# perfmapctl profile --push sends through libcurl (see scripts/deps.sh for why).
CURL_CFLAGS := $(shell pkg-config --cflags libcurl 2>/dev/null)
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

# BPF: vmlinux.h from the running kernel's BTF, CO-RE object, skeleton.
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' \
	-e 's/ppc64le/powerpc/' -e 's/s390x/s390/' -e 's/riscv64/riscv/')
BPF_DIR := $(O)/bpf
VMLINUX_H := $(BPF_DIR)/vmlinux.h
BPF_OBJ := $(BPF_DIR)/perfmapd.bpf.o
BPF_SKEL := $(BPF_DIR)/perfmapd.skel.h
AGENTD := $(O)/perfmapd
# The agent drops its capabilities with libcap-ng (see scripts/deps.sh for why).
CAPNG_CFLAGS := $(shell pkg-config --cflags libcap-ng 2>/dev/null)
CAPNG_LIBS := $(shell pkg-config --libs libcap-ng 2>/dev/null || echo -lcap-ng)
# The metrics endpoint is served by libmicrohttpd (see scripts/deps.sh for why).
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
BPF_LIBS := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf -lelf -lz)
AGENTD_LIBS := $(BPF_LIBS) $(CAPNG_LIBS) $(MHD_LIBS)
# The profiler names native code with elfutils' libdwfl (see scripts/deps.sh for why).
DW_LIBS := $(shell pkg-config --libs libdw 2>/dev/null || echo -ldw -lelf)
# It demangles C++ and Rust names with libiberty's demangler, as perf does (no .pc: Debian's libiberty-dev, PIC).
IBERTY_LIBS := -liberty
PROF_LIBS := $(BPF_LIBS) $(DW_LIBS) $(IBERTY_LIBS)
# What perfmapctl links beside its own objects and the two libraries.
CTL_LIBS = $(JSON_LIBS) $(PROF_LIBS) $(PROTOBUF_LIBS) $(CURL_LIBS) -lz
PROF_BPF_OBJ := $(BPF_DIR)/profile.bpf.o
PROF_SKEL := $(BPF_DIR)/profile.skel.h

LIBA := $(O)/libperfmap.a
LIBSO_REAL := $(O)/libperfmap.so.$(VERSION)
LIBSO := $(O)/libperfmap.so
PC := $(O)/perfmap.pc
PROF_VERSION := 0.1.0
PROF_A := $(O)/libperfmap-profile.a
PROF_SO_REAL := $(O)/libperfmap-profile.so.$(PROF_VERSION)
PROF_SO := $(O)/libperfmap-profile.so
PROF_PC := $(O)/perfmap-profile.pc
CTL := $(O)/perfmapctl

.PHONY: all deps lib install uninstall clean run test unit unit-asan cli \
	clang-build fuzz fuzz-short install-test bench

all: $(LIBA) $(LIBSO) $(PC) $(PROF_A) $(PROF_SO) $(PROF_PC) $(CTL) $(AGENTD)
lib: $(LIBA) $(LIBSO) $(PC) $(PROF_A) $(PROF_SO) $(PROF_PC)

deps:
	@sh scripts/deps.sh

$(O)/obj/perfmap/%.o: perfmap/%.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(LIB_INCLUDES) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

$(O)/obj/agent/%.o: agent/%.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(AGENT_INCLUDES) $(CAPNG_CFLAGS) $(MHD_CFLAGS) $(CFLAGS) -c $< -o $@

$(O)/obj/profile/%.o: profile/%.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(PROF_INCLUDES) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

$(O)/obj/profile/sampler.o: $(PROF_SKEL)

# pprof's profile.proto, and the push APIs of Pyroscope and Parca, compiled by
# protoc-c (see scripts/deps.sh for why).
PROTOS := profile push profilestore
PROTO_C := $(PROTOS:%=$(O)/proto/%.pb-c.c)
PROTO_H := $(PROTOS:%=$(O)/proto/%.pb-c.h)
PROTO_OBJ := $(PROTOS:%=$(O)/obj/proto/%.pb-c.o)
PROTOBUF_CFLAGS := $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
PROTOBUF_LIBS := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)

$(O)/proto/%.pb-c.c $(O)/proto/%.pb-c.h &: ctl/proto/%.proto
	@mkdir -p $(@D)
	$(call msg,PROTOC,$@)
	$(Q)protoc-c --c_out=$(O)/proto -Ictl/proto $<

$(O)/obj/proto/%.pb-c.o: $(O)/proto/%.pb-c.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE $(PROTOBUF_CFLAGS) $(CFLAGS) -I$(O)/proto -c $< -o $@

$(O)/obj/ctl/profile_pprof.o $(O)/obj/ctl/profile_push.o $(O)/obj/ctl/profile_push_encode.o: $(PROTO_H)

$(O)/obj/ctl/%.o: ctl/%.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(CTL_INCLUDES) $(JSON_CFLAGS) $(CURL_CFLAGS) $(CFLAGS) -c $< -o $@

# The skeleton is generated: events.c needs it before its first compile.
$(O)/obj/agent/in/events.o: $(BPF_SKEL)

-include $(LIB_OBJS:.o=.d) $(PROF_OBJS:.o=.d) $(CTL_OBJS:.o=.d) $(AGENTD_OBJS:.o=.d)

$(VMLINUX_H):
	@mkdir -p $(@D)
	@test -r $(VMLINUX_BTF) || { echo "perfmapd: $(VMLINUX_BTF) missing: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF)" >&2; exit 1; }
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp
	$(Q)mv $@.tmp $@

$(BPF_OBJ): bpf/perfmapd.bpf.c bpf/perfmapd_event.h $(VMLINUX_H)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
		-I$(BPF_DIR) -Ibpf -c $< -o $@

$(BPF_SKEL): $(BPF_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name perfmapd_bpf > $@.tmp
	$(Q)mv $@.tmp $@

$(PROF_BPF_OBJ): bpf/profile.bpf.c bpf/profile_event.h $(VMLINUX_H)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
		-I$(BPF_DIR) -Ibpf -c $< -o $@

$(PROF_SKEL): $(PROF_BPF_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name profile_bpf > $@.tmp
	$(Q)mv $@.tmp $@

# The static library holds the profiler alone (link libperfmap.a after it); the
# shared one holds what it uses of libperfmap too, hidden, and exports PERFMAP_PROFILE_API only.
$(PROF_A): $(PROF_OBJS)
	@rm -f $@
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(PROF_SO_REAL): $(PROF_OBJS) $(LIB_OBJS) profile/libperfmap-profile.map
	$(call msg,LINK,$@)
	$(Q)$(CC) -shared -pthread -Wl,-soname,libperfmap-profile.so.0 -Wl,-z,defs \
		-Wl,--version-script=profile/libperfmap-profile.map \
		$(LDFLAGS) -o $@ $(PROF_OBJS) $(LIB_OBJS) $(PROF_LIBS)

$(PROF_SO): $(PROF_SO_REAL)
	ln -sf libperfmap-profile.so.$(PROF_VERSION) $(O)/libperfmap-profile.so.0
	ln -sf libperfmap-profile.so.$(PROF_VERSION) $@

$(PROF_PC): profile/perfmap-profile.pc.in Makefile
	@mkdir -p $(@D)
	$(PC_SED) -e 's|@PROF_VERSION@|$(PROF_VERSION)|' $< > $@

$(AGENTD): $(AGENTD_OBJS) $(LIBA)
	$(call msg,LINK,$@)
	$(Q)$(CC) -pthread $(LDFLAGS) -o $@ $(AGENTD_OBJS) $(LIBA) $(AGENTD_LIBS)

$(LIBA): $(LIB_OBJS)
	@rm -f $@
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(LIBSO_REAL): $(LIB_OBJS) perfmap/libperfmap.map
	$(call msg,LINK,$@)
	$(Q)$(CC) -shared -pthread -Wl,-soname,libperfmap.so.$(SOVERSION) \
		-Wl,--version-script=perfmap/libperfmap.map -Wl,-z,defs \
		$(LDFLAGS) -o $@ $(LIB_OBJS)

$(LIBSO): $(LIBSO_REAL)
	ln -sf libperfmap.so.$(VERSION) $(O)/libperfmap.so.$(SOVERSION)
	ln -sf libperfmap.so.$(VERSION) $@

PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|'

$(PC): perfmap/perfmap.pc.in Makefile
	@mkdir -p $(@D)
	$(PC_SED) $< > $@

# Tools link the static library: one self-contained binary per host.
$(CTL): $(CTL_OBJS) $(PROTO_OBJ) $(PROF_A) $(LIBA)
	$(call msg,LINK,$@)
	$(Q)$(CC) -pthread $(LDFLAGS) -o $@ $(CTL_OBJS) $(PROTO_OBJ) $(PROF_A) $(LIBA) $(CTL_LIBS)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(CTL) $(DESTDIR)$(BINDIR)/perfmapctl
	install -m 0755 $(AGENTD) $(DESTDIR)$(BINDIR)/perfmapd
	install -m 0644 perfmap/include/perfmap.h $(DESTDIR)$(INCLUDEDIR)/perfmap.h
	install -m 0644 profile/include/perfmap_profile.h $(DESTDIR)$(INCLUDEDIR)/perfmap_profile.h
	install -m 0644 $(PROF_A) $(DESTDIR)$(LIBDIR)/libperfmap-profile.a
	install -m 0755 $(PROF_SO_REAL) $(DESTDIR)$(LIBDIR)/libperfmap-profile.so.$(PROF_VERSION)
	ln -sf libperfmap-profile.so.$(PROF_VERSION) $(DESTDIR)$(LIBDIR)/libperfmap-profile.so.0
	ln -sf libperfmap-profile.so.$(PROF_VERSION) $(DESTDIR)$(LIBDIR)/libperfmap-profile.so
	$(PC_SED) -e 's|@PROF_VERSION@|$(PROF_VERSION)|' profile/perfmap-profile.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/perfmap-profile.pc
	install -m 0644 man/perfmapd.8 man/perfmapctl.8 $(DESTDIR)$(MANDIR)/man8/
	@# The units run the binaries where BINDIR put them (deploy/README.md).
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	for u in perfmapd perfmapd-profile; do \
		sed 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' deploy/systemd/$$u.service \
			> $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service && chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service || exit 1; \
	done
	install -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/libperfmap.a
	install -m 0755 $(LIBSO_REAL) $(DESTDIR)$(LIBDIR)/libperfmap.so.$(VERSION)
	ln -sf libperfmap.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libperfmap.so.$(SOVERSION)
	ln -sf libperfmap.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libperfmap.so
	@# Written afresh: build/perfmap.pc may hold the PREFIX of an earlier make.
	$(PC_SED) perfmap/perfmap.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/perfmap.pc

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/perfmapctl $(DESTDIR)$(BINDIR)/perfmapd \
		$(DESTDIR)$(INCLUDEDIR)/perfmap.h $(DESTDIR)$(INCLUDEDIR)/perfmap_profile.h \
		$(DESTDIR)$(LIBDIR)/libperfmap.a $(DESTDIR)$(LIBDIR)/libperfmap.so* \
		$(DESTDIR)$(LIBDIR)/libperfmap-profile.a $(DESTDIR)$(LIBDIR)/libperfmap-profile.so* \
		$(DESTDIR)$(PKGCONFIGDIR)/perfmap.pc $(DESTDIR)$(PKGCONFIGDIR)/perfmap-profile.pc \
		$(DESTDIR)$(MANDIR)/man8/perfmapd.8 $(DESTDIR)$(MANDIR)/man8/perfmapctl.8 \
		$(DESTDIR)$(SYSTEMDUNITDIR)/perfmapd.service $(DESTDIR)$(SYSTEMDUNITDIR)/perfmapd-profile.service

clean:
	rm -rf $(O)

# The agent in the foreground; RUN_ARGS passes options (RUN_ARGS="--log-level debug").
RUN_ARGS ?=
run: deps
	@$(MAKE) --no-print-directory all
	exec $(AGENTD) $(RUN_ARGS)

include tests/tests.mk

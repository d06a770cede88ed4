/*
 * Which sources of executable mappings load here. A BPF-LSM program on
 * file_mprotect/mmap_file, or fentry programs on the mmap, mprotect and
 * munmap paths, would see every change (munmap too) at a cost only to those
 * calls; kprobes likewise. Production kernels often allow them; the ones
 * here refuse the first two and lack the third. The agent uses
 * PERF_RECORD_MMAP2 (execmap.c) and /proc; the probe says what else would
 * load, so that an operator knows what a kernel offers.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "in/execprobe.h"

/* "ok", or the error's name as the kernel gave it. */
static const char *word(int err)
{
	switch (err) {
	case 0: return "ok";
	case -EPERM: return "EPERM";
	case -EACCES: return "EACCES";
	case -EINVAL: return "EINVAL";
	case -ENOENT: return "absent";
	case -EOPNOTSUPP: case -524 /* the kernel's ENOTSUPP */: return "unsupported";
	default: return "failed";
	}
}

/* Load "return 0" as @type at the kernel function @func; 0 or -errno. */
static int try_load(struct btf *vmlinux, enum bpf_prog_type type,
		    enum bpf_attach_type attach, const char *func)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach);
	int id, fd;

	if (!vmlinux)
		return -ENOENT;
	id = btf__find_by_name_kind(vmlinux, func, BTF_KIND_FUNC);
	if (id < 0)
		return -ENOENT;
	opts.attach_btf_id = (__u32)id;
	fd = bpf_prog_load(type, "perfmapd_probe", "GPL", insns, 2, &opts);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

void execprobe_describe(char *buf, size_t len, int perf_err)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int lsm, fentry, kprobe;

	if (libbpf_get_error(vmlinux))
		vmlinux = NULL;
	lsm = try_load(vmlinux, BPF_PROG_TYPE_LSM, BPF_LSM_MAC, "bpf_lsm_file_mprotect");
	fentry = try_load(vmlinux, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, "do_mprotect_pkey");
	kprobe = access("/sys/bus/event_source/devices/kprobe/type", F_OK) ? -ENOENT : 0;
	snprintf(buf, len, "bpf-lsm=%s fentry=%s kprobe=%s perf-mmap2=%s", word(lsm), word(fentry),
		 word(kprobe), word(perf_err));
	btf__free(vmlinux);
}

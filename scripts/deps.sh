#!/bin/sh
# Installs the Debian packages perfmapd needs to build and test, and only those missing.
#
# `make deps` runs this. It is a no-op (no apt-get at all) when everything is
# present, so `make test` stays quick and works offline on a prepared machine.
set -eu

# Build: C toolchains (gcc and clang must both build warning-free), pkg-config
# for the installed perfmap.pc. Test: cmocka for unit tests, compiler-rt for
# ASan/UBSan and libFuzzer under clang, llvm for llvm-symbolizer in reports.
# perfmapctl: json-c writes `status --json` (escaping and number formatting
# are where hand-written JSON goes wrong; json-c is maintained and in Debian).
# Agent: libbpf (with libelf and zlib) to load the BPF program, bpftool for
# vmlinux.h and the skeleton; libcap-ng to drop every capability but the few it
# keeps once BPF is attached (Debian's, small, and its API sets the bounding
# and ambient sets as well as the usual three). Integration tests: perf itself (linux-perf),
# python3 to read `perfmapctl status --json` back; podman and runc run the container
# tests' containers (crun, podman's default, refuses a hybrid cgroup layout) and
# build the agent's image (make image-test); catatonit is podman's --init, which
# the container exec test needs (a namespace's init cannot stop itself), and
# only a Recommends of podman's, which --no-install-recommends leaves out;
# uidmap (newuidmap, newgidmap) lets the container suite's podman_rootless run
# rootless podman as a user with a subordinate id range. Deployment tests: systemd for
# `systemd-analyze verify` of the unit (make unit-file-test).
# perfmapctl profile: elfutils' libdw (libdwfl) names native code by its ELF
# symbols and DWARF lines, separate debug files and build ids included (a
# maintained reader of both formats, rather than a hand-written one); bpftrace
# is one of the profilers its benchmark runs beside it. Its pprof output is
# encoded by protobuf-c from pprof's profile.proto (protoc-c at build time: a
# maintained protobuf implementation for C), and read back in the tests by
# go tool pprof (golang-go). libiberty-dev: libiberty's demangler names C++ and
# Rust symbols as perf shows them (a maintained demangler); the tests profile a
# C++ (g++) and a Rust (rustc) program. perfmapctl profile --push sends through libcurl
# (libcurl4-openssl-dev: HTTP/1.1 and HTTP/2 with h2c, TLS with the system's
# CAs, proxies, timeouts; a maintained client rather than hand-written HTTP).
# Its tests' Pyroscope and Parca stand-in (tests/profile/receiver): protoc
# (protobuf-compiler) compiles the servers' .proto files, whose well-known
# imports libprotobuf-dev has; curl (HTTP/2 too) drives it in its self-test.
# Metrics: libmicrohttpd serves --metrics-listen (a maintained HTTP library in
# Debian, with connection limits and timeouts, rather than a hand-written
# server); prometheus brings promtool, whose parser checks the scrape in the
# integration tests, and the server that scrapes the agent there for real.
# iproute2 (ip) joins a network namespace to the host with a veth pair: the
# adversarial suite's metrics_flood plays clients there, whose uid the agent
# cannot know (a pod network's).
PACKAGES="make gcc libc6-dev clang llvm libclang-rt-dev pkg-config libcmocka-dev libjson-c-dev
libbpf-dev libelf-dev zlib1g-dev libcap-ng-dev bpftool linux-perf python3 podman runc catatonit systemd
libmicrohttpd-dev prometheus libdw-dev bpftrace libprotobuf-c-dev protobuf-c-compiler golang-go iproute2
libcurl4-openssl-dev libiberty-dev g++ protobuf-compiler libprotobuf-dev curl
uidmap"
# node and npm install and run kubernetes-models, which validates the Kubernetes
# manifests against the API schema (make k8s-test). Only when no npm is on the
# PATH: a node from elsewhere (NodeSource's nodejs bundles npm) serves, and
# Debian's npm package would conflict with it.
if ! command -v npm >/dev/null 2>&1; then
	PACKAGES="$PACKAGES nodejs npm"
fi
# rustc likewise: a rustup toolchain (~/.cargo/bin) serves.
if ! command -v rustc >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/rustc" ]; then
	PACKAGES="$PACKAGES rustc"
fi

missing=""
for p in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done

if [ -z "$missing" ]; then
	echo "deps: all build and test dependencies are installed"
	exit 0
fi

echo "deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "deps: missing packages:$missing; run 'sudo make deps' (no sudo here)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing

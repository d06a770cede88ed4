// Writes a small pprof profile, well-formed or broken in one named way, for the receiver's self-test.
//
// The profile has what perfmapctl profile sends: sample types samples/count and
// cpu/nanoseconds, a cpu/nanoseconds period, time and duration, a mapping with a
// build id and one without (a JIT's), a C++ function with its mangled
// system_name, and NSTACKS distinct stacks whose i-th sample has i+1 samples.
// Standard library only: the wire format is written by hand from pprof's
// profile.proto (proto/pprof/profile.proto here), and read back by the receiver
// and by go tool pprof, so a mistake here is caught there.
//
//	go run mkpprof.go -o FILE [-plain] [-stacks N] [-time NANOS] [-break KIND]
//
// KIND, what the servers' checks must refuse: string0 (string_table[0] not ""),
// mapping-ids, location-ids, function-ids (ids not 1..n), location-zero and
// function-zero (an id of 0), values (a sample with one value for two types),
// sampletype-dash (a sample type named with a '-'), no-sampletypes, old-time (2
// hours ago), invalid-utf8 (a function name), too-many-samples (16001 samples),
// dangling-location (a sample naming location 99, which pprof's parser refuses),
// garbage (not a profile at all), bad-gzip (a gzip header, then nonsense).
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"time"
)

type buf struct{ bytes.Buffer }

func (b *buf) varint(v uint64) {
	for v >= 0x80 {
		b.WriteByte(byte(v) | 0x80)
		v >>= 7
	}
	b.WriteByte(byte(v))
}

func (b *buf) tag(field, wire int) { b.varint(uint64(field<<3 | wire)) }

// u64 writes a varint field; zero is written too (the "ids 0" cases need it).
func (b *buf) u64(field int, v uint64) { b.tag(field, 0); b.varint(v) }

func (b *buf) bytesField(field int, p []byte) { b.tag(field, 2); b.varint(uint64(len(p))); b.Write(p) }

func (b *buf) msg(field int, m *buf) { b.bytesField(field, m.Bytes()) }

func (b *buf) packed(field int, vs []uint64) {
	var p buf
	for _, v := range vs {
		p.varint(v)
	}
	b.bytesField(field, p.Bytes())
}

type strtab struct {
	list []string
	idx  map[string]uint64
}

func (s *strtab) id(v string) uint64 {
	if i, ok := s.idx[v]; ok {
		return i
	}
	s.idx[v] = uint64(len(s.list))
	s.list = append(s.list, v)
	return s.idx[v]
}

func main() {
	out := flag.String("o", "", "output file")
	plain := flag.Bool("plain", false, "write the profile uncompressed (default: gzip)")
	nstacks := flag.Int("stacks", 3, "distinct stacks")
	tnanos := flag.Int64("time", 0, "time_nanos (default: now)")
	brk := flag.String("break", "", "what to break (see the file's comment)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: mkpprof -o FILE [-plain] [-stacks N] [-time NANOS] [-break KIND]")
		os.Exit(2)
	}
	if *brk == "too-many-samples" {
		*nstacks = 16001
	}
	now := *tnanos
	if now == 0 {
		now = time.Now().UnixNano()
	}
	if *brk == "old-time" {
		now -= int64(2 * time.Hour)
	}
	const period = 50000000 // 20 Hz

	st := &strtab{idx: map[string]uint64{}}
	if *brk == "string0" {
		st.id("not-empty")
	} else {
		st.id("")
	}
	var p buf
	typeName := "cpu"
	if *brk == "sampletype-dash" {
		typeName = "cpu-time"
	}
	if *brk != "no-sampletypes" {
		for _, vt := range [][2]string{{"samples", "count"}, {typeName, "nanoseconds"}} {
			var m buf
			m.u64(1, st.id(vt[0]))
			m.u64(2, st.id(vt[1]))
			p.msg(1, &m)
		}
	}

	// Mappings: the executable, with a build id, and a JIT's anonymous memory.
	mapIDs := []uint64{1, 2}
	if *brk == "mapping-ids" {
		mapIDs = []uint64{1, 3}
	}
	maps := []struct {
		start, limit uint64
		file, build  string
	}{{0x400000, 0x500000, "/usr/bin/app", "4e2f9a0c1b7d3e5f"}, {0x7f0000000000, 0x7f0000100000, "[jit]", ""}}
	for i, mp := range maps {
		var m buf
		m.u64(1, mapIDs[i])
		m.u64(2, mp.start)
		m.u64(3, mp.limit)
		m.u64(5, st.id(mp.file))
		if mp.build != "" {
			m.u64(6, st.id(mp.build))
		}
		m.u64(7, 1) // has_functions
		p.msg(3, &m)
	}

	// Functions: main, a C++ function (its demangled name, the mangled one as
	// system_name), and a JIT function named from its perf map.
	funcs := []struct{ name, sys, file string }{
		{"main", "main", "app.c"},
		{"SharedRuntime::lrem(long, long)", "_ZN13SharedRuntime4lremEll", "sharedRuntime.cpp"},
		{"jit_hot_loop", "jit_hot_loop", ""},
	}
	if *brk == "invalid-utf8" {
		funcs[2].name = "jit_\xff\xfe"
	}
	funcIDs := []uint64{1, 2, 3}
	switch *brk {
	case "function-ids":
		funcIDs = []uint64{1, 2, 4}
	case "function-zero":
		funcIDs = []uint64{0, 2, 3}
	}
	for i, f := range funcs {
		var m buf
		m.u64(1, funcIDs[i])
		m.u64(2, st.id(f.name))
		m.u64(3, st.id(f.sys))
		if f.file != "" {
			m.u64(4, st.id(f.file))
		}
		p.msg(5, &m)
	}

	// One location per function; location i is in function i.
	locIDs := []uint64{1, 2, 3}
	switch *brk {
	case "location-ids":
		locIDs = []uint64{1, 2, 5}
	case "location-zero":
		locIDs = []uint64{1, 0, 3}
	}
	locMaps := []uint64{1, 1, 2}
	addrs := []uint64{0x401000, 0x402000, 0x7f0000000100}
	for i := range locIDs {
		var m buf
		m.u64(1, locIDs[i])
		m.u64(2, mapIDs[locMaps[i]-1])
		m.u64(3, addrs[i])
		var ln buf
		ln.u64(1, funcIDs[i])
		ln.u64(2, uint64(10*(i+1)))
		m.msg(4, &ln)
		p.msg(4, &m)
	}

	// Samples: the i-th stack is leaf-first; stacks differ by depth and leaf,
	// and past three distinct shapes by repeating the JIT frame (up to 15 times:
	// too-many-samples needs many samples, not deep ones).
	for i := 0; i < *nstacks; i++ {
		var stack []uint64
		switch i % 3 {
		case 0:
			stack = []uint64{locIDs[2], locIDs[0]}
		case 1:
			stack = []uint64{locIDs[1], locIDs[0]}
		case 2:
			stack = []uint64{locIDs[2], locIDs[1], locIDs[0]}
		}
		for j := 0; j < (i/3)%16; j++ {
			stack = append([]uint64{locIDs[2]}, stack...)
		}
		if *brk == "dangling-location" && i == 0 {
			stack = []uint64{99}
		}
		n := uint64(i + 1)
		values := []uint64{n, n * period}
		if *brk == "values" && i == 0 {
			values = values[:1]
		}
		var m buf
		m.packed(1, stack)
		m.packed(2, values)
		p.msg(2, &m)
	}

	var ptype buf
	ptype.u64(1, st.id("cpu"))
	ptype.u64(2, st.id("nanoseconds"))
	for _, s := range st.list {
		p.bytesField(6, []byte(s))
	}
	p.u64(9, uint64(now))
	p.u64(10, uint64(10*time.Second))
	p.msg(11, &ptype)
	p.u64(12, period)

	data := p.Bytes()
	switch *brk {
	case "garbage":
		data = []byte("this is not a profile\xff\xff\xff")
	case "bad-gzip":
		data = append([]byte{0x1f, 0x8b, 0x08, 0x00}, []byte("nonsense after a gzip header")...)
		*plain = true
	}
	if !*plain {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(data)
		_ = w.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "mkpprof:", err)
		os.Exit(1)
	}
}

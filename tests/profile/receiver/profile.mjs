// A received pprof profile: unpacked as each server unpacks it, decoded with pprof's profile.proto, summarized, and read again by go tool pprof.
import { execFile } from "node:child_process";
import { gunzipSync } from "node:zlib";

const isGzip = (b) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

// Pyroscope, pkg/pprof/pprof.go RawFromBytesWithLimit: gzip when the bytes open
// as gzip (a gzip.ErrHeader means plain), at most limit bytes once unpacked.
// Parca, pkg/normalizer/normalizer.go: gzip when the bytes start 1f 8b.
// Both come to the same test. Returns {bytes, gzipped} or {error: {code, message}}.
export function unpack(raw, server, limit) {
  if (!isGzip(raw)) {
    return { bytes: raw, gzipped: false };
  }
  try {
    return { bytes: gunzipSync(raw, limit ? { maxOutputLength: limit + 1 } : {}), gzipped: true };
  } catch (e) {
    if (e.code === "ERR_BUFFER_TOO_LARGE") {
      return { error: { code: "invalid_argument", message: `uncompressed profile payload size exceeds limit of ${(limit / 1e6).toFixed(1)} MB` } };
    }
    // Parca: a plain error, which gRPC answers UNKNOWN; Pyroscope: likewise (Connect's unknown, HTTP 500).
    const message = server === "parca" ? `decompressing profile: ${e.message}` : `copy to buffer: ${e.message}`;
    return { error: { code: "unknown", message } };
  }
}

// Walks the top-level fields of an encoded Profile and reports the first
// string_table entry (field 6) that is not valid UTF-8, as hex: the servers'
// generated decoders (vtprotobuf) keep such strings, and Pyroscope's
// ValidateProfile refuses them; protobuf-es would replace them silently.
function firstBadUtf8(bytes) {
  const dec = new TextDecoder("utf-8", { fatal: true });
  let i = 0;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      if (i >= bytes.length) throw new Error("truncated varint");
      const b = bytes[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < bytes.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = Number(varint());
      const part = bytes.subarray(i, i + len);
      i += len;
      if (field === 6) {
        try {
          dec.decode(part);
        } catch {
          return Buffer.from(part).toString("hex");
        }
      }
    } else throw new Error(`wire type ${wire}`);
  }
  return null;
}

// Decodes BYTES (unpacked) with the Profile message of pprof's profile.proto into
// plain numbers. Throws what the decoder says on bytes that are not a profile.
export function decodeProfile(bytes, { fromBinary, ProfileSchema }) {
  const m = fromBinary(ProfileSchema, bytes);
  const n = (v) => Number(v ?? 0);
  return {
    sampleType: m.sampleType.map((t) => ({ type: n(t.type), unit: n(t.unit) })),
    sample: m.sample.map((s) => ({
      locationId: s.locationId.map(n),
      value: s.value.map(n),
      label: s.label.map((l) => ({ key: n(l.key), str: n(l.str), num: n(l.num) })),
    })),
    mapping: m.mapping.map((x) => ({ id: n(x.id), filename: n(x.filename), buildId: n(x.buildId) })),
    location: m.location.map((x) => ({ id: n(x.id), mappingId: n(x.mappingId), line: x.line.map((l) => ({ functionId: n(l.functionId) })) })),
    function: m.function.map((x) => ({ id: n(x.id), name: n(x.name), systemName: n(x.systemName), filename: n(x.filename) })),
    stringTable: [...m.stringTable],
    timeNanos: n(m.timeNanos),
    timeNanosExact: BigInt(m.timeNanos ?? 0), // a double keeps only microseconds of a time in nanoseconds
    durationNanos: n(m.durationNanos),
    periodType: m.periodType ? { type: n(m.periodType.type), unit: n(m.periodType.unit) } : null,
    period: n(m.period),
    badUtf8Hex: firstBadUtf8(bytes),
  };
}

// What received.jsonl says of a profile (the fields of README.md); time_nanos is a BigInt.
export function summarize(p) {
  const s = (i) => p.stringTable[i] ?? "";
  const types = p.sampleType.map((t) => `${s(t.type)}/${s(t.unit)}`);
  const sum = (idx) => (idx < 0 ? null : p.sample.reduce((a, x) => a + (x.value[idx] ?? 0), 0));
  return {
    samples: sum(p.sampleType.length ? 0 : -1),
    cpu_ns: sum(types.indexOf("cpu/nanoseconds")),
    sample_types: types,
    period_type: p.periodType ? `${s(p.periodType.type)}/${s(p.periodType.unit)}` : null,
    period: p.period,
    time_nanos: p.timeNanosExact,
    duration_nanos: p.durationNanos,
    n_samples: p.sample.length,
    n_mappings: p.mapping.length,
    build_ids: p.mapping.map((m) => s(m.buildId)).filter((b) => b !== ""),
    functions: p.function.map((f) => s(f.name)),
    system_names: p.function.map((f) => s(f.systemName)).filter((x) => x !== ""),
  };
}

// go tool pprof -raw FILE, the reference parser: {ok, error, samples}, samples
// being the sum of the first value of each sample line it prints, so that the
// two decoders can be compared.
export function pprofRaw(file, goBin = "go") {
  return new Promise((resolve) => {
    execFile(goBin, ["tool", "pprof", "-raw", file], { maxBuffer: 256 << 20, timeout: 60000 }, (err, stdout, stderr) => {
      if (err) {
        const why = (stderr || err.message).trim().split("\n")[0];
        resolve({ ok: false, error: `go tool pprof -raw refused it: ${why}`, samples: null });
        return;
      }
      let inSamples = false, samples = 0;
      for (const line of stdout.split("\n")) {
        if (line.startsWith("Samples:")) inSamples = true;
        else if (/^(Locations|Mappings)/.test(line)) inSamples = false;
        else if (inSamples) {
          const m = /^\s*(-?\d+)(\s+-?\d+)*:/.exec(line);
          if (m) samples += Number(m[1]);
        }
      }
      resolve({ ok: true, error: null, samples });
    });
  });
}

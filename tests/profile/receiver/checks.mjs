// The checks Grafana Pyroscope and Parca apply to what is pushed to them, transcribed from their source.
//
// Each function names the file (and function) of the server it follows; the
// revisions read are in README.md. Profiles here are the plain objects of
// profile.mjs (numbers, not bigints). An error is {code, message}: code is the
// Connect/gRPC code name the server answers with ("invalid_argument",
// "unknown", ...), message what it says.

// Pyroscope's defaults, pkg/validation/limits.go (RegisterFlags).
export const PYROSCOPE_LIMITS = {
  maxLabelNameLength: 1024, // validation.max-length-label-name
  maxLabelValueLength: 2048, // validation.max-length-label-value
  maxLabelNamesPerSeries: 30, // validation.max-label-names-per-series
  maxProfileSizeBytes: 4 * 1024 * 1024, // validation.max-profile-size-bytes (uncompressed)
  maxProfileStacktraceSamples: 16000, // validation.max-profile-stacktrace-samples
  maxProfileStacktraceSampleLabels: 100, // validation.max-profile-stacktrace-sample-labels
  rejectOlderThanMs: 60 * 60 * 1000, // validation.reject-older-than 1h
  rejectNewerThanMs: 10 * 60 * 1000, // validation.reject-newer-than 10m
};

// pkg/model/labels.go: AttrServiceNameFallback, what pushSeries adds when service_name is missing.
export const SERVICE_NAME_FALLBACK = "unknown_service";

const invalid = (message) => ({ code: "invalid_argument", message });

// Go's strconv.Quote for the values in Pyroscope's messages; JSON's quoting is the same for printable text.
const quote = (s) => JSON.stringify(s);

// pkg/model/labels.go LabelPairsString: how Pyroscope prints a label set in its messages.
export function labelPairsString(labels) {
  return "{" + labels.map((l) => `${l.name}=${quote(l.value)}`).join(", ") + "}";
}

// The receiver's name for a series: its labels sorted by name, printed as Pyroscope prints them.
export function canonicalLabels(labels) {
  return labelPairsString(sortLabels(labels));
}

export function sortLabels(labels) {
  return [...labels].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

// Label names. "utf8": prometheus/common's UTF8Validation, the scheme both servers
// use today (model.NameValidationScheme defaults to it since v0.62; Pyroscope's
// -validation.disable-label-sanitization defaults to true, which selects it; Parca
// calls model.LabelName.IsValid): any non-empty valid UTF-8 name. "legacy": the
// scheme before that, [a-zA-Z_][a-zA-Z0-9_]*, which older servers enforce (and
// Pyroscope with sanitization on, after turning dots into underscores).
const LEGACY_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

// Invalid UTF-8 in a label arrives here as U+FFFD (receiver.mjs decodes as the
// servers' decoders do, without refusing it); the servers' UTF-8 checks refuse it.
const validUtf8 = (s) => !s.includes("\uFFFD");
const validUtf8Name = (s) => s !== "" && validUtf8(s);

// pkg/validation/validate.go SanitizeLegacyLabelName: [a-zA-Z0-9_.], no leading digit; dots become '_'.
function sanitizeLegacyLabelName(name) {
  if (!/^[a-zA-Z_.][a-zA-Z0-9_.]*$/.test(name)) return null;
  return name.replaceAll(".", "_");
}

// pkg/validation/validate.go ValidateLabels, as the distributor calls it for each
// series (pkg/distributor/distributor.go visitSampleSeries). Returns the labels as
// stored (sorted, names sanitized in legacy mode) or an error.
export function pyroscopeValidateLabels(input, { labelNames = "utf8" } = {}) {
  const L = PYROSCOPE_LIMITS;
  if (input.length === 0) return { error: invalid("error at least one label pair is required per profile") };
  let ls = sortLabels(input);
  const str = () => labelPairsString(ls);
  if (ls.length > L.maxLabelNamesPerSeries) {
    return { error: invalid(`profile series '${str()}' has ${ls.length} label names; limit ${L.maxLabelNamesPerSeries}`) };
  }
  const get = (n) => (ls.find((l) => l.name === n) || { value: "" }).value;
  // model.UTF8Validation.IsValidMetricName: non-empty. So __name__ is required.
  if (!validUtf8Name(get("__name__"))) return { error: invalid(`invalid labels '${str()}' with error: invalid metric name`) };
  // isValidServiceName: non-empty (pushSeries has added the fallback before this runs).
  if (get("service_name") === "") return { error: invalid(`invalid labels '${str()}' with error: service name is not provided`) };
  let last = "";
  for (let i = 0; i < ls.length; ) {
    const l = ls[i];
    if (Buffer.byteLength(l.name) > L.maxLabelNameLength) {
      return { error: invalid(`profile with labels '${str()}' has label name too long: '${l.name}'`) };
    }
    if (Buffer.byteLength(l.value) > L.maxLabelValueLength) {
      return { error: invalid(`profile with labels '${str()}' has label value too long: '${l.value}'`) };
    }
    if (labelNames === "legacy") {
      const s = sanitizeLegacyLabelName(l.name);
      if (s === null) return { error: invalid(`invalid labels '${str()}' with error: invalid label name '${l.name}'`) };
      if (s !== l.name) {
        // handleSanitizedLabel: the same name and value merge; another value is a duplicate.
        const rest = ls.filter((_, j) => j !== i);
        const other = rest.find((x) => x.name === s);
        if (other && other.value !== l.value) {
          return { error: invalid(`profile with labels '${str()}' has duplicate label name '${s}' after label name sanitization from '${l.name}'`) };
        }
        ls = sortLabels(other ? rest : [...rest, { name: s, value: l.value }]);
        i = 0;
        last = "";
        continue;
      }
    } else if (!validUtf8Name(l.name)) {
      return { error: invalid(`invalid labels '${str()}' with error: invalid label name '${l.name}'`) };
    }
    if (!validUtf8(l.value)) return { error: invalid(`invalid labels '${str()}' with error: invalid label value '${l.value}'`) };
    if (l.name === last) return { error: invalid(`profile with labels '${str()}' has duplicate label name: '${l.name}'`) };
    last = l.name;
    i++;
  }
  return { labels: ls };
}

// pkg/validation/validate.go ValidateProfile (with validateStringTableAccess), in its order.
export function pyroscopeValidateProfile(p, uncompressedSize, labels, nowMs = Date.now()) {
  const L = PYROSCOPE_LIMITS;
  const str = labelPairsString(labels);
  const bad = (m) => invalid(m);
  if (p.sampleType.length === 0) return bad("empty profile");
  if (p.timeNanos > 0) {
    const t = Math.floor(p.timeNanos / 1e6);
    const from = nowMs - L.rejectOlderThanMs;
    const to = nowMs + L.rejectNewerThanMs;
    if (!(t > from && t < to)) {
      const iso = (ms) => new Date(ms).toISOString();
      return bad(`profile with labels '${str}' is outside of ingestion window (profile timestamp: ${iso(t)}, the ingestion window starts at ${iso(from)} and ends at ${iso(to)})`);
    }
  }
  if (uncompressedSize > L.maxProfileSizeBytes) {
    return bad(`the profile with labels '${str}' exceeds the size limit (max_profile_size_byte, actual: ${uncompressedSize}, limit: ${L.maxProfileSizeBytes})`);
  }
  if (p.sample.length > L.maxProfileStacktraceSamples) {
    return bad(`the profile with labels '${str}' exceeds the samples count limit (max_profile_stacktrace_samples, actual: ${p.sample.length}, limit: ${L.maxProfileStacktraceSamples})`);
  }
  for (const s of p.sample) {
    if (s.label.length > L.maxProfileStacktraceSampleLabels) {
      return bad(`the profile with labels '${str}' exceeds the sample labels limit (max_profile_stacktrace_sample_labels, actual: ${s.label.length}, limit: ${L.maxProfileStacktraceSampleLabels})`);
    }
  }
  if (p.location.some((l) => l.id === 0)) return bad("location id is 0");
  if (p.function.some((f) => f.id === 0)) return bad("function id is 0");
  if (p.sample.some((s) => s.value.length !== p.sampleType.length)) return bad("sample value length mismatch");
  const n = p.stringTable.length;
  if (n === 0 || p.stringTable[0] !== "") return bad("string 0 should be empty string");
  if (p.sampleType.some((t) => t.type >= n)) return bad("sample type type string index out of range");
  if (p.sample.some((s) => s.label.some((l) => l.str >= n || l.key >= n))) return bad("sample label string index out of range");
  for (const f of p.function) {
    if (f.name >= n) return bad("function name string index out of range");
    if (f.systemName >= n) return bad("function system name index string out of range");
    if (f.filename >= n) return bad("function file name string index out of range");
  }
  for (const m of p.mapping) {
    if (m.filename >= n) return bad("mapping file name string index out of range");
    if (m.buildId >= n) return bad("mapping build id string index out of range");
  }
  if (p.sampleType.some((t) => p.stringTable[t.type].includes("-"))) return bad("sample type contains -");
  if (p.badUtf8Hex !== null) return bad(`invalid utf8 string hex: ${p.badUtf8Hex}`);
  return null;
}

// pkg/normalizer/normalizer.go NormalizeWriteRawRequest, the labels part: __name__
// is set aside; every other name must be valid and unique; __name__ is required.
export function parcaValidateLabels(labels, { labelNames = "utf8" } = {}) {
  const seen = new Set();
  let name = "";
  for (const l of labels) {
    if (l.name === "__name__") {
      name = l.value;
      continue;
    }
    const ok = labelNames === "legacy" ? LEGACY_NAME.test(l.name) : validUtf8Name(l.name);
    if (!ok) return { error: invalid(`invalid label name: ${l.name}`) };
    if (seen.has(l.name)) return { error: invalid(`duplicate label name: ${l.name}`) };
    seen.add(l.name);
  }
  if (name === "") return { error: invalid("missing __name__ label") };
  return { name };
}

// pkg/normalizer/validate.go ValidatePprofProfile, in its order; the caller
// prefixes "invalid profile: " as NormalizeWriteRawRequest does.
export function parcaValidatePprof(p, executableInfo = []) {
  const n = p.stringTable.length;
  if (n > 0 && p.stringTable[0] !== "") {
    return `first item in string table is expected to be empty string, but it is ${quote(p.stringTable[0])}`;
  }
  for (const [i, m] of p.mapping.entries()) {
    if (m.id !== i + 1) return "mapping id is not sequential";
    if (m.filename !== 0 && m.filename >= n) return `mapping (id: ${m.id}) has invalid filename index ${m.filename}`;
    if (m.buildId !== 0 && m.buildId >= n) return `mapping (id: ${m.id}) has invalid buildid index ${m.filename}`;
  }
  if (executableInfo.length > 0 && executableInfo.length !== p.mapping.length) {
    return `profile has ${p.mapping.length} mappings but ${executableInfo.length} executable infos`;
  }
  for (const [i, f] of p.function.entries()) {
    if (f.id !== i + 1) return "function id is not sequential";
    if (f.name !== 0 && f.name >= n) return `function (id: ${f.id}) has invalid name index ${f.name}`;
    if (f.systemName !== 0 && f.systemName >= n) return `function (id: ${f.id}) has invalid systemname index ${f.systemName}`;
    if (f.filename !== 0 && f.filename >= n) return `function (id: ${f.id}) has invalid filename index ${f.filename}`;
  }
  for (const [i, l] of p.location.entries()) {
    if (l.id !== i + 1) return "location id is not sequential";
    if (l.mappingId !== 0 && l.mappingId > p.mapping.length) return `location has invalid mapping id: ${l.mappingId}`;
    for (const ln of l.line) {
      if (ln.functionId !== 0 && ln.functionId > p.function.length) return `location ${l.id} has invalid function id: ${ln.functionId}`;
    }
  }
  if (p.sampleType.length === 0 && p.sample.length !== 0) return "missing sample type information";
  for (const [i, t] of p.sampleType.entries()) {
    if (t.type !== 0 && t.type >= n) return `sample type ${i} has invalid type index ${t.type}`;
    if (t.unit !== 0 && t.unit >= n) return `sample type ${i} has invalid unit index ${t.unit}`;
  }
  if (p.periodType) {
    if (p.periodType.type !== 0 && p.periodType.type >= n) return `period type has invalid type index ${p.periodType.type}`;
    if (p.periodType.unit !== 0 && p.periodType.unit >= n) return `period type has invalid unit index ${p.periodType.unit}`;
  }
  for (const [i, s] of p.sample.entries()) {
    if (s.value.length !== p.sampleType.length) {
      return `mismatch: sample has ${s.value.length} values vs. ${p.sampleType.length} types`;
    }
    for (const [j, l] of s.locationId.entries()) {
      if (l === 0) return "location ids of stacktraces must be non-zero";
      if (l > p.location.length) return `sample ${i} location number ${j} (${l}) is out of range`;
    }
    for (const [j, l] of s.label.entries()) {
      if (l.key === 0) return `sample ${i} label ${j} has no key`;
      if (l.key >= n) return `sample ${i} label ${j} has invalid key index ${l.key}`;
      if (l.str !== 0 && l.str >= n) return `sample ${i} label ${j} has invalid str index ${l.str}`;
    }
  }
  return null;
}

// pkg/profilestore/profilecolumnstore.go writeSeries: every row (a sample's
// non-zero value of one sample type, pkg/normalizer NormalizePprof) has a profile
// type name:sample_type:sample_unit:period_type:period_unit[:delta] that must
// parse as a PromQL metric selector "TYPE{}" (an unquoted metric name).
// A plain error there: gRPC answers it UNKNOWN.
const PROMQL_METRIC = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
export function parcaProfileTypeCheck(name, p) {
  const s = (i) => p.stringTable[i] ?? "";
  const pt = p.periodType ? `${s(p.periodType.type)}:${s(p.periodType.unit)}` : ":";
  let row = 0;
  for (const sample of p.sample) {
    for (const [j, v] of sample.value.entries()) {
      if (v === 0) continue;
      const t = p.sampleType[j];
      const type = `${name}:${s(t.type)}:${s(t.unit)}:${pt}${p.durationNanos !== 0 ? ":delta" : ""}`;
      if (!PROMQL_METRIC.test(type)) {
        return { code: "unknown", message: `invalid profile type at row ${row} (${type}): 1:1: parse error: unexpected character in metric selector` };
      }
      row++;
    }
  }
  return null;
}

// api/model/labelset/labelset.go Parse and validate.go: the /ingest name=
// parameter, APP{k=v,...}. The application name allows [a-zA-Z0-9_.\-/] and is
// required; label names [a-zA-Z0-9_.] (__name__ is not checked). Returns
// {app, labels: Map} or {error} (the handler answers 400 "name: ...").
export function labelsetParse(name) {
  const labels = new Map();
  let state = "name";
  let key = "";
  let value = "";
  let app = null;
  for (const r of name + "{") {
    if (state === "name") {
      if (r === "{") {
        state = "tags";
        app = value.trim();
        if (app === "") return { error: "service name is required" };
        const badRune = [...app].find((c) => !/[a-zA-Z0-9_.\-/]/.test(c));
        if (badRune !== undefined) return { error: `invalid service name: ${app}: character is not allowed: ${quote(badRune)}` };
      } else value += r;
    } else if (state === "tags") {
      if (r === "}") state = "done";
      else if (r === "=") {
        state = "value";
        value = "";
      } else key += r;
    } else if (state === "value") {
      if (r === "," || r === "}") {
        state = "tags";
        const k = key.trim();
        if (k !== "__name__") {
          if (k === "") return { error: "label name is required" };
          const badRune = [...k].find((c) => !/[a-zA-Z0-9_.]/.test(c));
          if (badRune !== undefined) return { error: `invalid label name: ${k}: character is not allowed: ${quote(badRune)}` };
        }
        labels.set(k, value.trim());
        key = "";
      } else value += r;
    }
  }
  return { app, labels };
}

// pkg/og/storage/tree/pprof.go DefaultSampleTypeMapping: the display names metricName uses.
const DEFAULT_DISPLAY_NAMES = { samples: "cpu", goroutine: "goroutines" };

// pkg/og/convert/pprof/profile.go metricName: the __name__ /ingest gives a pprof profile.
export function ingestMetricName(p, sampleTypeConfig = null) {
  const types = p.sampleType.map((t) => p.stringTable[t.type] ?? "");
  if (types.includes("wall")) return "wall";
  let st = "";
  for (const t of types) {
    st = t;
    const display = sampleTypeConfig ? sampleTypeConfig[t]?.display_name : DEFAULT_DISPLAY_NAMES[t];
    if (display) st = display;
    if (st.includes("cpu")) return "process_cpu";
    if (st.includes("alloc_") || st.includes("inuse_") || st === "space" || st === "objects") return "memory";
    if (st.includes("mutex_")) return "mutex";
    if (st.includes("block_")) return "block";
    if (st.includes("goroutines")) return "goroutines";
  }
  return st;
}

// pkg/og/convert/pprof/profile.go createLabels, with pkg/model/labels.go
// IsLabelAllowedForIngestion (no "__" names but __session_id__): the series
// labels /ingest makes.
export function ingestLabels(p, parsed, spyName, sampleTypeConfig) {
  const ls = [
    { name: "__name__", value: ingestMetricName(p, sampleTypeConfig) },
    { name: "__delta__", value: "false" },
    { name: "pyroscope_spy", value: spyName },
  ];
  if (!parsed.labels.has("service_name")) ls.push({ name: "service_name", value: parsed.app });
  for (const [k, v] of parsed.labels) {
    if (k.startsWith("__") && k !== "__session_id__") continue;
    ls.push({ name: k, value: v });
  }
  return ls;
}

// pkg/og/util/attime/attime.go Parse, for from= (digits only: yyyymmdd, or
// unix seconds, or milli/micro/nanoseconds by length); other forms count as now.
export function attimeParseMs(s) {
  s = (s || "").trim().replace(/[_, ]/g, "");
  if (!/^\d+$/.test(s)) return Date.now();
  if (s.length === 8) {
    const y = +s.slice(0, 4), m = +s.slice(4, 6), d = +s.slice(6, 8);
    if (y > 1900 && m >= 1 && m < 13 && d >= 1 && d < 32) return Date.UTC(y, m - 1, d);
  }
  const v = Number(s);
  switch (s.length) {
    case 13: return v;
    case 16: return Math.floor(v / 1e3);
    case 19: return Math.floor(v / 1e6);
    default: return v * 1000;
  }
}

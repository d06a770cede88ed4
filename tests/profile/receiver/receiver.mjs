// The test stand-in for Grafana Pyroscope and Parca: takes pushes over their four protocols, checks them as they do, and records what arrived.
//
//   node receiver.mjs --dir OUTDIR [--descriptors FILE] [--modules DIR]
//                     [--checks union|server] [--label-names utf8|legacy] [--go GO]
//
// Prints "listening http=PORT h2c=PORT admin=PORT" once all three listen on
// 127.0.0.1. README.md says what each port serves, the admin API, the files
// under OUTDIR, and which server's source each check follows.
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";

import * as checks from "./checks.mjs";
import { decodeProfile, pprofRaw, summarize, unpack } from "./profile.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));

function usage(msg) {
  process.stderr.write(`receiver: ${msg}\nusage: node receiver.mjs --dir OUTDIR [--descriptors FILE] [--modules DIR] [--checks union|server] [--label-names utf8|legacy] [--go GO]\n`);
  process.exit(2);
}

const opt = { dir: null, descriptors: null, modules: process.cwd(), checks: "union", labelNames: "utf8", go: "go" };
{
  const a = process.argv.slice(2);
  const names = { "--dir": "dir", "--descriptors": "descriptors", "--modules": "modules", "--checks": "checks", "--label-names": "labelNames", "--go": "go" };
  for (let i = 0; i < a.length; i += 2) {
    const k = names[a[i]];
    if (!k || a[i + 1] === undefined) usage(`bad argument ${a[i]}`);
    opt[k] = a[i + 1];
  }
  if (!opt.dir) usage("--dir is required");
  if (!["union", "server"].includes(opt.checks)) usage("--checks is union or server");
  if (!["utf8", "legacy"].includes(opt.labelNames)) usage("--label-names is utf8 or legacy");
}
mkdirSync(opt.dir, { recursive: true });

// The protocol library, from the npm directory make receiver-deps installs (--modules).
const require = createRequire(pathToFileURL(path.resolve(opt.modules) + "/"));
const { createFileRegistry, fromBinary } = require("@bufbuild/protobuf");
const { FileDescriptorSetSchema } = require("@bufbuild/protobuf/wkt");
const { configureTextEncoding, getTextEncoding } = require("@bufbuild/protobuf/wire");
const { Code, ConnectError, createContextKey, createContextValues } = require("@connectrpc/connect");
const { connectNodeAdapter } = require("@connectrpc/connect-node");

// The servers' own .proto files (proto/, README.md), compiled by protoc.
if (!opt.descriptors) {
  opt.descriptors = path.join(opt.dir, "descriptors.binpb");
  const p = (d) => path.join(HERE, "proto", d);
  try {
    execFileSync("protoc", ["-I", p("pyroscope"), "-I", p("parca"), "-I", p("pprof"), "--include_imports",
      `--descriptor_set_out=${opt.descriptors}`, "push/v1/push.proto", "parca/profilestore/v1alpha1/profilestore.proto", "profile.proto"],
    { stdio: ["ignore", "ignore", "pipe"] });
  } catch (e) {
    usage(`protoc failed (make deps installs protobuf-compiler and libprotobuf-dev): ${e.stderr || e.message}`);
  }
}
// Strings are decoded as the servers' decoders (vtprotobuf) do: without
// refusing invalid UTF-8, which their checks look for themselves (profile.mjs
// finds it in the string table; a label with it carries U+FFFD, checks.mjs).
{
  const te = getTextEncoding();
  configureTextEncoding({ ...te, decodeUtf8: (bytes) => te.decodeUtf8(bytes, false) });
}
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(opt.descriptors)));
const PusherService = registry.getService("push.v1.PusherService");
const ProfileStoreService = registry.getService("parca.profilestore.v1alpha1.ProfileStoreService");
const ProfileSchema = registry.getMessage("perftools.profiles.Profile");
if (!PusherService || !ProfileStoreService || !ProfileSchema) usage(`${opt.descriptors} lacks the services or pprof's Profile`);
try {
  execFileSync(opt.go, ["version"], { stdio: "ignore" });
} catch {
  usage(`${opt.go} does not run: go tool pprof reads every profile (make deps installs golang-go)`);
}

const CODE_NAMES = {
  ok: 0, canceled: 1, unknown: 2, invalid_argument: 3, deadline_exceeded: 4, not_found: 5, already_exists: 6,
  permission_denied: 7, resource_exhausted: 8, failed_precondition: 9, aborted: 10, out_of_range: 11,
  unimplemented: 12, internal: 13, unavailable: 14, data_loss: 15, unauthenticated: 16,
};
const codeName = (n) => Object.keys(CODE_NAMES).find((k) => CODE_NAMES[k] === Number(n)) ?? `code_${n}`;

// ---- state: the mode, the records, the summary ----

const MODES = ["ok", "429", "500", "503", "400", "hang", "down"];
// How each error mode answers: its Connect code (gRPC the same, upper case) and /ingest's HTTP status.
const MODE_ERRORS = {
  "429": { code: "resource_exhausted", http: 429, text: "receiver: mode 429: push rate limit exceeded" },
  "500": { code: "internal", http: 500, text: "receiver: mode 500: internal error" },
  "503": { code: "unavailable", http: 503, text: "receiver: mode 503: unavailable" },
  "400": { code: "invalid_argument", http: 400, text: "receiver: mode 400: refused" },
};
let mode = { mode: "ok", retry_after: null, message: null, count: null };
let requestSeq = 0;
let profileSeq = 0;
const byStatus = {};
const series = {};
const refused = [];
let accepted = 0;

// One JSON line; a BigInt is written as the exact integer it is.
const jsonl = (file, obj) => appendFileSync(path.join(opt.dir, file),
  JSON.stringify(obj, (k, v) => (typeof v === "bigint" ? `\u0000big${v}` : v)).replace(/"\\u0000big(-?\d+)"/g, "$1") + "\n");
const log = (s) => process.stderr.write(`receiver: ${s}\n`);

// takeMode: the mode this request is answered in; a mode set with "count" lasts that many requests.
function takeMode() {
  const m = { ...mode };
  if (mode.count !== null && mode.mode !== "ok" && mode.mode !== "down") {
    mode.count -= 1;
    if (mode.count <= 0) mode = { mode: "ok", retry_after: null, message: null, count: null };
  }
  return m;
}

// What is kept of a request's headers: credentials, the tenant, every x-* header.
function pickHeaders(h) {
  const out = {};
  for (const [k, v] of Object.entries(h)) {
    if (k === "authorization" || k.startsWith("x-")) out[k] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

function guessProtocol(req) {
  if (req.url.startsWith("/ingest")) return "ingest";
  const ct = req.headers["content-type"] || "";
  if (ct.startsWith("application/grpc-web")) return "grpc-web";
  if (ct.startsWith("application/grpc")) return "grpc";
  return "connect";
}

// finishRequest: one line in requests.jsonl, once per request.
function finishRequest(rec) {
  if (rec.done) return;
  rec.done = true;
  const line = { ...rec };
  delete line.done;
  byStatus[rec.status] = (byStatus[rec.status] || 0) + 1;
  jsonl("requests.jsonl", line);
  log(`#${rec.seq} ${rec.protocol} ${rec.path} -> ${rec.status}${rec.message ? ` (${rec.message})` : ""}`);
}

function refuse(rec, code, message) {
  refused.push(`${rec.protocol}: ${code}: ${message}`);
}

// ---- received profiles: files, received.jsonl in seq order, go tool pprof ----

let pending = 0;
const idleWaiters = [];
const pprofQueue = [];
let pprofRunning = 0;
const finished = new Map();
let nextLine = 1;

function runPprofQueue() {
  while (pprofRunning < 2 && pprofQueue.length) {
    const job = pprofQueue.shift();
    pprofRunning++;
    pprofRaw(job.file, opt.go).then((r) => {
      pprofRunning--;
      job.done(r);
      runPprofQueue();
    });
  }
}

function accept(rec, labels, raw, unpacked, prof) {
  const seq = ++profileSeq;
  const name = `${String(seq).padStart(4, "0")}.pb.gz`;
  const file = path.join(opt.dir, name);
  writeFileSync(file, unpacked.gzipped ? raw : gzipSync(unpacked.bytes));
  const sorted = checks.sortLabels(labels);
  const entry = {
    seq, protocol: rec.protocol, file: name, request: rec.seq,
    labels: Object.fromEntries(sorted.map((l) => [l.name, l.value])),
    series: checks.canonicalLabels(sorted),
    ...summarize(prof),
    gzipped: unpacked.gzipped,
    headers: rec.headers,
    pprof_raw_ok: null,
    pprof_samples: null,
  };
  rec.accepted += 1;
  pending++;
  pprofQueue.push({
    file,
    done: (r) => {
      entry.pprof_raw_ok = r.ok;
      entry.pprof_samples = r.samples;
      if (r.ok && r.samples !== entry.samples) {
        entry.pprof_raw_ok = false;
        r.error = `go tool pprof -raw counts ${r.samples} samples, the receiver ${entry.samples}`;
      }
      if (!entry.pprof_raw_ok) {
        refused.push(`pprof: ${name}: ${r.error}`);
      } else {
        accepted++;
        const s = (series[entry.series] ||= { profiles: 0, samples: 0, cpu_ns: 0 });
        s.profiles += 1;
        s.samples += entry.samples ?? 0;
        s.cpu_ns += entry.cpu_ns ?? 0;
      }
      finished.set(seq, entry);
      while (finished.has(nextLine)) {
        jsonl("received.jsonl", finished.get(nextLine));
        finished.delete(nextLine++);
      }
      if (--pending === 0) idleWaiters.splice(0).forEach((w) => w());
    },
  });
  runPprofQueue();
}

const whenIdle = (ms) => new Promise((resolve) => {
  if (pending === 0) return resolve(true);
  const t = setTimeout(() => resolve(false), ms);
  idleWaiters.push(() => { clearTimeout(t); resolve(true); });
});

// ---- the servers' request handling ----

const decode = (bytes) => decodeProfile(bytes, { fromBinary, ProfileSchema });

// pkg/distributor/distributor.go pushSeries, for one series: service_name's
// fallback, ValidateProfile, then (visitSampleSeries) ValidateLabels; with
// --checks union, Parca's pprof checks too. {labels} as stored, or {error}.
function pyroscopeCheckSeries(labels, prof, u) {
  const svc = labels.find((l) => l.name === "service_name");
  if (!svc || svc.value === "") labels = [...labels, { name: "service_name", value: checks.SERVICE_NAME_FALLBACK }];
  const e = checks.pyroscopeValidateProfile(prof, u.bytes.length, checks.sortLabels(labels));
  if (e) return { error: e };
  if (opt.checks === "union") {
    const pe = checks.parcaValidatePprof(prof);
    if (pe) return { error: { code: "invalid_argument", message: `invalid profile (Parca's check, --checks union): ${pe}` } };
  }
  const v = checks.pyroscopeValidateLabels(labels, { labelNames: opt.labelNames });
  return v.error ? { error: v.error } : { labels: v.labels };
}

// pkg/distributor/distributor.go Push and pushSeries (Pyroscope): every sample of
// every series is unpacked and decoded, then each is checked on its own (pushSeries
// runs per series); the good ones are kept even when others fail, and the answer is
// the first error that carries a code, else "unknown" (dskit's multierror, as
// connect-go reads it).
function pyroscopeSeries(rec, list) {
  const errors = [];
  const candidates = [];
  for (const s of list) {
    for (const sample of s.samples) {
      const u = unpack(sample.raw, "pyroscope", checks.PYROSCOPE_LIMITS.maxProfileSizeBytes);
      if (u.error) { errors.push(u.error); continue; }
      let prof;
      try {
        prof = decode(u.bytes);
      } catch (e) {
        errors.push({ code: "unknown", message: `proto: ${e.message}` });
        continue;
      }
      candidates.push({ labels: s.labels.map((l) => ({ name: l.name, value: l.value })), raw: sample.raw, u, prof, id: sample.id ?? "" });
    }
  }
  if (candidates.length === 0 && errors.length === 0) errors.push({ code: "invalid_argument", message: "no profiles received" });
  const good = [];
  for (const [i, c] of candidates.entries()) {
    const r = pyroscopeCheckSeries(c.labels, c.prof, c.u);
    if (r.error) errors.push({ ...r.error, index: i, id: c.id });
    else good.push({ ...c, labels: r.labels });
  }
  for (const g of good) accept(rec, g.labels, g.raw, g.u, g.prof);
  if (errors.length === 0) return null;
  for (const e of errors) refuse(rec, e.code, e.message);
  const coded = errors.find((e) => e.code !== "unknown");
  if (coded) return coded;
  const all = errors.map((e) => e.message);
  return { code: "unknown", message: all.length > 1 ? `${all.length} errors: ${all.join("; ")}` : all[0] };
}

// pkg/normalizer/normalizer.go NormalizeWriteRawRequest and
// pkg/profilestore/profilecolumnstore.go writeSeries (Parca): the first failure
// refuses the whole request, and nothing of it is kept.
function parcaWriteRaw(rec, req) {
  const good = [];
  const fail = (code, message) => {
    refuse(rec, code, message);
    return { code, message };
  };
  for (const s of req.series) {
    const labels = (s.labels?.labels ?? []).map((l) => ({ name: l.name, value: l.value }));
    const v = checks.parcaValidateLabels(labels, { labelNames: opt.labelNames });
    if (v.error) return fail(v.error.code, v.error.message);
    for (const sample of s.samples) {
      const u = unpack(sample.rawProfile, "parca", 0);
      if (u.error) return fail(u.error.code, u.error.message);
      let prof;
      try {
        prof = decode(u.bytes);
      } catch (e) {
        return fail("invalid_argument", `failed to parse profile: ${e.message}`);
      }
      const e = checks.parcaValidatePprof(prof, sample.executableInfo);
      if (e) return fail("invalid_argument", `invalid profile: ${e}`);
      if (opt.checks === "union") {
        const pe = checks.pyroscopeValidateProfile(prof, u.bytes.length, checks.sortLabels(labels));
        if (pe) return fail("invalid_argument", `invalid profile (Pyroscope's check, --checks union): ${pe.message}`);
      }
      good.push({ name: v.name, labels, raw: sample.rawProfile, u, prof });
    }
  }
  for (const g of good) {
    const e = checks.parcaProfileTypeCheck(g.name, g.prof);
    if (e) return fail(e.code, e.message);
  }
  for (const g of good) accept(rec, g.labels, g.raw, g.u, g.prof);
  return null;
}

const kRecord = createContextKey(null, { description: "the request's record" });
const protocolOf = (ctx) => (ctx.protocolName === "grpc-web" ? "grpc-web" : ctx.protocolName);

// modeError: the ConnectError an error mode answers with (Retry-After for 429).
function modeError(rec, m) {
  const e = MODE_ERRORS[m.mode];
  if (!e) return null;
  const headers = {};
  if (m.mode === "429" && m.retry_after !== null) headers["retry-after"] = String(m.retry_after);
  rec.message = m.message ?? e.text;
  return new ConnectError(rec.message, CODE_NAMES[e.code], headers);
}

function rpcAnswer(rec, err) {
  rec.code = err ? err.code : "ok";
  if (err) {
    rec.message = err.message;
    throw new ConnectError(err.message, CODE_NAMES[err.code]);
  }
  return {};
}

// A request's record, its mode taken: what both services do first. Throws the mode's error.
function begin(req, ctx) {
  const rec = ctx.values.get(kRecord);
  rec.protocol = protocolOf(ctx);
  const m = takeMode();
  rec.mode = m.mode;
  rec.series = req.series.length;
  rec.profiles = req.series.reduce((a, s) => a + s.samples.length, 0);
  const me = modeError(rec, m);
  if (me) {
    rec.code = codeName(me.code);
    throw me;
  }
  return rec;
}

const routes = (router) => {
  router.service(PusherService, {
    push(req, ctx) {
      const rec = begin(req, ctx);
      const list = req.series.map((s) => ({ labels: s.labels, samples: s.samples.map((x) => ({ raw: x.rawProfile, id: x.ID })) }));
      return rpcAnswer(rec, pyroscopeSeries(rec, list));
    },
  });
  router.service(ProfileStoreService, {
    writeRaw(req, ctx) {
      const rec = begin(req, ctx);
      return rpcAnswer(rec, parcaWriteRaw(rec, req));
    },
  });
};

const adapter = connectNodeAdapter({
  routes,
  contextValues: (req) => createContextValues().set(kRecord, req.receiverRecord),
});

const readBody = (req) => new Promise((resolve, reject) => {
  const parts = [];
  req.on("data", (c) => parts.push(c));
  req.on("end", () => resolve(Buffer.concat(parts)));
  req.on("error", reject);
});

// What pkg/util/http/error.go ErrorWithStatus writes: {"code", "message"}, the
// code from the status (pkg/util/connectgrpc HTTPToCode).
const HTTP_TO_CODE = { 400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented", 413: "invalid_argument", 429: "resource_exhausted", 503: "unavailable", 502: "unavailable", 504: "deadline_exceeded" };
function ingestAnswer(res, rec, status, message, headers = {}) {
  rec.http_status = status;
  rec.status = String(status);
  rec.code = status === 200 ? "ok" : HTTP_TO_CODE[status] ?? "unknown";
  if (status === 200) {
    res.writeHead(200, headers);
    res.end();
    return;
  }
  rec.message = message;
  res.writeHead(status, { "content-type": "application/json", "x-content-type-options": "nosniff", ...headers });
  res.end(JSON.stringify({ code: rec.code, message }) + "\n");
}

// pkg/ingester/pyroscope/ingest_handler.go (ServeHTTP, parseInputMetadataFromRequest,
// readInputRawDataFromRequest), pkg/og/convert/pprof/profile.go (ParseToPprof,
// loadPprofFromForm, fixTime, createLabels): the legacy /ingest, its pprof part.
async function ingest(req, res, rec) {
  const body = await readBody(req);
  rec.bytes = body.length;
  const m = takeMode();
  rec.mode = m.mode;
  if (MODE_ERRORS[m.mode]) {
    const e = MODE_ERRORS[m.mode];
    const h = m.mode === "429" && m.retry_after !== null ? { "retry-after": String(m.retry_after) } : {};
    return ingestAnswer(res, rec, e.http, m.message ?? e.text, h);
  }
  const fail422 = (msg) => {
    refuse(rec, "unknown", msg);
    return ingestAnswer(res, rec, 422, msg);
  };
  if (req.method !== "POST") return ingestAnswer(res, rec, 405, "method not allowed");
  const q = new URL(req.url, "http://receiver").searchParams;
  const parsed = checks.labelsetParse(q.get("name") ?? "");
  if (parsed.error) {
    refuse(rec, "invalid_argument", `name: ${parsed.error}`);
    return ingestAnswer(res, rec, 400, `name: ${parsed.error}`);
  }
  const fromMs = q.has("from") ? checks.attimeParseMs(q.get("from")) : Date.now();
  const spy = q.get("spyName") || "unknown";
  const format = q.get("format") ?? "";
  const ct = req.headers["content-type"] || "";
  // The handler's switch, in its order: the other formats are not pprof.
  const other = ["trie", "tree", "lines", "jfr", "speedscope"].includes(format) || ct === "binary/octet-stream+trie" || ct === "binary/octet-stream+tree";
  let profile = null;
  let stc = null;
  if (other || (format !== "pprof" && !ct.includes("multipart/form-data"))) {
    return fail422(`receiver: format=${format || "(none)"} with ${ct || "no content type"} is not pprof; the receiver takes format=pprof or a multipart form`);
  } else if (format === "pprof") {
    profile = body;
  } else {
    const prefix = "parsing IngestInput-pprof failed failed to parse pprof /ingest multipart form ";
    let form;
    try {
      form = await new Response(body, { headers: { "content-type": ct } }).formData();
    } catch (e) {
      return fail422(prefix + e.message);
    }
    // pkg/og/util/form ReadField: file parts only; an empty or absent one is none.
    const file = async (n) => {
      const f = form.get(n);
      return f && typeof f !== "string" && f.size > 0 ? Buffer.from(await f.arrayBuffer()) : null;
    };
    profile = await file("profile");
    if (await file("prev_profile")) {
      return fail422(prefix + "unsupported client version. Please update github.com/grafana/pyroscope-go to the latest version");
    }
    const c = await file("sample_type_config");
    if (c) {
      try {
        stc = JSON.parse(c.toString());
      } catch (e) {
        return fail422(prefix + e.message);
      }
    }
  }
  rec.series = 1;
  rec.profiles = profile && profile.length ? 1 : 0;
  if (!profile || profile.length === 0) {
    rec.message = "empty profile: nothing stored (as the server does)";
    return ingestAnswer(res, rec, 200);
  }
  const u = unpack(profile, "pyroscope", checks.PYROSCOPE_LIMITS.maxProfileSizeBytes);
  if (u.error) return fail422(`parsing IngestInput-pprof failed ${u.error.message}`);
  let prof;
  try {
    prof = decode(u.bytes);
  } catch (e) {
    return fail422(`parsing IngestInput-pprof failed proto: ${e.message}`);
  }
  if (prof.timeNanos === 0 || new Date(prof.timeNanos / 1e6).getUTCFullYear() === 1970) {
    prof.timeNanos = fromMs * 1e6;
    prof.timeNanosExact = BigInt(fromMs) * 1000000n;
  }
  const labels = checks.ingestLabels(prof, parsed, spy, stc);
  // PushBatch: pushSeries's checks; any failure is a 422 here (not a 429: no rate limit is played).
  const r = pyroscopeCheckSeries(labels, prof, u);
  if (r.error) {
    refuse(rec, r.error.code, r.error.message);
    return ingestAnswer(res, rec, 422, `pushing IngestInput-pprof failed push series with index 0 and id  failed: ${r.error.code}: ${r.error.message}`);
  }
  accept(rec, r.labels, profile, u, prof);
  return ingestAnswer(res, rec, 200);
}

// ---- the listeners ----

const hung = new Set();
function servingHandler(port) {
  return (req, res) => {
    const rec = {
      seq: ++requestSeq, time: new Date().toISOString(), port, method: req.method, path: req.url.split("?")[0],
      protocol: guessProtocol(req), mode: null, status: null, http_status: null, code: null, message: null,
      headers: pickHeaders(req.headers), content_type: req.headers["content-type"] ?? null,
      content_encoding: req.headers["content-encoding"] ?? req.headers["grpc-encoding"] ?? null,
      user_agent: req.headers["user-agent"] ?? null, series: null, profiles: null, accepted: 0, bytes: null,
    };
    if (mode.mode === "hang") {
      rec.mode = takeMode().mode;
      rec.status = "hang";
      finishRequest(rec);
      req.resume();
      hung.add(res);
      res.on("close", () => hung.delete(res));
      return;
    }
    // The status as sent: the HTTP status, and for gRPC and gRPC-web the grpc-status
    // (in the headers, the trailers, or gRPC-web's trailer frame).
    let grpcStatus = null;
    const wh = res.writeHead.bind(res);
    res.writeHead = (status, ...rest) => {
      rec.http_status = status;
      const h = rest.find((x) => x && typeof x === "object") || {};
      for (const [k, v] of Object.entries(h)) if (k.toLowerCase() === "grpc-status") grpcStatus = Number(v);
      return wh(status, ...rest);
    };
    if (typeof res.addTrailers === "function") {
      const at = res.addTrailers.bind(res);
      res.addTrailers = (t) => {
        for (const [k, v] of Object.entries(t || {})) if (k.toLowerCase() === "grpc-status") grpcStatus = Number(v);
        return at(t);
      };
    }
    const sniff = (chunk) => {
      if (chunk && chunk.length > 5 && chunk[0] === 0x80) {
        const mt = /grpc-status:\s*(\d+)/i.exec(Buffer.from(chunk).toString("latin1"));
        if (mt) grpcStatus = Number(mt[1]);
      }
    };
    const w = res.write.bind(res);
    res.write = (chunk, ...rest) => { sniff(chunk); return w(chunk, ...rest); };
    const en = res.end.bind(res);
    res.end = (chunk, ...rest) => { if (chunk && typeof chunk !== "function") sniff(chunk); return en(chunk, ...rest); };
    res.on("close", () => {
      if (rec.protocol === "grpc" || rec.protocol === "grpc-web") {
        if (grpcStatus !== null) rec.code = codeName(grpcStatus);
        rec.status = rec.code ? rec.code.toUpperCase() : res.writableFinished ? "UNKNOWN" : "closed";
      } else if (rec.status === null) {
        rec.status = rec.http_status !== null ? String(rec.http_status) : "closed";
      }
      finishRequest(rec);
    });
    if (rec.protocol === "ingest") {
      ingest(req, res, rec).catch((e) => {
        log(`ingest failed: ${e.stack || e}`);
        if (!res.headersSent) ingestAnswer(res, rec, 500, `receiver: ${e.message}`);
        else res.destroy();
      });
      return;
    }
    req.receiverRecord = rec;
    adapter(req, res);
  };
}

const listen = (server, port) => new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(port, "127.0.0.1", () => {
    server.off("error", reject);
    resolve(server.address().port);
  });
});

// The two serving listeners; "down" closes them (and every connection they hold),
// any other mode opens them again on the same ports.
const serving = { http: null, h2c: null, sockets: new Set(), ports: { http: 0, h2c: 0 } };
async function openServing() {
  const track = (server) => server.on("connection", (s) => {
    serving.sockets.add(s);
    s.on("close", () => serving.sockets.delete(s));
  });
  serving.http = http.createServer(servingHandler("http"));
  serving.h2c = http2.createServer({}, servingHandler("h2c"));
  track(serving.http);
  track(serving.h2c);
  serving.ports.http = await listen(serving.http, serving.ports.http);
  serving.ports.h2c = await listen(serving.h2c, serving.ports.h2c);
}
async function closeServing() {
  const servers = [serving.http, serving.h2c].filter(Boolean);
  serving.http = serving.h2c = null;
  const closed = servers.map((s) => new Promise((resolve) => s.close(() => resolve())));
  for (const s of serving.sockets) s.destroy();
  for (const r of hung) r.destroy?.();
  await Promise.race([Promise.all(closed), new Promise((r) => setTimeout(r, 2000))]);
}

// ---- the admin API ----

async function admin(req, res) {
  const send = (status, obj) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(obj) + "\n");
  };
  try {
    if (req.method === "POST" && req.url === "/mode") {
      let b;
      try {
        b = JSON.parse((await readBody(req)).toString() || "{}");
      } catch (e) {
        return send(400, { error: `not JSON: ${e.message}` });
      }
      if (!MODES.includes(String(b.mode))) return send(400, { error: `mode is one of ${MODES.join(" ")}` });
      const num = (v) => (v === undefined || v === null ? null : Number(v));
      const next = { mode: String(b.mode), retry_after: num(b.retry_after), message: b.message ?? null, count: num(b.count) };
      if ((next.retry_after !== null && !(next.retry_after >= 0)) || (next.count !== null && !(next.count >= 1))) {
        return send(400, { error: "retry_after is seconds (>= 0), count a number of requests (>= 1)" });
      }
      const wasDown = mode.mode === "down";
      if (next.mode === "down" && !wasDown) await closeServing();
      if (next.mode !== "down" && wasDown) await openServing();
      mode = next;
      log(`mode ${JSON.stringify(mode)}`);
      return send(200, mode);
    }
    if (req.method === "GET" && req.url === "/mode") return send(200, mode);
    if (req.method === "GET" && req.url.split("?")[0] === "/summary") {
      const idle = await whenIdle(30000);
      return send(200, { requests: requestSeq, by_status: byStatus, series, refused, profiles: accepted, pending, idle });
    }
    return send(404, { error: "POST /mode, GET /mode, GET /summary" });
  } catch (e) {
    return send(500, { error: String(e.message || e) });
  }
}

const adminServer = http.createServer(admin);
await openServing();
const adminPort = await listen(adminServer, 0);
process.stdout.write(`listening http=${serving.ports.http} h2c=${serving.ports.h2c} admin=${adminPort}\n`);

const stop = () => {
  for (const s of serving.sockets) s.destroy();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

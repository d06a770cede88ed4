// Validates Kubernetes manifests against the API schema with kubernetes-models
// (each model's validate() checks the object against the OpenAPI schema of its
// apiVersion and kind), and states what tests/deploy/k8s.sh checks of them.
//
//   node validate.mjs FILE.yaml...          one "ok KIND NAME" or "FAIL ..." line per object
//   node validate.mjs --caps FILE.yaml      "CONTAINER add X" and "CONTAINER drop X" lines for
//                                           each DaemonSet container
//   node validate.mjs --facts FILE.yaml...  "KEY VALUE" lines: the pod's, then the first
//                                           container's unprefixed, then every container's as
//                                           "NAME.KEY VALUE"
//   node validate.mjs --args NAME FILE.yaml...  container NAME's command and args, one a line,
//                                           each $(VAR) replaced as the kubelet would from its env
//                                           (a ConfigMap key's value; a fieldRef as
//                                           "<fieldPath>"); an unresolved $(VAR) fails
//   node validate.mjs --data FILE.yaml...   "KIND/NAME KEY VALUE" for each key of each object's
//                                           data and stringData
//   node validate.mjs --refs FILE.yaml...   what the DaemonSet refers to: "configmap NAME KEY",
//                                           "secret NAME", "secret-env VAR", each prefixed with
//                                           "missing " when the files do not hold it
// Run with NODE_PATH unset: modules resolve from the working directory's node_modules.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(pathToFileURL(process.cwd() + "/"));
const YAML = require("yaml");
const models = {
  "v1/Namespace": require("kubernetes-models/v1/Namespace").Namespace,
  "v1/ServiceAccount": require("kubernetes-models/v1/ServiceAccount").ServiceAccount,
  "v1/ConfigMap": require("kubernetes-models/v1/ConfigMap").ConfigMap,
  "v1/Secret": require("kubernetes-models/v1/Secret").Secret,
  "apps/v1/DaemonSet": require("kubernetes-models/apps/v1/DaemonSet").DaemonSet,
};

function docs(file) {
  return YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o !== null);
}

const daemonSets = (all) => all.filter((o) => o.kind === "DaemonSet");
const configMap = (all) => all.find((o) => o.kind === "ConfigMap") || { data: {} };

// @a with each $(VAR) replaced from @c's env as the kubelet does ($$ is a $); null if one is not defined.
function expand(a, c, cm) {
  let bad = false;
  const v = String(a).replace(/\$\$|\$\((\w+)\)/g, (m, name) => {
    if (m === "$$") return "$";
    const e = (c.env || []).find((x) => x.name === name);
    const from = (e && e.valueFrom) || {};
    if (e && "value" in e) return e.value;
    if (from.configMapKeyRef && from.configMapKeyRef.key in (cm.data || {}))
      return cm.data[from.configMapKeyRef.key];
    if (from.fieldRef) return `<${from.fieldRef.fieldPath}>`;
    bad = true;
    return m;
  });
  return bad ? null : v;
}

// A quantity ("50m", "1", "64Mi", "256M") as a number: cores, or bytes; NaN if it is none.
function quantity(q) {
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(String(q));
  const mul = m && { "": 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[m[2]];
  return mul ? Number(m[1]) * mul : NaN;
}

// The first container's facts, as k8s.sh has always read them (no prefix).
function agentFacts(c, vols, cm, out) {
  const sc = c.securityContext || {};
  out("privileged", sc.privileged);
  out("runAsUser", sc.runAsUser);
  for (const m of c.volumeMounts || []) {
    const v = vols[m.name] || {};
    const src = v.hostPath ? `hostPath:${v.hostPath.path}` : v.emptyDir ? "emptyDir" : "?";
    out(`mount:${m.mountPath}`, `${src}:${m.readOnly ? "ro" : "rw"}`);
  }
  for (const k of ["requests", "limits"])
    for (const r of ["cpu", "memory"]) out(`${k}.${r}`, ((c.resources || {})[k] || {})[r]);
  const probe = c.livenessProbe || {};
  const h = probe.httpGet || {};
  const port = typeof h.port === "string" ? ((c.ports || []).find((x) => x.name === h.port) || {}).containerPort : h.port;
  out("liveness", probe.exec ? `exec:${(probe.exec.command || []).join(" ")}` : `${h.path}:${port}`);
  const a = c.args || [];
  const i = a.indexOf("--metrics-listen");
  out("metrics-listen", i >= 0 ? expand(a[i + 1], c, cm) : "");
  const m = a.indexOf("--map-dir");
  out("map-dir", m >= 0 ? a[m + 1] : "");
}

// Every container's facts, as "NAME.KEY VALUE".
function containerFacts(c, vols, cm, out) {
  const sc = c.securityContext || {};
  const r = c.resources || {};
  const a = c.args || [];
  out("image", c.image);
  out("privileged", sc.privileged);
  out("runAsUser", sc.runAsUser);
  out("allowPrivilegeEscalation", sc.allowPrivilegeEscalation);
  out("readOnlyRootFilesystem", sc.readOnlyRootFilesystem);
  out("seccomp", (sc.seccompProfile || {}).type);
  for (const m of c.volumeMounts || []) {
    const v = vols[m.name] || {};
    const src = v.hostPath ? `hostPath:${v.hostPath.path}`
      : v.emptyDir ? `emptyDir:${v.emptyDir.medium || "disk"}:${quantity(v.emptyDir.sizeLimit)}`
      : v.secret ? `secret:${v.secret.secretName}:${v.secret.optional === true ? "optional" : "required"}`
      : "?";
    // The volume's name too: two containers share a directory when they mount the same volume.
    out(`mount:${m.mountPath}`, `${m.name}:${src}:${m.readOnly ? "ro" : "rw"}`);
  }
  for (const k of ["cpu", "memory"]) {
    const req = quantity((r.requests || {})[k]), lim = quantity((r.limits || {})[k]);
    out(`resources.${k}`, `${req} ${lim}`);
  }
  for (const f of ["--map-dir", "--run-dir", "--archive-dir", "--push-spool", "--push-spool-max",
                   "--push-token-file", "--push-basic-auth-file"]) {
    const i = a.indexOf(f);
    out(`arg${f}`, i >= 0 ? expand(a[i + 1], c, cm) : "");
  }
  out("liveness", c.livenessProbe ? Object.keys(c.livenessProbe).filter((k) => /^(exec|httpGet|tcpSocket|grpc)$/.test(k)).join(",") : "none");
}

const args = process.argv.slice(2);
if (args[0] === "--caps") {
  for (const o of daemonSets(docs(args[1]))) {
    for (const c of o.spec.template.spec.containers) {
      const caps = (c.securityContext || {}).capabilities || {};
      for (const x of caps.add || []) console.log(`${c.name} add ${x}`);
      for (const x of caps.drop || []) console.log(`${c.name} drop ${x}`);
    }
  }
  process.exit(0);
}
if (args[0] === "--facts") {
  const all = args.slice(1).flatMap(docs);
  const cm = configMap(all);
  for (const o of daemonSets(all)) {
    const p = o.spec.template.spec;
    const vols = Object.fromEntries((p.volumes || []).map((v) => [v.name, v]));
    const out = (k, v) => console.log(`${k} ${v}`);
    out("containers", p.containers.length);
    out("container-names", p.containers.map((c) => c.name).join(" "));
    out("hostPID", p.hostPID === true);
    out("hostNetwork", p.hostNetwork === true);
    out("serviceAccount", p.serviceAccountName);
    agentFacts(p.containers[0], vols, cm, out);
    for (const c of p.containers) containerFacts(c, vols, cm, (k, v) => out(`${c.name}.${k}`, v));
  }
  process.exit(0);
}
if (args[0] === "--args") {
  const all = args.slice(2).flatMap(docs);
  const cm = configMap(all);
  for (const o of daemonSets(all)) {
    const c = o.spec.template.spec.containers.find((x) => x.name === args[1]);
    if (!c) {
      console.error(`no container ${args[1]}`);
      process.exit(1);
    }
    for (const a of [...(c.command || []), ...(c.args || [])]) {
      const v = expand(a, c, cm);
      if (v === null) {
        console.error(`unresolved: ${a}`);
        process.exit(1);
      }
      console.log(v);
    }
  }
  process.exit(0);
}
if (args[0] === "--data") {
  for (const o of args.slice(1).flatMap(docs)) {
    const d = { ...(o.data || {}), ...(o.stringData || {}) };
    for (const [k, v] of Object.entries(d)) console.log(`${o.kind}/${o.metadata.name} ${k} ${v}`);
  }
  process.exit(0);
}
if (args[0] === "--refs") {
  const all = args.slice(1).flatMap(docs);
  const has = (kind, name) => all.some((o) => o.kind === kind && o.metadata.name === name);
  const say = (what, ok) => console.log(ok ? what : `missing ${what}`);
  for (const o of daemonSets(all)) {
    const p = o.spec.template.spec;
    for (const c of p.containers) {
      for (const e of c.env || []) {
        const from = e.valueFrom || {};
        const r = from.configMapKeyRef;
        if (r) {
          const m = all.find((x) => x.kind === "ConfigMap" && x.metadata.name === r.name);
          say(`configmap ${r.name} ${r.key}`, m && r.key in (m.data || {}));
        }
        if (from.secretKeyRef) console.log(`secret-env ${e.name}`);
      }
    }
    for (const v of p.volumes || []) {
      if (v.secret) say(`secret ${v.secret.secretName}`, has("Secret", v.secret.secretName));
      if (v.configMap) say(`configmap ${v.configMap.name}`, has("ConfigMap", v.configMap.name));
    }
  }
  process.exit(0);
}
let failed = 0;
for (const file of args) {
  let objs;
  try {
    objs = docs(file);
  } catch (e) {
    console.log(`FAIL ${file}: not YAML: ${e.message}`);
    failed++;
    continue;
  }
  if (objs.length === 0) {
    console.log(`FAIL ${file}: no object`);
    failed++;
  }
  for (const o of objs) {
    const key = `${o.apiVersion}/${o.kind}`;
    const Model = models[key];
    const name = `${file}: ${key} ${o.metadata && o.metadata.name}`;
    if (!Model) {
      console.log(`FAIL ${name}: no model for ${key}`);
      failed++;
      continue;
    }
    try {
      new Model(o).validate();
      console.log(`ok ${name}`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.message}`);
      failed++;
    }
  }
}
process.exit(failed ? 1 : 0);

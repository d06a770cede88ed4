// Validates Kubernetes manifests against the API schema with kubernetes-models
// (each model's validate() checks the object against the OpenAPI schema of its
// apiVersion and kind). Used by tests/deploy/k8s.sh.
//
//   node validate.mjs FILE.yaml...          one "ok KIND NAME" or "FAIL ..." line per object
//   node validate.mjs --caps FILE.yaml      "add X" and "drop X" lines for each DaemonSet container
//   node validate.mjs --facts FILE.yaml...  "KEY VALUE" lines: what k8s.sh checks of the DaemonSet
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
  "apps/v1/DaemonSet": require("kubernetes-models/apps/v1/DaemonSet").DaemonSet,
};

function docs(file) {
  return YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o !== null);
}

const args = process.argv.slice(2);
let failed = 0;
if (args[0] === "--caps") {
  for (const o of docs(args[1])) {
    if (o.kind !== "DaemonSet") continue;
    for (const c of o.spec.template.spec.containers) {
      const caps = (c.securityContext || {}).capabilities || {};
      for (const x of caps.add || []) console.log(`add ${x}`);
      for (const x of caps.drop || []) console.log(`drop ${x}`);
    }
  }
  process.exit(0);
}
if (args[0] === "--facts") {
  const all = args.slice(1).flatMap(docs);
  const cm = all.find((o) => o.kind === "ConfigMap") || { data: {} };
  for (const o of all) {
    if (o.kind !== "DaemonSet") continue;
    const p = o.spec.template.spec;
    const c = p.containers[0];
    const sc = c.securityContext || {};
    const vols = Object.fromEntries((p.volumes || []).map((v) => [v.name, v]));
    const out = (k, v) => console.log(`${k} ${v}`);
    out("containers", p.containers.length);
    out("hostPID", p.hostPID === true);
    out("hostNetwork", p.hostNetwork === true);
    out("serviceAccount", p.serviceAccountName);
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
    let listen = i >= 0 ? a[i + 1] : "";
    listen = listen.replace(/^\$\((\w+)\)$/, (_, env) => {
      const e = (c.env || []).find((x) => x.name === env) || {};
      const ref = (e.valueFrom || {}).configMapKeyRef;
      return ref ? cm.data[ref.key] : e.value;
    });
    out("metrics-listen", listen);
    const m = a.indexOf("--map-dir");
    out("map-dir", m >= 0 ? a[m + 1] : "");
  }
  process.exit(0);
}
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

// Schema check of deploy/*.yaml documents (given as JSON on stdin, one array
// of {file, doc}), with the npm package kubernetes-models: JSON schemas
// generated from the Kubernetes OpenAPI spec (and the Prometheus Operator
// CRDs). Two passes per document:
//   schema  the package's validate(): types, enums, required fields;
//   strict  every key must be a field the type declares (what kubeconform
//           -strict adds), found by walking the package's .d.ts types.
// Prints PASS/FAIL lines; run by tests/stages/deploy.sh with NODE_PATH set.
"use strict";
const fs = require("fs");
const path = require("path");

const MODELS = {
  "v1/Namespace": "kubernetes-models/v1/Namespace",
  "v1/ServiceAccount": "kubernetes-models/v1/ServiceAccount",
  "v1/ConfigMap": "kubernetes-models/v1/ConfigMap",
  "v1/Service": "kubernetes-models/v1/Service",
  "v1/Secret": "kubernetes-models/v1/Secret",
  "apps/v1/DaemonSet": "kubernetes-models/apps/v1/DaemonSet",
  "monitoring.coreos.com/v1/PodMonitor": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
  "monitoring.coreos.com/v1/PrometheusRule": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule",
};

// The declared fields of the interface in a .d.ts file. A field's type is
// another model (a .d.ts to follow), an inline object type (its own fields),
// a map ({ [key: string]: ... }, any keys), or a scalar; arrays of any of
// these are walked element by element.
const typeCache = new Map();

// Split a type body "{ "a"?: T; "b": { ... }; }" into [name, type] pairs.
function splitFields(body) {
  const out = [];
  let i = 0;
  while (i < body.length) {
    const m = /"([^"]+)"\??:\s*/y;
    m.lastIndex = i;
    const hit = m.exec(body);
    if (!hit) { i++; continue; }
    let j = m.lastIndex, depth = 0;
    for (; j < body.length; j++) {
      const c = body[j];
      if (c === "{" || c === "<" || c === "(") depth++;
      else if (c === "}" || c === ">" || c === ")") depth--;
      else if (c === ";" && depth === 0) break;
    }
    out.push([hit[1], body.slice(m.lastIndex, j).trim()]);
    i = j + 1;
  }
  return out;
}

function describeType(type, imports, dtsPath) {
  const inner = type.match(/^Array<([\s\S]*)>$/);
  if (inner) return describeType(inner[1].trim(), imports, dtsPath);
  if (type.startsWith("{")) {
    if (/^\{\s*\[key: string\]/.test(type)) return { any: true };
    return { fields: fieldsOf(type.slice(1, -1), imports, dtsPath) };
  }
  const ref = type.match(/^(I\w+)$/);
  if (ref && imports.has(ref[1])) {
    const from = imports.get(ref[1]);
    return { dts: from.startsWith(".") ? path.resolve(path.dirname(dtsPath), from) + ".d.ts"
                                       : require.resolve(from).replace(/\.js$/, ".d.ts") };
  }
  return { any: true };  // scalars, unions, IntOrString: the schema pass checks them
}

function fieldsOf(body, imports, dtsPath) {
  const fields = new Map();
  for (const [name, type] of splitFields(body)) fields.set(name, describeType(type, imports, dtsPath));
  return fields;
}

function declaredFields(dtsPath) {
  if (typeCache.has(dtsPath)) return typeCache.get(dtsPath);
  const text = fs.readFileSync(dtsPath, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ ([^}]+) \} from "([^"]+)";/g)) {
    for (const name of m[1].split(",").map((s) => s.trim().split(/\s+as\s+/).pop())) {
      imports.set(name, m[2]);
    }
  }
  const head = text.match(/export interface \w+(?: extends ([\w, ]+))? \{/);
  if (!head) throw new Error(`no interface in ${dtsPath}`);
  let depth = 0, end = head.index + head[0].length - 1;
  for (; end < text.length; end++) {
    if (text[end] === "{") depth++;
    else if (text[end] === "}" && --depth === 0) break;
  }
  const fields = fieldsOf(text.slice(head.index + head[0].length, end), imports, dtsPath);
  // TypeMeta (apiVersion, kind) comes from the base class.
  if (head[1] && /TypeMeta/.test(head[1])) {
    fields.set("apiVersion", { any: true });
    fields.set("kind", { any: true });
  }
  typeCache.set(dtsPath, fields);
  return fields;
}

function unknownKeys(value, desc, where, out) {
  if (value === null || typeof value !== "object" || desc.any) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownKeys(v, desc, `${where}[${i}]`, out));
    return;
  }
  const fields = desc.fields || declaredFields(desc.dts);
  for (const [key, v] of Object.entries(value)) {
    if (!fields.has(key)) out.push(`${where}.${key}`);
    else unknownKeys(v, fields.get(key), `${where}.${key}`, out);
  }
}

let failed = 0;
const report = (status, name, why) => {
  if (status === "FAIL") failed++;
  console.log(`${status}: ${name}${why ? ": " + why : ""}`);
};

const items = JSON.parse(fs.readFileSync(0, "utf8"));
for (const { file, doc } of items) {
  const id = `${doc.apiVersion}/${doc.kind}`;
  const name = `${path.basename(file)} ${doc.kind}/${doc.metadata && doc.metadata.name}`;
  const mod = MODELS[id];
  if (!mod) { report("FAIL", `schema ${name}`, `no schema known for ${id}`); continue; }
  const Cls = require(mod)[doc.kind];
  try {
    new Cls(doc).validate();
    report("PASS", `schema ${name}`);
  } catch (e) {
    report("FAIL", `schema ${name}`, e.message.replace(/\s+/g, " "));
  }
  const bad = [];
  unknownKeys(doc, { dts: require.resolve(mod).replace(/\.js$/, ".d.ts") }, doc.kind, bad);
  if (bad.length) report("FAIL", `strict ${name}`, `unknown fields: ${bad.join(", ")}`);
  else report("PASS", `strict ${name}`);
}
process.exit(failed ? 1 : 0);

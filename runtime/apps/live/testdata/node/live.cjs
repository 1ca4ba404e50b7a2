// Foxglove's own WebSocket client (@foxglove/ws-protocol's FoxgloveClient,
// over the `ws` package) against the live view, for the Go tests: it
// connects, subscribes to every channel (or those matching --topics),
// decodes protobuf messages from the advertised FileDescriptorSets as
// Foxglove does (protobufjs), checks JSON messages against the
// advertised JSON Schemas' required keys, compares the annotation schema
// with @foxglove/schemas, measures frame -> client latency on the image
// channels, optionally sets parameters, and prints one JSON report.
//
//   node live.cjs URL [--seconds N] [--topics REGEX] [--token T]
//                     [--set NAME=VALUE ...] [--get] [--quiet-after-set]
//                     [--origin ORIGIN]   (the Origin header a browser page would send)
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");
const protobuf = require("protobufjs");
require("protobufjs/ext/descriptor");
const foxJSON = require("@foxglove/schemas/jsonschema");

const args = process.argv.slice(2);
const url = args[0];
let seconds = 5, topicRe = null, token = null, wantGet = false, origin = undefined;
const sets = [];
for (let i = 1; i < args.length; i++) {
  const a = args[i];
  if (a === "--seconds") seconds = Number(args[++i]);
  else if (a === "--topics") topicRe = new RegExp(args[++i]);
  else if (a === "--token") token = args[++i];
  else if (a === "--get") wantGet = true;
  else if (a === "--origin") origin = args[++i];
  else if (a === "--set") {
    const [name, value] = args[++i].split("=");
    sets.push({ name, value: Number(value) });
  } else throw new Error("unknown argument " + a);
}

const report = {
  serverInfo: null, channels: {}, counts: {}, decoded: {}, jsonChecks: {}, schemaChecks: {},
  latencyMs: {}, statuses: [], parameters: null, setReply: null, errors: [], closed: null,
};

function sameJSON(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

// requiredCheck walks a JSON Schema's required and properties keywords.
function requiredCheck(schema, v, path, out) {
  if (!schema || typeof schema !== "object") return;
  if (schema.type === "object" && v && typeof v === "object" && !Array.isArray(v)) {
    for (const k of schema.required || []) if (!(k in v)) out.push(`${path}.${k} missing`);
    if (schema.additionalProperties === false && schema.properties)
      for (const k of Object.keys(v)) if (!(k in schema.properties)) out.push(`${path}.${k} not allowed`);
    for (const [k, s] of Object.entries(schema.properties || {})) if (k in v) requiredCheck(s, v[k], `${path}.${k}`, out);
  }
  if (schema.type === "array" && Array.isArray(v) && schema.items) v.forEach((x, i) => requiredCheck(schema.items, x, `${path}[${i}]`, out));
  if (schema.enum && !schema.enum.includes(v)) out.push(`${path}: ${JSON.stringify(v)} not in enum`);
  if ("const" in schema && v !== schema.const) out.push(`${path}: ${JSON.stringify(v)} != const`);
}

function summarize(obj) {
  const out = {};
  for (const [k, v] of Object.entries(obj)) {
    if (v instanceof Uint8Array) out[k] = { bytes: v.length, head: Array.from(v.subarray(0, 4)) };
    else if (Array.isArray(v)) out[k] = v.length <= 12 ? v : { length: v.length };
    else if (v && typeof v === "object" && "seconds" in v) out[k] = { sec: Number(v.seconds), nsec: v.nanos };
    else out[k] = v;
  }
  return out;
}

function pct(xs, p) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const headers = token ? { Authorization: "Bearer " + token } : {};
const ws = new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL], origin ? { headers, origin } : { headers });
const client = new FoxgloveClient({ ws });
const subs = new Map(); // subscription id -> channel
const decoders = new Map(); // channel id -> decode(bytes)
const latencies = {};

client.on("error", (e) => report.errors.push(String(e && e.message ? e.message : e)));
client.on("close", (e) => { report.closed = { code: e.code, reason: String(e.reason || "") }; });
client.on("serverInfo", (info) => { report.serverInfo = info; });
client.on("status", (s) => report.statuses.push(s));
client.on("advertise", (channels) => {
  for (const ch of channels) {
    report.channels[ch.topic] = { id: ch.id, encoding: ch.encoding, schemaName: ch.schemaName, schemaEncoding: ch.schemaEncoding };
    if (ch.encoding === "protobuf") {
      const set = protobuf.descriptor.FileDescriptorSet.decode(Buffer.from(ch.schema, "base64"));
      const type = protobuf.Root.fromDescriptor(set).lookupType(ch.schemaName);
      decoders.set(ch.id, (b) => type.toObject(type.decode(b), { longs: Number }));
    } else if (ch.encoding === "json") {
      const schema = JSON.parse(ch.schema);
      if (ch.schemaName.startsWith("foxglove.")) {
        const official = foxJSON[ch.schemaName.replace(/^foxglove\./, "")];
        report.schemaChecks[ch.topic] = official && sameJSON(official, schema) ? "ok" : "differs from @foxglove/schemas";
      }
      decoders.set(ch.id, (b) => {
        const v = JSON.parse(new TextDecoder().decode(b));
        const problems = [];
        requiredCheck(schema, v, "", problems);
        if (!(ch.topic in report.jsonChecks)) report.jsonChecks[ch.topic] = problems.length ? problems.join("; ") : "ok";
        return v;
      });
    }
    if (!topicRe || topicRe.test(ch.topic)) subs.set(client.subscribe(ch.id), ch);
  }
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const now = BigInt(Date.now()) * 1000000n;
  const ch = subs.get(subscriptionId);
  if (!ch) { report.errors.push(`message for unknown subscription ${subscriptionId}`); return; }
  report.counts[ch.topic] = (report.counts[ch.topic] || 0) + 1;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let msg;
  try { msg = decoders.get(ch.id)(bytes); } catch (e) { report.errors.push(`${ch.topic}: ${e.message}`); return; }
  if (/\/image$/.test(ch.topic)) (latencies[ch.topic] ||= []).push(Number(now - timestamp) / 1e6);
  if (!(ch.topic in report.decoded)) report.decoded[ch.topic] = ch.encoding === "protobuf" ? summarize(msg) : msg;
  // The last JSON message of each events / annotations channel too.
  if (ch.encoding === "json") report.decoded[ch.topic + "#last"] = msg;
});
client.on("parameterValues", (pv) => {
  if (pv.id === "get") report.parameters = pv.parameters;
  if (pv.id === "set") report.setReply = pv.parameters;
});
client.on("open", () => {
  if (wantGet) client.getParameters([], "get");
  if (sets.length) setTimeout(() => client.setParameters(sets, "set"), 300);
});

setTimeout(() => {
  for (const [t, xs] of Object.entries(latencies)) report.latencyMs[t] = { n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95), max: pct(xs, 100) };
  client.close();
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exit(0);
}, seconds * 1000);

// Independent reader for the Go tests: Foxglove's @mcap/core reads an MCAP
// file either through its summary (McapIndexedReader) or as a stream
// (McapStreamReader, no summary needed), decompresses chunks with
// @mcap/support's handlers (the ones Foxglove uses), decodes protobuf
// messages from the schema's FileDescriptorSet like Foxglove does, compares
// the descriptors with the .proto files @foxglove/schemas generates, and
// prints one JSON report on stdout.
//
//   node check.cjs indexed|stream FILE
"use strict";
const fs = require("node:fs");
const { McapIndexedReader, McapStreamReader } = require("@mcap/core");
const { loadDecompressHandlers, protobufFromBinaryDescriptor } = require("@mcap/support");
const protobuf = require("protobufjs");
const { foxgloveMessageSchemas } = require("@foxglove/schemas/internal");
const { generateProto } = require("@foxglove/schemas/internal");

function toNumber(v) {
  if (typeof v === "bigint") return Number(v);
  if (v && typeof v.toNumber === "function") return v.toNumber(); // protobufjs Long
  return v;
}

// officialFields: name -> {id, type, rule} from the .proto Foxglove generates.
function officialFields(messageName) {
  const short = messageName.replace(/^foxglove\./, "");
  const schema = foxgloveMessageSchemas[short];
  if (!schema) return null;
  const text = generateProto(schema, []).replace(/^import .*$/gm, "");
  const root = protobuf.parse(text, { keepCase: true }).root;
  // google.protobuf.Timestamp is a well-known type protobufjs knows.
  const t = root.lookupType(messageName);
  const out = {};
  for (const f of t.fieldsArray) out[f.name] = { id: f.id, type: f.type, repeated: f.repeated };
  return out;
}

function compareDescriptor(schemaName, type) {
  const want = officialFields(schemaName);
  if (!want) return "no official schema";
  const got = {};
  for (const f of type.fieldsArray) got[f.name] = { id: f.id, type: f.type, repeated: f.repeated };
  const problems = [];
  for (const [n, w] of Object.entries(want)) {
    const g = got[n];
    const wt = w.type.replace(/^\.?google\.protobuf\./, "");
    const gt = g ? g.type.replace(/^\.?google\.protobuf\./, "") : "";
    if (!g) problems.push(`missing field ${n}`);
    else if (g.id !== w.id || gt !== wt || g.repeated !== w.repeated)
      problems.push(`field ${n}: got ${g.id} ${g.type}${g.repeated ? "[]" : ""}, want ${w.id} ${w.type}${w.repeated ? "[]" : ""}`);
  }
  for (const n of Object.keys(got)) if (!want[n]) problems.push(`extra field ${n}`);
  return problems.length ? problems.join("; ") : "ok";
}

function summarizeDecoded(obj) {
  const out = {};
  for (const [k, v] of Object.entries(obj)) {
    if (v instanceof Uint8Array) out[k] = { bytes: v.length, head: Array.from(v.subarray(0, 8)) };
    else if (k === "timestamp" && v) out[k] = { sec: toNumber(v.seconds), nsec: v.nanos };
    else out[k] = v;
  }
  return out;
}

async function main() {
  const [mode, file] = process.argv.slice(2);
  const decompressHandlers = await loadDecompressHandlers();
  const data = fs.readFileSync(file);
  const report = { mode, file, counts: {}, sequences: {}, logTimes: {}, channels: {}, schemas: {}, metadata: [],
    decoded: {}, descriptors: {}, jsonChecks: {}, complete: false };
  const schemas = new Map(); const channels = new Map(); const types = new Map();

  function onSchema(s) {
    schemas.set(s.id, s);
    report.schemas[s.name] = s.encoding;
    if (s.encoding === "protobuf") {
      const root = protobufFromBinaryDescriptor(s.data);
      const type = root.lookupType(s.name);
      types.set(s.id, type);
      report.descriptors[s.name] = compareDescriptor(s.name, type);
    }
  }
  function onChannel(c) {
    channels.set(c.id, c);
    report.channels[c.topic] = { schema: schemas.get(c.schemaId)?.name ?? null, encoding: c.messageEncoding,
      metadata: Object.fromEntries(c.metadata) };
  }
  function onMessage(m) {
    const c = channels.get(m.channelId);
    const topic = c.topic;
    report.counts[topic] = (report.counts[topic] ?? 0) + 1;
    (report.sequences[topic] ??= []).push(m.sequence);
    (report.logTimes[topic] ??= []).push(m.logTime.toString());
    if (report.decoded[topic]) return;
    const s = schemas.get(c.schemaId);
    if (c.messageEncoding === "protobuf") {
      const obj = types.get(c.schemaId).decode(m.data);
      report.decoded[topic] = summarizeDecoded(obj.toJSON ? Object.fromEntries(Object.keys(obj).map((k) => [k, obj[k]])) : obj);
    } else if (c.messageEncoding === "json") {
      const doc = JSON.parse(new TextDecoder().decode(m.data));
      const schema = JSON.parse(new TextDecoder().decode(s.data));
      const problems = [];
      for (const r of schema.required ?? []) if (!(r in doc)) problems.push(`missing ${r}`);
      if (schema.additionalProperties === false)
        for (const k of Object.keys(doc)) if (!(k in (schema.properties ?? {}))) problems.push(`extra ${k}`);
      for (const [k, p] of Object.entries(schema.properties ?? {}))
        if (p.const !== undefined && k in doc && doc[k] !== p.const) problems.push(`${k} != ${p.const}`);
      report.decoded[topic] = doc;
      report.jsonChecks[topic] = problems.length ? problems.join("; ") : "ok";
    }
  }

  if (mode === "indexed") {
    const readable = { size: async () => BigInt(data.length),
      read: async (off, len) => data.subarray(Number(off), Number(off) + Number(len)) };
    const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
    for (const s of reader.schemasById.values()) onSchema(s);
    for (const c of reader.channelsById.values()) onChannel(c);
    const st = reader.statistics;
    report.summary = { messageCount: toNumber(st.messageCount), chunkCount: st.chunkCount, metadataCount: st.metadataCount,
      channelMessageCounts: {} };
    // Summed per topic: a topic may have several channels (a recording
    // opens a new map channel when the maps' grid changes).
    for (const [id, n] of st.channelMessageCounts) {
      const topic = reader.channelsById.get(id).topic;
      report.summary.channelMessageCounts[topic] = (report.summary.channelMessageCounts[topic] ?? 0) + toNumber(n);
    }
    for await (const m of reader.readMessages()) onMessage(m);
    for await (const md of reader.readMetadata()) report.metadata.push({ name: md.name, metadata: Object.fromEntries(md.metadata) });
    report.complete = true;
    report.library = reader.header.library;
  } else {
    const reader = new McapStreamReader({ decompressHandlers, validateCrcs: true });
    reader.append(data);
    try {
      for (let rec; (rec = reader.nextRecord()); ) {
        switch (rec.type) {
          case "Header": report.library = rec.library; break;
          case "Schema": if (!schemas.has(rec.id)) onSchema(rec); break;
          case "Channel": if (!channels.has(rec.id)) onChannel(rec); break;
          case "Message": onMessage(rec); break;
          case "Metadata": report.metadata.push({ name: rec.name, metadata: Object.fromEntries(rec.metadata) }); break;
        }
      }
    } catch (e) {
      report.streamError = String(e && e.message || e);
    }
    report.complete = reader.done();
    report.bytesRemaining = reader.bytesRemaining();
  }
  process.stdout.write(JSON.stringify(report));
}

main().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) })); process.exit(1); });

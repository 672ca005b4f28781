// Messages of one partition: browse by offset or by time, newest or oldest first; payloads as
// text, pretty JSON or hex, with their key (the "rill.key" header Kafka keys are stored in) and
// headers; a filter by key or header over the range shown, and "Search" of an offset range (read
// page by page, 1,000 messages a poll, up to 100,000 offsets and 1,000 matches); a test
// message; and "Follow", the
// live tail read from the server-sent events of GET .../messages/follow (one bounded stream,
// closed when the view is left or Stop is pressed; not a refresh loop).

import { can, get, request, token } from "./api.js";
import { count, plural, timestamp } from "./format.js";
import { attempt, field, h, say } from "./ui.js";

const KEY_HEADER = "rill.key";
const LIVE_KEEP = 200; // messages kept on screen while following
const SEARCH_SPAN = 100000; // offsets one search may read
const SEARCH_KEEP = 1000; // matches one search keeps

// -- payloads and headers ------------------------------------------------------------------

function decodeBase64(text) {
  const binary = atob(text || "");
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i);
  return out;
}

function encodeBase64(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function utf8(bytes) {
  try { return new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { return null; }
}

export function hexDump(bytes) {
  const lines = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = Array.from(bytes.slice(at, at + 16), (b) => b.toString(16).padStart(2, "0"));
    lines.push(`${at.toString(16).padStart(8, "0")}  ${row.join(" ")}`);
  }
  return lines.join("\n") || "(empty)";
}

function prettyJson(text) {
  if (text === null) return null;
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return null; }
}

// [what is shown, how it was shown] for a payload in the chosen view.
function showPayload(bytes, view) {
  const text = utf8(bytes);
  if (view === "hex") return [hexDump(bytes), "hex"];
  if (view === "json") {
    const json = prettyJson(text);
    return json !== null ? [json, "JSON"] : [hexDump(bytes), "hex (not JSON)"];
  }
  if (view === "text") return text !== null ? [text, "text"] : [hexDump(bytes), "hex (not UTF-8 text)"];
  const json = prettyJson(text);
  if (json !== null && /^[\s]*[[{]/.test(text)) return [json, "JSON"];
  return text !== null ? [text, "text"] : [hexDump(bytes), "hex"];
}

const INTEGER = { int8: [1, true], int16: [2, true], int32: [4, true], int64: [8, true],
  uint8: [1, false], uint16: [2, false], uint32: [4, false], uint64: [8, false] };

function headerValue({ kind, value }) {
  const bytes = decodeBase64(value);
  const view = new DataView(bytes.buffer);
  if (kind === "string") return utf8(bytes) ?? hexDump(bytes);
  if (kind === "bool") return bytes[0] ? "true" : "false";
  if (kind === "float32" && bytes.length === 4) return String(view.getFloat32(0, true));
  if (kind === "float64" && bytes.length === 8) return String(view.getFloat64(0, true));
  if (INTEGER[kind] && bytes.length === INTEGER[kind][0]) {
    const [size, signed] = INTEGER[kind];
    if (size === 8) return String(signed ? view.getBigInt64(0, true) : view.getBigUint64(0, true));
    const read = { 1: signed ? "getInt8" : "getUint8", 2: signed ? "getInt16" : "getUint16", 4: signed ? "getInt32" : "getUint32" }[size];
    return String(view[read](0, true));
  }
  const text = utf8(bytes);
  return kind === "raw" && text !== null && /^[\x20-\x7e]*$/.test(text) ? text : hexDump(bytes);
}

function keyOf(message) {
  const header = message.headers && message.headers[KEY_HEADER];
  return header ? headerValue(header) : null;
}

function messageCard(message, view) {
  const [shown, how] = showPayload(decodeBase64(message.payload), view);
  const key = keyOf(message);
  const headers = Object.entries(message.headers || {}).filter(([name]) => name !== KEY_HEADER);
  return h("article", { class: "message card", "data-offset": message.offset },
    h("header", {},
      h("strong", {}, `Offset ${count(message.offset)}`), " · ", timestamp(message.timestamp),
      key !== null ? [" · key ", h("code", { class: "key" }, key)] : null,
      h("span", { class: "how" }, how)),
    headers.length ? h("dl", { class: "headers" }, headers.map(([name, header]) => [
      h("dt", {}, name), h("dd", {}, h("code", {}, headerValue(header)), h("small", {}, ` (${header.kind})`))])) : null,
    h("pre", { class: "payload", tabindex: 0 }, shown));
}

function matches(message, needle) {
  if (!needle) return true;
  const key = keyOf(message);
  if (key !== null && key.toLowerCase().includes(needle)) return true;
  return Object.entries(message.headers || {}).some(([name, header]) =>
    `${name}=${headerValue(header)}`.toLowerCase().includes(needle));
}

// -- reading a range --------------------------------------------------------------------------

async function poll(base, partition, kind, value, n) {
  const query = new URLSearchParams({ partition_id: partition, kind, value: String(value), count: String(n) });
  const polled = await get(`${base}/messages?${query}`);
  return polled.messages || [];
}

// The messages asked for, in the order asked for.
async function browse(base, partition, { from, offset, time, n, newestFirst, end }) {
  if (end === null) return [];
  let last; // newest first: the newest offset wanted
  if (from === "offset") {
    if (!newestFirst) return poll(base, partition, "offset", offset, n);
    last = Math.min(offset, end);
  } else if (from === "time") {
    const micros = time * 1000;
    if (!newestFirst) return poll(base, partition, "timestamp", micros, n);
    const [after] = await poll(base, partition, "timestamp", micros, 1);
    if (!after) last = end;
    else last = after.timestamp <= micros ? after.offset : after.offset - 1;
    if (last < 0) return [];
  } else {
    last = end;
    if (!newestFirst) return poll(base, partition, "first", 0, n);
  }
  const first = Math.max(0, last - n + 1);
  const messages = await poll(base, partition, "offset", first, last - first + 1);
  return messages.filter((m) => m.offset <= last).reverse();
}

const matchCount = (n) => `${count(n)} ${n === 1 ? "match" : "matches"}`;

// The messages of offsets from..to (both included) whose key or a header matches ``needle``,
// read a page at a time; onPage(next offset, matches) after each page; stops when ``stopped()``.
async function search(base, partition, from, to, needle, onPage, stopped) {
  const found = [];
  let offset = from;
  while (offset <= to && found.length < SEARCH_KEEP && !stopped()) {
    const page = await poll(base, partition, "offset", offset, Math.min(1000, to - offset + 1));
    if (!page.length) break;
    for (const m of page) if (m.offset <= to && matches(m, needle) && found.length < SEARCH_KEEP) found.push(m);
    offset = page[page.length - 1].offset + 1;
    onPage(offset, found.length);
  }
  return found;
}

// -- following ----------------------------------------------------------------------------------

// Reads the server-sent events of one follow request; calls onEvent(name, data) per event.
async function readEvents(url, signal, onEvent) {
  const response = await fetch(url, { headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" }, signal });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.reason || `HTTP ${response.status}`);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

// -- the view -------------------------------------------------------------------------------

function choices(label, name, options, value) {
  return field(label, { tag: "select", name, options, value: String(value ?? "") });
}

export async function render(container, _ids, params) {
  const streams = (await get("/streams")).sort((a, b) => a.id - b.id);
  const streamId = params.get("stream") || (streams[0] && String(streams[0].id));
  container.append(h("h1", {}, "Messages"));
  if (!streamId) {
    container.append(h("p", { class: "empty" }, "No streams yet: create one under Streams."));
    return undefined;
  }
  const stream = await get(`/streams/${encodeURIComponent(streamId)}`);
  const topics = (stream.topics || []).sort((a, b) => a.id - b.id);
  const topicId = params.get("topic") || (topics[0] && String(topics[0].id));
  const topic = topicId ? await get(`/streams/${stream.id}/topics/${encodeURIComponent(topicId)}`) : null;
  const partitionId = Number(params.get("partition") || 1);
  const partition = topic && (topic.partitions || []).find((p) => p.id === partitionId);

  const go = (changes) => {
    const next = new URLSearchParams({ stream: stream.id, topic: topic ? topic.id : "", partition: partitionId, ...changes });
    location.hash = `#/messages?${next}`;
  };
  const [streamField, streamSelect] = choices("Stream", "stream", streams.map((s) => [String(s.id), s.name]), stream.id);
  streamSelect.addEventListener("change", () => go({ stream: streamSelect.value, topic: "", partition: 1 }));
  const [topicField, topicSelect] = choices("Topic", "topic", topics.map((t) => [String(t.id), t.name]), topic && topic.id);
  topicSelect.addEventListener("change", () => go({ topic: topicSelect.value, partition: 1 }));
  const [partitionField, partitionSelect] = choices("Partition", "partition",
    ((topic && topic.partitions) || []).map((p) => [String(p.id), `${p.id} (${plural(p.messages_count, "message")})`]), partitionId);
  partitionSelect.addEventListener("change", () => go({ partition: partitionSelect.value }));
  container.append(h("form", { class: "card pickers", "aria-label": "Partition", onsubmit: (e) => e.preventDefault() },
    streamField, topicField, partitionField));
  if (!topic || !partition) {
    container.append(h("p", { class: "empty" }, topic ? "This topic has no such partition." : "This stream has no topics yet."));
    return undefined;
  }
  const base = `/streams/${stream.id}/topics/${topic.id}`;
  const mayRead = can("read_messages", stream.id, topic.id);
  const mayWrite = can("write_messages", stream.id, topic.id);
  if (!mayRead) {
    container.append(h("p", { class: "empty" }, "Your permissions do not allow reading this topic's messages."));
    if (mayWrite) container.append(sendForm(base, partition, () => say("Sent.")));
    return undefined;
  }
  const endNow = async () => { // the partition's newest offset now (null: empty)
    const now = (await get(base)).partitions.find((p) => p.id === partition.id);
    return now && now.messages_count ? now.current_offset : null;
  };

  // browse controls
  const [fromField, fromSelect] = choices("Start at", "from", [["end", "the newest / oldest"], ["offset", "an offset"], ["time", "a time"]], "end");
  const [orderField, orderSelect] = choices("Order", "order", [["newest", "Newest first"], ["oldest", "Oldest first"]], "newest");
  const [offsetField, offsetInput] = field("Offset", { name: "offset", type: "number", min: 0, value: 0 });
  const [timeField, timeInput] = field("Time (local)", { name: "time", type: "datetime-local", step: 1 });
  const [countField, countInput] = field("How many", { name: "count", type: "number", min: 1, max: 1000, value: 20 });
  const [viewField, viewSelect] = choices("Show payloads as", "view", [["auto", "Auto"], ["text", "Text"], ["json", "Pretty JSON"], ["hex", "Hex"]], "auto");
  const [filterField, filterInput] = field("Filter by key or header", { name: "filter", type: "search", placeholder: "e.g. user-42 or trace=abc", autocomplete: "off" });
  const sync = () => {
    offsetField.hidden = fromSelect.value !== "offset";
    timeField.hidden = fromSelect.value !== "time";
  };
  fromSelect.addEventListener("change", sync);
  sync();
  const results = h("div", { id: "results", "aria-live": "polite" });
  const summary = h("p", { class: "summary", id: "results-summary" });
  let shown = [];
  const draw = () => {
    const needle = filterInput.value.trim().toLowerCase();
    const visible = shown.filter((m) => matches(m, needle));
    summary.textContent = `${plural(visible.length, "message")} shown${needle ? ` (of ${count(shown.length)} read)` : ""}.`;
    results.replaceChildren(...visible.map((m) => messageCard(m, viewSelect.value)));
  };
  viewSelect.addEventListener("change", draw);
  filterInput.addEventListener("input", draw);
  const browseForm = h("form", { class: "card controls", "aria-label": "Browse" },
    fromField, orderField, offsetField, timeField, countField, viewField, filterField,
    h("button", { type: "submit", class: "primary" }, "Show messages"));
  browseForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (following) stopFollowing();
    await attempt(browseForm.querySelector("button[type=submit]"), async () => {
      const n = Number(countInput.value);
      if (!(n >= 1 && n <= 1000)) throw new Error("How many: a number from 1 to 1000");
      const time = timeInput.value ? new Date(timeInput.value).getTime() : NaN;
      if (fromSelect.value === "time" && Number.isNaN(time)) throw new Error("Time: pick a date and time");
      shown = await browse(base, partition.id, {
        from: fromSelect.value, offset: Number(offsetInput.value), time, n,
        newestFirst: orderSelect.value === "newest", end: await endNow(),
      });
      draw();
    });
  });

  // following
  let following = null;
  const followButton = h("button", { type: "button", id: "follow", "aria-pressed": "false" }, "Follow live");
  const followState = h("span", { class: "note", id: "follow-state" });
  function stopFollowing() {
    if (following) following.abort();
    following = null;
    followButton.textContent = "Follow live";
    followButton.setAttribute("aria-pressed", "false");
    followState.textContent = "";
  }
  async function follow(from) {
    const controller = new AbortController();
    following = controller;
    followButton.textContent = "Stop following";
    followButton.setAttribute("aria-pressed", "true");
    const query = new URLSearchParams({ partition_id: partition.id, limit: 1000 });
    if (from !== null) query.set("offset", from);
    let next = from;
    try {
      await readEvents(`${base}/messages/follow?${query}`, controller.signal, (name, data) => {
        if (name === "start") {
          next = data.offset;
          followState.textContent = `Following partition ${partition.id} from offset ${count(data.offset)}…`;
        } else if (name === "messages") {
          shown = [...data.messages.reverse(), ...shown].slice(0, LIVE_KEEP);
          next = data.messages[0].offset + 1;
          draw();
        } else if (name === "end") {
          next = data.next_offset;
          if (data.reason !== "limit" && data.reason !== "time") throw new Error(data.reason);
        }
      });
      if (following === controller) follow(next); // a bounded stream ended: open the next one
    } catch (error) {
      if (following === controller) {
        stopFollowing();
        if (error.name !== "AbortError") say(`Following stopped: ${error.message}`, "error");
      }
    }
  }
  // searching a range
  const [fromOffsetField, fromOffsetInput] = field("From offset", { name: "search_from", type: "number", min: 0, value: 0 });
  const [toOffsetField, toOffsetInput] = field("To offset", { name: "search_to", type: "number", min: 0, value: partition.messages_count ? partition.current_offset : 0 });
  const [needleField, needleInput] = field("Key or header contains", { name: "needle", type: "search", placeholder: "e.g. user-42 or trace=abc", autocomplete: "off" });
  const searchState = h("span", { class: "note", id: "search-state", "aria-live": "polite" });
  const searchForm = h("form", { class: "card controls", "aria-label": "Search a range" },
    h("h2", {}, "Search a range"), fromOffsetField, toOffsetField, needleField,
    h("button", { type: "submit" }, "Search"), searchState);
  let searching = 0; // the search running (a newer one, or a browse, ends it)
  browseForm.addEventListener("submit", () => { searching += 1; });
  searchForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (following) stopFollowing();
    const mine = ++searching;
    await attempt(searchForm.querySelector("button[type=submit]"), async () => {
      const from = Number(fromOffsetInput.value), to = Number(toOffsetInput.value);
      const needle = needleInput.value.trim().toLowerCase();
      if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to)) {
        throw new Error("Search: From and To must be offsets, From at most To");
      }
      if (to - from + 1 > SEARCH_SPAN) throw new Error(`Search: at most ${count(SEARCH_SPAN)} offsets at once`);
      if (!needle) throw new Error("Search: say what the key or a header contains");
      filterInput.value = "";
      const found = await search(base, partition.id, from, to, needle, (next, matched) => {
        searchState.textContent = `Searched to offset ${count(Math.min(next, to + 1) - 1)}: ${matchCount(matched)}…`;
      }, () => mine !== searching);
      if (mine !== searching) return;
      shown = found;
      searchState.textContent = `Offsets ${count(from)} to ${count(to)}: ${matchCount(found.length)}` +
        (found.length >= SEARCH_KEEP ? ` (the first ${count(SEARCH_KEEP)})` : "") + ".";
      draw();
    });
  });

  followButton.addEventListener("click", () => {
    if (following) { stopFollowing(); return; }
    shown = [];
    draw();
    follow(null);
  });
  container.append(browseForm, searchForm, h("p", { class: "follow" }, followButton, " ", followState), summary, results);

  if (mayWrite) container.append(sendForm(base, partition, () => {
    if (!following) browseForm.requestSubmit();
  }));
  browseForm.requestSubmit();
  return () => { if (following) following.abort(); following = null; };
}

function sendForm(base, partition, sent) {
  const [payloadField, payloadInput] = field("Payload (text)", { tag: "textarea", name: "payload", rows: 3 });
  const [keyField, keyInput] = field("Key (optional)", { name: "key", autocomplete: "off" });
  const [headersField, headersInput] = field("Headers (optional)", { tag: "textarea", name: "headers", rows: 2, help: "One name=value per line (string headers)" });
  const form = h("form", { class: "card form", "aria-label": "Send a test message" },
    h("h2", {}, `Send a test message to partition ${partition.id}`), payloadField, keyField, headersField,
    h("button", { type: "submit", class: "primary" }, "Send"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await attempt(form.querySelector("button[type=submit]"), async () => {
      const encoder = new TextEncoder();
      const headers = {};
      for (const line of headersInput.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
        const at = line.indexOf("=");
        if (at <= 0) throw new Error(`Header "${line}": write it as name=value`);
        headers[line.slice(0, at).trim()] = { kind: "string", value: encodeBase64(encoder.encode(line.slice(at + 1).trim())) };
      }
      if (keyInput.value) headers[KEY_HEADER] = { kind: "raw", value: encodeBase64(encoder.encode(keyInput.value)) };
      const partitionBytes = new Uint8Array(new Uint32Array([partition.id]).buffer);
      const message = { payload: encodeBase64(encoder.encode(payloadInput.value)) };
      if (Object.keys(headers).length) message.headers = headers;
      await request("POST", `${base}/messages`, {
        partitioning: { kind: "partition_id", value: encodeBase64(partitionBytes) }, messages: [message],
      });
      say(`Message sent to partition ${partition.id}.`);
      form.reset();
      sent();
    });
  });
  return form;
}

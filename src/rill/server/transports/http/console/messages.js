// Messages of a topic as a table (offset, partition with Kafka's number beside rill's, time,
// key, a preview of the value, size); a row expands to the message's key, headers and whole
// payload as text, pretty JSON or hex. One partition, or all of them merged by time (each
// partition's messages in offset order). Browse by offset or by time, newest or oldest first;
// a filter by key or header over the rows read, and "Search" of an offset range of one partition
// (read page by page, 1,000 messages a poll, up to 100,000 offsets and 1,000 matches); a test
// message; and "Follow", the live tail read from the server-sent events of GET
// .../messages/follow (one bounded stream per partition, opened again as it ends, closed when
// the view is left or Stop is pressed; not a refresh loop).

import { can, get, request, token } from "./api.js";
import { bytes as bytesText, count, plural, timestamp } from "./format.js";
import { attempt, field, findTopic, h, say } from "./ui.js";

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

// rill numbers partitions from 1, Kafka from 0
export const partitionLabel = (id) => `${id} (Kafka ${id - 1})`;

const PREVIEW_CHARS = 160;

// One line of a payload for the table: compact JSON, text with its whitespace folded, or the
// hex of its first bytes.
function preview(bytes) {
  const text = utf8(bytes);
  if (text === null) {
    const head = Array.from(bytes.slice(0, 24), (b) => b.toString(16).padStart(2, "0")).join(" ");
    return [`${head}${bytes.length > 24 ? " …" : ""}`, "hex"];
  }
  let line = text;
  if (/^\s*[[{]/.test(text)) {
    try { line = JSON.stringify(JSON.parse(text)); } catch { /* not JSON: as text */ }
  }
  line = line.replace(/\s+/g, " ").trim();
  return [line.length > PREVIEW_CHARS ? `${line.slice(0, PREVIEW_CHARS)}…` : line || "(empty)", "text"];
}

function shortTime(microseconds) {
  const element = timestamp(microseconds);
  const date = new Date(microseconds / 1000);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  element.textContent = `${date.getFullYear()}-${p(date.getMonth() + 1)}-${p(date.getDate())} ` +
    `${p(date.getHours())}:${p(date.getMinutes())}:${p(date.getSeconds())}.${p(date.getMilliseconds(), 3)}`;
  return element;
}

const rowId = (message) => `message-${message.partition}-${message.offset}`;

// The expanded part of a row: where the message is, its key, headers and the whole payload.
function details(message, view) {
  const bytes = decodeBase64(message.payload);
  const [shown, how] = showPayload(bytes, view);
  const key = keyOf(message);
  const headers = Object.entries(message.headers || {}).filter(([name]) => name !== KEY_HEADER);
  return h("div", { class: "details" },
    h("dl", { class: "headers" },
      h("dt", {}, "Offset"), h("dd", {}, count(message.offset)),
      h("dt", {}, "Partition"), h("dd", {}, partitionLabel(message.partition)),
      h("dt", {}, "Time"), h("dd", {}, timestamp(message.timestamp), h("small", {}, ` (${new Date(message.timestamp / 1000).toISOString()})`)),
      h("dt", {}, "Key"), h("dd", {}, key !== null ? h("code", { class: "key" }, key) : h("span", { class: "note" }, "none")),
      h("dt", {}, "Headers"), h("dd", {}, headers.length ? h("dl", { class: "header-list" }, headers.map(([name, header]) => [
        h("dt", {}, name), h("dd", {}, h("code", {}, headerValue(header)), h("small", {}, ` (${header.kind})`))]))
        : h("span", { class: "note" }, "none")),
      h("dt", {}, "Payload"), h("dd", {}, `${plural(bytes.length, "byte")}, shown as `, h("span", { class: "how" }, how))),
    h("pre", { class: "payload", tabindex: 0 }, shown));
}

// A table of messages; a row expands (its button, or a click on the row) to its details.
// ``open``: the IDs of the expanded rows, kept across redraws.
function messageTable(messages, view, open) {
  const body = h("tbody");
  for (const message of messages) {
    const id = rowId(message);
    const expanded = open.has(id);
    const [line] = preview(decodeBase64(message.payload));
    const key = keyOf(message);
    const toggle = h("button", {
      type: "button", class: "expand", "aria-expanded": String(expanded), "aria-controls": id,
      "aria-label": `Details of offset ${message.offset} in partition ${message.partition}`,
    }, expanded ? "▾" : "▸");
    const detailRow = h("tr", { class: "detail", id, hidden: !expanded },
      h("td", { colspan: 7 }, expanded ? details(message, view) : null));
    const flip = () => {
      const now = !open.has(id);
      if (now) open.add(id); else open.delete(id);
      toggle.setAttribute("aria-expanded", String(now));
      toggle.textContent = now ? "▾" : "▸";
      detailRow.hidden = !now;
      detailRow.firstChild.replaceChildren(...(now ? [details(message, view)] : []));
    };
    toggle.addEventListener("click", (event) => { event.stopPropagation(); flip(); });
    const row = h("tr", {
      class: "message", "data-offset": message.offset, "data-partition": message.partition,
      onclick: () => { if (!window.getSelection().toString()) flip(); },
    },
    h("td", { class: "toggle" }, toggle),
    h("td", { class: "num offset" }, count(message.offset)),
    h("td", { class: "partition" }, partitionLabel(message.partition)),
    h("td", { class: "time" }, shortTime(message.timestamp)),
    h("td", { class: "key" }, key !== null ? h("code", {}, key) : ""),
    h("td", { class: "preview", title: line }, line),
    h("td", { class: "num size" }, bytesText(decodeBase64(message.payload).length)));
    body.append(row, detailRow);
  }
  return h("div", { class: "table-wrap" }, h("table", { class: "messages" },
    h("caption", { class: "visually-hidden" }, "Messages"),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col", class: "toggle" }, h("span", { class: "visually-hidden" }, "Details")),
      ["Offset", "Partition", "Time", "Key", "Value", "Size"].map((name) => h("th", { scope: "col", class: name.toLowerCase() }, name)))),
    body));
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
  return (polled.messages || []).map((m) => ({ ...m, partition }));
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
    // the newest n records ("last" counts records: a partition with offset holes still fills
    // the page, where the offsets end - n + 1 .. end may hold fewer)
    return (await poll(base, partition, "last", 0, n)).reverse();
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

// Lists each in the order shown (a partition's messages, by offset) merged into one ordered by
// time: the next message is the head with the newest (oldest) timestamp; a tie goes to the lower
// partition. A partition's messages keep their offset order.
export function mergeByTime(lists, newestFirst) {
  const at = lists.map(() => 0);
  const out = [];
  for (;;) {
    let best = -1;
    for (let i = 0; i < lists.length; i += 1) {
      if (at[i] >= lists[i].length) continue;
      if (best < 0) { best = i; continue; }
      const a = lists[i][at[i]].timestamp;
      const b = lists[best][at[best]].timestamp;
      if (newestFirst ? a > b : a < b) best = i;
    }
    if (best < 0) return out;
    out.push(lists[best][at[best]]);
    at[best] += 1;
  }
}

const ALL = "all";

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
  const named = findTopic(topics, params.get("topic")) || (params.get("topic") ? null : topics[0]);
  const topic = named ? await get(`/streams/${stream.id}/topics/${named.id}`) : null;
  const partitions = ((topic && topic.partitions) || []).sort((a, b) => a.id - b.id);
  // several partitions: all of them unless the link picks one
  const wanted = params.get("partition") || (partitions.length > 1 ? ALL : "1");
  const all = wanted === ALL && partitions.length > 0;
  const partition = all ? null : partitions.find((p) => String(p.id) === wanted);

  const go = (changes) => {
    const next = new URLSearchParams({ stream: stream.id, topic: topic ? topic.id : "", partition: wanted, ...changes });
    location.hash = `#/messages?${next}`;
  };
  const [streamField, streamSelect] = choices("Stream", "stream", streams.map((s) => [String(s.id), s.name]), stream.id);
  streamSelect.addEventListener("change", () => go({ stream: streamSelect.value, topic: "", partition: "" }));
  const [topicField, topicSelect] = choices("Topic", "topic", topics.map((t) => [String(t.id), t.name]), topic && topic.id);
  topicSelect.addEventListener("change", () => go({ topic: topicSelect.value, partition: "" }));
  const [partitionField, partitionSelect] = choices("Partition", "partition", [
    ...(partitions.length > 1 || all ? [[ALL, `All ${plural(partitions.length, "partition")}`]] : []),
    ...partitions.map((p) => [String(p.id), `${partitionLabel(p.id)} · ${plural(p.messages_count, "message")}`])],
  all ? ALL : wanted);
  partitionSelect.addEventListener("change", () => go({ partition: partitionSelect.value }));
  container.append(h("form", { class: "card pickers", "aria-label": "Partition", onsubmit: (e) => e.preventDefault() },
    streamField, topicField, partitionField));
  if (!topic || (!all && !partition)) {
    container.append(h("p", { class: "empty" }, !topic
      ? (params.get("topic") ? `Stream ${stream.name} has no topic ${params.get("topic")}.` : "This stream has no topics yet.")
      : "This topic has no such partition."));
    return undefined;
  }
  const reading = all ? partitions : [partition];
  const base = `/streams/${stream.id}/topics/${topic.id}`;
  const mayRead = can("read_messages", stream.id, topic.id);
  const mayWrite = can("write_messages", stream.id, topic.id);
  if (!mayRead) {
    container.append(h("p", { class: "empty" }, "Your permissions do not allow reading this topic's messages."));
    if (mayWrite) container.append(sendForm(base, partitions, partitions[0], () => say("Sent.")));
    return undefined;
  }
  const endsNow = async () => { // each partition's newest offset now (null: empty)
    const now = await get(base);
    return new Map(now.partitions.map((p) => [p.id, p.messages_count ? p.current_offset : null]));
  };

  // browse controls
  const [fromField, fromSelect] = choices("Start at", "from", [["end", "the newest / oldest"], ["offset", "an offset"], ["time", "a time"]], "end");
  const [orderField, orderSelect] = choices("Order", "order", [["newest", "Newest first"], ["oldest", "Oldest first"]], "newest");
  const [offsetField, offsetInput] = field(all ? "Offset (in each partition)" : "Offset", { name: "offset", type: "number", min: 0, value: 0 });
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
  const open = new Set(); // the rows expanded
  let shown = [];
  let newestFirst = true;
  const draw = () => {
    const needle = filterInput.value.trim().toLowerCase();
    const visible = shown.filter((m) => matches(m, needle));
    const merged = all ? ` from ${plural(reading.length, "partition")}, merged by time, ${newestFirst ? "newest" : "oldest"} first (each partition's messages in offset order)` : "";
    summary.textContent = `${plural(visible.length, "message")} shown${merged}${needle ? ` (of ${count(shown.length)} read)` : ""}.`;
    results.replaceChildren(visible.length ? messageTable(visible, viewSelect.value, open) : h("p", { class: "empty" }, "No messages here."));
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
      const ends = await endsNow();
      const wantNewest = orderSelect.value === "newest";
      const lists = await Promise.all(reading.map((p) => browse(base, p.id, {
        from: fromSelect.value, offset: Number(offsetInput.value), time, n,
        newestFirst: wantNewest, end: ends.has(p.id) ? ends.get(p.id) : null,
      })));
      newestFirst = wantNewest;
      shown = all ? mergeByTime(lists, wantNewest).slice(0, n) : lists[0];
      draw();
    });
  });

  // following: one bounded stream of server-sent events per partition read, opened again as it ends
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
  async function follow(controller, part, from) {
    const query = new URLSearchParams({ partition_id: part.id, limit: 1000 });
    if (from !== null) query.set("offset", from);
    let next = from;
    try {
      await readEvents(`${base}/messages/follow?${query}`, controller.signal, (name, data) => {
        if (name === "start") {
          next = data.offset;
          if (!all) followState.textContent = `Following partition ${part.id} from offset ${count(data.offset)}…`;
        } else if (name === "messages") {
          const arrived = data.messages.map((m) => ({ ...m, partition: part.id })).reverse();
          shown = [...arrived, ...shown];
          if (all) shown.sort((a, b) => b.timestamp - a.timestamp); // (stable: offsets stay in order)
          shown = shown.slice(0, LIVE_KEEP);
          newestFirst = true;
          next = data.messages[0].offset + 1;
          draw();
        } else if (name === "end") {
          next = data.next_offset;
          if (data.reason !== "limit" && data.reason !== "time") throw new Error(data.reason);
        }
      });
      if (following === controller) follow(controller, part, next); // a bounded stream ended: open the next one
    } catch (error) {
      if (following === controller) {
        stopFollowing();
        if (error.name !== "AbortError") say(`Following stopped: ${error.message}`, "error");
      }
    }
  }
  followButton.addEventListener("click", () => {
    if (following) { stopFollowing(); return; }
    shown = [];
    draw();
    const controller = new AbortController();
    following = controller;
    followButton.textContent = "Stop following";
    followButton.setAttribute("aria-pressed", "true");
    if (all) followState.textContent = `Following all ${reading.length} partitions: new messages, newest first…`;
    for (const part of reading) follow(controller, part, null);
  });

  container.append(browseForm);
  // searching a range (of one partition)
  if (!all) container.append(searchForm(base, partition, filterInput, (found) => { shown = found; newestFirst = false; draw(); },
    () => { if (following) stopFollowing(); }, browseForm));
  container.append(h("p", { class: "follow" }, followButton, " ", followState,
    all ? h("span", { class: "note" }, " Search a range reads one partition: pick one above.") : null), summary, results);

  if (mayWrite) container.append(sendForm(base, partitions, partition || partitions[0], () => {
    if (!following) browseForm.requestSubmit();
  }));
  browseForm.requestSubmit();
  return () => { if (following) following.abort(); following = null; };
}

function searchForm(base, partition, filterInput, show, stopFollowing, browseForm) {
  const [fromOffsetField, fromOffsetInput] = field("From offset", { name: "search_from", type: "number", min: 0, value: 0 });
  const [toOffsetField, toOffsetInput] = field("To offset", { name: "search_to", type: "number", min: 0, value: partition.messages_count ? partition.current_offset : 0 });
  const [needleField, needleInput] = field("Key or header contains", { name: "needle", type: "search", placeholder: "e.g. user-42 or trace=abc", autocomplete: "off" });
  const searchState = h("span", { class: "note", id: "search-state", "aria-live": "polite" });
  const form = h("form", { class: "card controls", "aria-label": "Search a range" },
    h("h2", {}, `Search a range of partition ${partitionLabel(partition.id)}`), fromOffsetField, toOffsetField, needleField,
    h("button", { type: "submit" }, "Search"), searchState);
  let searching = 0; // the search running (a newer one, or a browse, ends it)
  browseForm.addEventListener("submit", () => { searching += 1; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    stopFollowing();
    const mine = ++searching;
    await attempt(form.querySelector("button[type=submit]"), async () => {
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
      searchState.textContent = `Offsets ${count(from)} to ${count(to)}: ${matchCount(found.length)}` +
        (found.length >= SEARCH_KEEP ? ` (the first ${count(SEARCH_KEEP)})` : "") + ".";
      show(found);
    });
  });
  return form;
}

// A test message, to the partition shown (or one picked, when several are read).
function sendForm(base, partitions, initial, sent) {
  const [payloadField, payloadInput] = field("Payload (text)", { tag: "textarea", name: "payload", rows: 3 });
  const [keyField, keyInput] = field("Key (optional)", { name: "key", autocomplete: "off" });
  const [headersField, headersInput] = field("Headers (optional)", { tag: "textarea", name: "headers", rows: 2, help: "One name=value per line (string headers)" });
  const [partField, partSelect] = choices("To partition", "to_partition",
    partitions.map((p) => [String(p.id), partitionLabel(p.id)]), initial.id);
  const form = h("form", { class: "card form", "aria-label": "Send a test message" },
    h("h2", {}, "Send a test message"), partField, payloadField, keyField, headersField,
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
      const partitionId = Number(partSelect.value);
      const partitionBytes = new Uint8Array(new Uint32Array([partitionId]).buffer);
      const message = { payload: encodeBase64(encoder.encode(payloadInput.value)) };
      if (Object.keys(headers).length) message.headers = headers;
      await request("POST", `${base}/messages`, {
        partitioning: { kind: "partition_id", value: encodeBase64(partitionBytes) }, messages: [message],
      });
      say(`Message sent to partition ${partitionLabel(partitionId)}.`);
      form.reset();
      partSelect.value = String(partitionId);
      sent();
    });
  });
  return form;
}

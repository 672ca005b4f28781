// Streams, topics and partitions: the lists with their counts, sizes and offsets, and the
// forms and buttons that create, edit, purge and delete them (each destructive one behind a
// confirmation that names what will be lost). Buttons the user's permissions do not allow are
// not shown.

import { can, get, request } from "./api.js";
import { bytes, bytesOf, count, expiry, isUnbounded, maxSize, plural, timestamp } from "./format.js";
import { attempt, confirmAction, field, h, say, table } from "./ui.js";

const path = (...parts) => parts.map(encodeURIComponent).join("/");
const streamPath = (s) => `/streams/${encodeURIComponent(s)}`;
const topicPath = (s, t) => `${streamPath(s)}/topics/${encodeURIComponent(t)}`;

const DURATION_UNITS = { us: 1, ms: 1e3, s: 1e6, sec: 1e6, min: 6e7, m: 6e7, h: 3.6e9, d: 8.64e10 };
const SIZE_UNITS = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

// "" = the server's default (0); "never" = 2^64-1; "7 d", "12 h", "30 min" = µs.
export function parseExpiry(text) {
  const value = text.trim().toLowerCase();
  if (!value || value === "default") return 0;
  if (value === "never") return "__u64_max__";
  const match = /^(\d+(?:\.\d+)?)\s*(us|ms|s|sec|min|m|h|d)$/.exec(value);
  if (!match) throw new Error(`Message expiry "${text}": use e.g. "7 d", "12 h", "30 min", "never" or leave empty`);
  return Math.round(Number(match[1]) * DURATION_UNITS[match[2]]);
}

// "" = the server's default (0); "unlimited" = 2^64-1; "10 GB", "512 MiB" = bytes.
export function parseSize(text) {
  const value = text.trim().toLowerCase();
  if (!value || value === "default") return 0;
  if (value === "unlimited") return "__u64_max__";
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib)$/.exec(value);
  if (!match) throw new Error(`Max size "${text}": use e.g. "10 GB", "512 MiB", "unlimited" or leave empty`);
  return Math.round(Number(match[1]) * SIZE_UNITS[match[2]]);
}

function expiryText(value) {
  return isUnbounded(value) ? "never" : expiry(value) === "never" ? "" : expiry(value);
}

function sizeText(value) {
  return isUnbounded(value) ? "unlimited" : bytes(value);
}

// A topic's record format as shown: "Iggy", "Kafka" (another value as sent).
function formatName(format) {
  return { iggy: "Iggy", kafka: "Kafka" }[format] || format || "";
}

function lossOf(thing) {
  return `${plural(thing.messages_count, "message")}, ${bytes(bytesOf(thing.size))}`;
}

function form(title, fields, submitText, onSubmit) {
  const element = h("form", { class: "card form", "aria-label": title },
    h("h2", {}, title), fields, h("button", { type: "submit", class: "primary" }, submitText));
  element.addEventListener("submit", async (event) => {
    event.preventDefault();
    await attempt(element.querySelector("button[type=submit]"), () => onSubmit(element));
  });
  return element;
}

function breadcrumbs(...links) {
  return h("nav", { "aria-label": "Breadcrumb", class: "crumbs" },
    h("ol", {}, links.map(([text, href]) => h("li", {}, href ? h("a", { href }, text) : h("span", { "aria-current": "page" }, text)))));
}

// -- the list of streams --------------------------------------------------------------------

export async function renderStreams(container) {
  const streams = await get("/streams");
  const rows = streams.sort((a, b) => a.id - b.id);
  container.append(h("h1", {}, "Streams"), table("Streams", [
    ["Name", (s) => h("a", { href: `#/${path("streams", s.id)}` }, s.name)],
    ["ID", (s) => s.id],
    ["Topics", (s) => count(s.topics_count)],
    ["Messages", (s) => count(s.messages_count)],
    ["Size", (s) => bytes(bytesOf(s.size))],
    ["Created", (s) => timestamp(s.created_at)],
    ["Actions", (s) => streamActions(s, () => renderAgain(container, renderStreams))],
  ], rows, "No streams yet."));
  if (can("create_stream")) {
    const [name, nameInput] = field("Name", { name: "name", required: true, autocomplete: "off" });
    container.append(form("Create a stream", [name], "Create stream", async () => {
      const created = await request("POST", "/streams", { name: nameInput.value.trim() });
      say(`Stream '${created.name}' created.`);
      location.hash = `#/${path("streams", created.id)}`;
    }));
  }
}

function renderAgain(container, render, ...args) {
  container.replaceChildren();
  return render(container, ...args);
}

function streamActions(stream, done) {
  if (!can("manage_stream", stream.id)) return "";
  const loss = `${plural(stream.topics_count, "topic")}, ${lossOf(stream)}`;
  return h("div", { class: "actions" },
    h("button", {
      type: "button", class: "warn", "aria-label": `Purge stream ${stream.name}`,
      onclick: async (event) => {
        if (!await confirmAction("Purge stream", `Purge stream '${stream.name}': delete all its messages (${lossOf(stream)})? Its topics stay.`, "Purge")) return;
        await attempt(event.target, async () => {
          await request("DELETE", `${streamPath(stream.id)}/purge`);
          say(`Stream '${stream.name}' purged.`);
          await done();
        });
      },
    }, "Purge"),
    h("button", {
      type: "button", class: "danger", "aria-label": `Delete stream ${stream.name}`,
      onclick: async (event) => {
        if (!await confirmAction("Delete stream", `Delete stream '${stream.name}' and its ${loss}?`)) return;
        await attempt(event.target, async () => {
          await request("DELETE", streamPath(stream.id));
          say(`Stream '${stream.name}' deleted.`);
          if (location.hash === "#/streams") await done(); else location.hash = "#/streams";
        });
      },
    }, "Delete"));
}

// -- one stream: its topics -----------------------------------------------------------------

export async function renderStream(container, [streamId]) {
  const stream = await get(streamPath(streamId));
  const again = () => renderAgain(container, renderStream, [streamId]);
  container.append(
    breadcrumbs(["Streams", "#/streams"], [stream.name]),
    h("h1", {}, `Stream ${stream.name}`),
    h("p", { class: "summary" }, `ID ${stream.id} · ${plural(stream.topics_count, "topic")} · ${lossOf(stream)} · created `, timestamp(stream.created_at)),
    streamActions({ ...stream }, () => { location.hash = "#/streams"; }),
    table(`Topics of ${stream.name}`, [
      ["Name", (t) => h("a", { href: `#/${path("streams", stream.id, "topics", t.id)}` }, t.name)],
      ["ID", (t) => t.id],
      ["Partitions", (t) => count(t.partitions_count)],
      ["Messages", (t) => count(t.messages_count)],
      ["Size", (t) => bytes(bytesOf(t.size))],
      ["Retention", (t) => expiry(t.message_expiry)],
      ["Max size", (t) => maxSize(t.max_topic_size)],
      ...((stream.topics || []).some((t) => t.record_format) ? [["Format", (t) => formatName(t.record_format)]] : []),
      ["Actions", (t) => topicActions(stream, t, again)],
    ], (stream.topics || []).sort((a, b) => a.id - b.id), "No topics in this stream yet."));
  if (can("manage_stream", stream.id)) {
    const [name, nameInput] = field("New name", { name: "name", value: stream.name, required: true, autocomplete: "off" });
    container.append(form("Rename the stream", [name], "Rename", async () => {
      await request("PUT", streamPath(stream.id), { name: nameInput.value.trim() });
      say(`Stream renamed to '${nameInput.value.trim()}'.`);
      await again();
    }));
  }
  if (can("create_topic", stream.id)) {
    const [name, nameInput] = field("Name", { name: "name", required: true, autocomplete: "off" });
    const [parts, partsInput] = field("Partitions", { name: "partitions", type: "number", min: 1, value: 1, required: true });
    const [exp, expInput] = field("Message expiry", { name: "expiry", placeholder: "server default", help: 'e.g. "7 d", "12 h", "never"; empty: the server default', autocomplete: "off" });
    const [max, maxInput] = field("Max size", { name: "max_size", placeholder: "server default", help: 'e.g. "10 GB", "unlimited"; empty: the server default', autocomplete: "off" });
    const [format, formatSelect] = field("Record format", {
      tag: "select", name: "record_format", value: "",
      options: [["", "Server default"], ["iggy", "Iggy"], ["kafka", "Kafka"]],
      help: "How the log stores records: Iggy messages or Kafka record batches",
    });
    container.append(form("Create a topic", [name, parts, exp, max, format], "Create topic", async () => {
      const body = {
        name: nameInput.value.trim(), partitions_count: Number(partsInput.value),
        message_expiry: parseExpiry(expInput.value), max_topic_size: parseSize(maxInput.value),
      };
      if (formatSelect.value) body.record_format = formatSelect.value; // only when picked
      const created = await request("POST", `${streamPath(stream.id)}/topics`, body);
      say(`Topic '${created.name}' created with ${plural(created.partitions_count, "partition")}.`);
      location.hash = `#/${path("streams", stream.id, "topics", created.id)}`;
    }));
  }
}

function topicActions(stream, topic, done) {
  if (!can("manage_topic", stream.id, topic.id)) return "";
  const loss = `${plural(topic.partitions_count, "partition")}, ${lossOf(topic)}`;
  return h("div", { class: "actions" },
    h("button", {
      type: "button", class: "warn", "aria-label": `Purge topic ${topic.name}`,
      onclick: async (event) => {
        if (!await confirmAction("Purge topic", `Purge topic '${topic.name}': delete all its messages (${lossOf(topic)})? Its partitions stay.`, "Purge")) return;
        await attempt(event.target, async () => {
          await request("DELETE", `${topicPath(stream.id, topic.id)}/purge`);
          say(`Topic '${topic.name}' purged.`);
          await done();
        });
      },
    }, "Purge"),
    h("button", {
      type: "button", class: "danger", "aria-label": `Delete topic ${topic.name}`,
      onclick: async (event) => {
        if (!await confirmAction("Delete topic", `Delete topic '${topic.name}' and its ${loss}?`)) return;
        await attempt(event.target, async () => {
          await request("DELETE", topicPath(stream.id, topic.id));
          say(`Topic '${topic.name}' deleted.`);
          await done();
        });
      },
    }, "Delete"));
}

// -- one topic: its partitions and settings ---------------------------------------------------

export async function renderTopic(container, [streamId, topicId]) {
  const [stream, topic] = await Promise.all([get(streamPath(streamId)), get(topicPath(streamId, topicId))]);
  const again = () => renderAgain(container, renderTopic, [streamId, topicId]);
  const browse = (p) => `#/messages?stream=${stream.id}&topic=${topic.id}&partition=${p.id}`;
  container.append(
    breadcrumbs(["Streams", "#/streams"], [stream.name, `#/${path("streams", stream.id)}`], [topic.name]),
    h("h1", {}, `Topic ${topic.name}`),
    h("p", { class: "summary" }, `ID ${topic.id} · ${plural(topic.partitions_count, "partition")} · ${lossOf(topic)} · retention ${expiry(topic.message_expiry)} · max size ${maxSize(topic.max_topic_size)} · compression ${topic.compression_algorithm}${topic.record_format ? ` · ${formatName(topic.record_format)} record format` : ""} · created `, timestamp(topic.created_at)),
    topicActions(stream, topic, () => { location.hash = `#/${path("streams", stream.id)}`; }),
    table(`Partitions of ${topic.name}`, [
      ["Partition", (p) => `${p.id} (Kafka ${p.id - 1})`],
      ["Messages", (p) => count(p.messages_count)],
      ["Last offset", (p) => (p.messages_count ? count(p.current_offset) : "none (empty)")],
      ["Size", (p) => bytes(bytesOf(p.size))],
      ["Segments", (p) => count(p.segments_count)],
      ["Created", (p) => timestamp(p.created_at)],
      ["Browse", (p) => h("a", { href: browse(p) }, `Browse partition ${p.id}`)],
    ], topic.partitions || []),
    h("p", { class: "links" },
      (topic.partitions || []).length > 1 ? [h("a", { href: `#/messages?stream=${stream.id}&topic=${topic.id}&partition=all` }, "Browse all partitions"), " · "] : null,
      h("a", { href: `#/consumers?stream=${stream.id}&topic=${topic.id}` }, `Consumers and lag of ${topic.name}`)));
  if (!can("manage_topic", stream.id, topic.id)) return;
  const [name, nameInput] = field("Name", { name: "name", value: topic.name, required: true, autocomplete: "off" });
  const [exp, expInput] = field("Message expiry", { name: "expiry", value: expiryText(topic.message_expiry), help: 'e.g. "7 d", "12 h", "never"', autocomplete: "off" });
  const [max, maxInput] = field("Max size", { name: "max_size", value: sizeText(topic.max_topic_size), help: 'e.g. "10 GB", "unlimited"', autocomplete: "off" });
  container.append(form("Edit the topic", [name, exp, max], "Save", async () => {
    await request("PUT", topicPath(stream.id, topic.id), {
      name: nameInput.value.trim(), compression_algorithm: topic.compression_algorithm,
      message_expiry: parseExpiry(expInput.value), max_topic_size: parseSize(maxInput.value),
    });
    say(`Topic '${nameInput.value.trim()}' saved.`);
    await again();
  }));
  const [add, addInput] = field("Partitions to add", { name: "add", type: "number", min: 1, value: 1 });
  container.append(form("Add partitions", [add], "Add partitions", async () => {
    const n = Number(addInput.value);
    await request("POST", `${topicPath(stream.id, topic.id)}/partitions`, { partitions_count: n });
    say(`${plural(n, "partition")} added.`);
    await again();
  }));
  const last = (topic.partitions || []).reduce((a, b) => (b.id > a.id ? b : a), { id: 0 });
  if (last.id > 0) {
    container.append(h("p", {}, h("button", {
      type: "button", class: "danger",
      onclick: async (event) => {
        if (!await confirmAction("Delete partition", `Delete partition ${last.id} of topic '${topic.name}' and its ${plural(last.messages_count || 0, "message")}, ${bytes(bytesOf(last.size))}?`)) return;
        await attempt(event.target, async () => {
          await request("DELETE", `${topicPath(stream.id, topic.id)}/partitions?partitions_count=1`);
          say(`Partition ${last.id} deleted.`);
          await again();
        });
      },
    }, `Delete partition ${last.id}`)));
  }
}

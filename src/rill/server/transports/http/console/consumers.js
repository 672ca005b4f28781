// Consumers of one topic: every consumer's committed position and lag per partition (Iggy
// consumer groups, Iggy consumers and Kafka consumer groups side by side, from GET .../consumers),
// the members of Iggy's and Kafka's groups with the partitions each is assigned, and a chart per consumer
// of its total lag over time, sampled every two seconds while the view is open.

import { get } from "./api.js";
import { TimeChart } from "./chart.js";
import { count, plural } from "./format.js";
import { field, findTopic, h, table } from "./ui.js";

const PERIOD_MS = 2000;
// rill numbers partitions from 1, Kafka from 0: every row shows both
const partitionOf = (row) => `${row.partition_id} (Kafka ${row.partition_id - 1})`;
const KIND = { iggy_group: "Iggy group", iggy_consumer: "Iggy consumer", kafka_group: "Kafka group", other: "Other" };

function label(row) {
  return `${KIND[row.kind] || row.kind} ${row.name}`;
}

export async function render(container, _ids, params) {
  const streams = (await get("/streams")).sort((a, b) => a.id - b.id);
  container.append(h("h1", {}, "Consumers"));
  const streamId = params.get("stream") || (streams[0] && String(streams[0].id));
  if (!streamId) {
    container.append(h("p", { class: "empty" }, "No streams yet."));
    return undefined;
  }
  const stream = await get(`/streams/${encodeURIComponent(streamId)}`);
  const topics = (stream.topics || []).sort((a, b) => a.id - b.id);
  // a link may name the topic by ID or by name: the picker shows the one named
  const topic = findTopic(topics, params.get("topic")) || topics[0];
  const topicId = topic && String(topic.id);
  const go = (changes) => { location.hash = `#/consumers?${new URLSearchParams({ stream: stream.id, topic: topicId || "", ...changes })}`; };
  const [streamField, streamSelect] = field("Stream", { tag: "select", name: "stream", options: streams.map((s) => [String(s.id), s.name]), value: String(stream.id) });
  streamSelect.addEventListener("change", () => go({ stream: streamSelect.value, topic: "" }));
  const [topicField, topicSelect] = field("Topic", { tag: "select", name: "topic", options: topics.map((t) => [String(t.id), t.name]), value: String(topicId) });
  topicSelect.addEventListener("change", () => go({ topic: topicSelect.value }));
  container.append(h("form", { class: "card pickers", "aria-label": "Topic", onsubmit: (e) => e.preventDefault() }, streamField, topicField));
  if (!topicId) {
    container.append(h("p", { class: "empty" }, "This stream has no topics yet."));
    return undefined;
  }
  if (params.get("topic") && !findTopic(topics, params.get("topic"))) {
    container.append(h("p", { class: "error", role: "alert" }, `Stream ${stream.name} has no topic ${params.get("topic")}.`));
    return undefined;
  }
  const base = `/streams/${stream.id}/topics/${encodeURIComponent(topicId)}`;
  const lagSlot = h("div", { id: "lag" });
  const chartsSlot = h("div", { class: "charts", id: "lag-charts" });
  const groupsSlot = h("div", { id: "groups" });
  const otherSlot = h("div", { id: "kafka-groups" });
  container.append(
    h("section", { "aria-labelledby": "lag-title" }, h("h2", { id: "lag-title" }, "Lag per partition"), lagSlot),
    h("section", { "aria-labelledby": "lag-chart-title" }, h("h2", { id: "lag-chart-title" }, "Total lag over time"),
      h("p", { class: "note" }, `Messages not yet read, over the last 5 minutes, sampled every ${PERIOD_MS / 1000} s while this page is open.`), chartsSlot),
    h("section", { "aria-labelledby": "groups-title" }, h("h2", { id: "groups-title" }, "Iggy consumer groups"), groupsSlot),
    h("section", { "aria-labelledby": "kafka-groups-title" }, h("h2", { id: "kafka-groups-title" }, "Kafka consumer groups"), otherSlot));

  const charts = new Map();
  let stopped = false;
  let timer = null;

  async function sample() {
    const [consumers, groups] = await Promise.all([get(`${base}/consumers`), get(`${base}/consumer-groups`)]);
    const rows = consumers.positions;
    if (stopped) return;
    lagSlot.replaceChildren(table("Committed offsets and lag", [
      ["Consumer", (r) => r.name], ["Kind", (r) => KIND[r.kind] || r.kind], ["Partition", partitionOf],
      ["Position", (r) => (r.next_offset === null ? "nothing committed" : `Reads next ${count(r.next_offset)}`)],
      ["End offset", (r) => count(r.end_offset)], ["Lag", (r) => h("span", { class: "lag" }, count(r.lag))],
    ], rows, "No consumer has committed an offset in this topic, and it has no consumer groups."));
    const totals = new Map();
    for (const row of rows) totals.set(label(row), (totals.get(label(row)) || 0) + row.lag);
    for (const [name, total] of totals) {
      if (!charts.has(name)) {
        const chart = new TimeChart(`${name} lag`, { unit: "msg", whole: true, periodMs: PERIOD_MS });
        chart.element.dataset.consumer = name;
        charts.set(name, chart);
        chartsSlot.append(chart.element);
      }
      charts.get(name).push(total);
    }
    const details = await Promise.all(groups.map((g) => get(`${base}/consumer-groups/${g.id}`)));
    if (stopped) return;
    groupsSlot.replaceChildren(...(details.length ? details.map((g) => h("div", { class: "card group" },
      h("h3", {}, `${g.name} (ID ${g.id}): ${plural(g.members_count, "member")}`),
      g.members.length ? table(`Members of ${g.name}`, [
        ["Member (client ID)", (m) => m.id], ["Assigned partitions", (m) => m.partitions.join(", ") || "none"],
      ], g.members) : h("p", { class: "empty" }, "No member is connected."))) : [h("p", { class: "empty" }, "This topic has no Iggy consumer groups.")]));
    const byGroup = new Map();
    for (const member of consumers.members) {
      const key = label(member);
      if (!byGroup.has(key)) byGroup.set(key, []);
      byGroup.get(key).push(member);
    }
    otherSlot.replaceChildren(...(byGroup.size ? [...byGroup].map(([name, members]) => h("div", { class: "card group" },
      h("h3", {}, `${name}: ${plural(members.length, "member")} reading this topic`),
      table(`Members of ${name}`, [
        ["Member", (m) => m.member_id], ["Client", (m) => m.client],
        ["Assigned partitions (Kafka's numbers)", (m) => m.partitions.map((p) => p - 1).join(", ") || "none"],
      ], members))) : [h("p", { class: "empty" }, "No Kafka group member reads this topic now.")]));
  }

  async function loop() {
    try { await sample(); } catch { /* a 401 logs out; other errors: try again */ }
    if (!stopped) timer = setTimeout(loop, PERIOD_MS);
  }
  await sample();
  timer = setTimeout(loop, PERIOD_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
    for (const chart of charts.values()) chart.stop();
  };
}

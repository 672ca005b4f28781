// The overview: what the server runs (GET /server) and its live throughput over the last five
// minutes, charted from the server's own running totals sampled every two seconds.

import { get } from "./api.js";
import { TimeChart } from "./chart.js";
import { bytes, count, duration, timestamp } from "./format.js";
import { h, table } from "./ui.js";

const PERIOD_MS = 2000;

function facts(server) {
  const fsync = server.fsync.policy === "interval"
    ? `every ${duration(server.fsync.interval_ms * 1000)}` : server.fsync.policy;
  const disk = server.disk;
  const rows = [
    ["Version", server.version],
    ["Up for", duration(server.run_time)],
    ["Started", timestamp(server.start_time)],
    ["fsync", fsync],
    ["Messages stored", `${count(server.counts.messages)} (${bytes(disk.messages_bytes)})`],
    ["Disk free", disk.free_bytes === null ? "unknown"
      : `${bytes(disk.free_bytes)} of ${bytes(disk.total_bytes)}`],
    ["Streams / topics / partitions",
      `${count(server.counts.streams)} / ${count(server.counts.topics)} / ${count(server.counts.partitions)}`],
    ["Consumer groups", count(server.counts.consumer_groups)],
  ];
  return h("dl", { class: "facts card", id: "server-facts" },
    rows.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}

export async function render(container) {
  const heading = h("h1", {}, "Overview");
  const factsSlot = h("div");
  const listenersSlot = h("div");
  const clientsSlot = h("div");
  const charts = {
    messages_in: new TimeChart("Messages in", { unit: "msg/s", periodMs: PERIOD_MS }),
    messages_out: new TimeChart("Messages out", { unit: "msg/s", periodMs: PERIOD_MS }),
    bytes_in: new TimeChart("Bytes in", { unit: "B/s", periodMs: PERIOD_MS }),
    bytes_out: new TimeChart("Bytes out", { unit: "B/s", periodMs: PERIOD_MS }),
  };
  const chartNote = h("p", { class: "note" });
  container.append(heading, factsSlot,
    h("section", { "aria-labelledby": "throughput-title" },
      h("h2", { id: "throughput-title" }, "Throughput"), chartNote,
      h("div", { class: "charts", id: "charts" }, Object.values(charts).map((c) => c.element))),
    h("div", { class: "columns" },
      h("section", { "aria-labelledby": "listeners-title" }, h("h2", { id: "listeners-title" }, "Listeners"), listenersSlot),
      h("section", { "aria-labelledby": "clients-title" }, h("h2", { id: "clients-title" }, "Clients connected"), clientsSlot)));

  let previous = null;
  let timer = null;
  let stopped = false;

  async function sample() {
    const server = await get("/server");
    if (stopped) return;
    factsSlot.replaceChildren(facts(server));
    listenersSlot.replaceChildren(table("Listeners by protocol", [
      ["Protocol", (l) => l.protocol], ["Address", (l) => l.address]], server.listeners));
    clientsSlot.replaceChildren(table("Clients by protocol", [
      ["Protocol", (c) => c.protocol], ["Transport", (c) => c.transport.toUpperCase()],
      ["Clients", (c) => count(c.count)]], server.clients,
    "No clients connected (HTTP callers have no connection)."));
    if (!server.throughput) {
      chartNote.textContent = "Metrics are off ([http.metrics] enabled = false): no throughput figures.";
    } else {
      const now = performance.now();
      if (previous) {
        const seconds = (now - previous.at) / 1000;
        for (const [name, chart] of Object.entries(charts)) {
          chart.push(Math.max(0, server.throughput[name] - previous.totals[name]) / seconds);
        }
      }
      chartNote.textContent = `Per second over the last 5 minutes, sampled every ${PERIOD_MS / 1000} s while this page is open.`;
      previous = { at: now, totals: server.throughput };
    }
  }

  async function loop() {
    try { await sample(); } catch { /* shown on the next success; a 401 logs out */ }
    if (!stopped) timer = setTimeout(loop, PERIOD_MS);
  }
  await sample();
  timer = setTimeout(loop, PERIOD_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
    for (const chart of Object.values(charts)) chart.stop();
  };
}

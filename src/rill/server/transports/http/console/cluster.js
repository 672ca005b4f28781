// The cluster as this node sees it (GET /cluster): its name, this node, the controller, the
// live members with their listeners, and per partition the leader, epoch, replicas, ISR,
// offline replicas and the lag of each follower (known on the partition's leader only: the
// other rows say which node to ask). Refreshed every two seconds while the view is open. A user
// without the server-read permission is told so instead (the route would answer 403).

import { can, get } from "./api.js";
import { count } from "./format.js";
import { h, table } from "./ui.js";

const PERIOD_MS = 2000;

const nodes = (ids) => (ids.length ? ids.join(", ") : "none");

function memberName(status, member) {
  const marks = [];
  if (member.node_id === status.controller_id) marks.push("controller");
  if (member.node_id === status.node_id) marks.push("this node");
  return marks.length ? `${member.node_id} (${marks.join(", ")})` : String(member.node_id);
}

function lagOf(status, row) {
  if (!row.followers) {
    return row.leader === null ? "no leader" : `known on node ${row.leader}, its leader`;
  }
  if (!row.followers.length) return "no followers";
  return row.followers.map((f) =>
    `node ${f.node_id}: ${count(f.lag_messages)} messages, ${Number(f.lag_seconds).toFixed(1)} s`).join("; ");
}

function facts(status) {
  const counters = status.counters || {};
  const rows = [
    ["Cluster", status.name],
    ["This node", status.node_id],
    ["Controller", status.controller_id === null ? "none (electing)" : `node ${status.controller_id}`],
    ["Live members", count(status.members.length)],
    ["Under-replicated partitions", count(counters.under_replicated_partitions || 0)],
    ["ISR shrinks / expands", `${count(counters.isr_shrinks || 0)} / ${count(counters.isr_expands || 0)}`],
    ["Leader elections", count(counters.leader_elections || 0)],
    ["Fenced requests", count(counters.fenced_requests || 0)],
  ];
  return h("dl", { class: "facts card", id: "cluster-facts" },
    rows.map(([name, value]) => [h("dt", {}, name), h("dd", {}, String(value))]));
}

export async function render(container) {
  container.append(h("h1", {}, "Cluster"));
  if (!can("read_server")) {
    container.append(h("p", { class: "empty", id: "no-permission" },
      "Seeing the cluster needs the read_servers (or manage_servers) permission."));
    return undefined;
  }
  const slot = h("div", { id: "cluster" });
  container.append(slot);
  let timer = null;
  let stopped = false;

  async function sample() {
    const status = await get("/cluster");
    if (stopped) return;
    if (status.mode !== "cluster") {
      slot.replaceChildren(h("p", { class: "empty", id: "standalone" },
        "This server runs standalone: it is no member of a cluster ([cluster] etcd_endpoints is empty)."));
      return;
    }
    const listeners = (member) => Object.entries(member.listeners || {})
      .map(([name, address]) => `${name} ${address}`).join(", ");
    slot.replaceChildren(
      facts(status),
      h("section", { "aria-labelledby": "members-title" },
        h("h2", { id: "members-title" }, "Members"),
        table("Live members", [["Node", (m) => memberName(status, m)], ["Listeners", listeners]],
          status.members, "No live members.")),
      h("section", { "aria-labelledby": "partitions-title" },
        h("h2", { id: "partitions-title" }, "Partitions"),
        table("Partitions by leader", [
          // (a name is null while this node has not applied the topic yet: its id then)
          ["Partition", (p) => `${p.stream ?? p.stream_id} / ${p.topic ?? p.topic_id} / ${p.partition_id}`],
          ["Leader", (p) => (p.leader === null ? "none" : String(p.leader))],
          ["Epoch", (p) => String(p.leader_epoch)],
          ["Replicas", (p) => nodes(p.replicas)],
          ["ISR", (p) => nodes(p.isr)],
          ["Offline", (p) => nodes(p.offline || [])],
          ["Follower lag", (p) => lagOf(status, p)],
        ], status.partitions, "No partitions yet.")));
  }

  async function loop() {
    try { await sample(); } catch { /* shown on the next success; a 401 logs out */ }
    if (!stopped) timer = setTimeout(loop, PERIOD_MS);
  }
  await sample();
  timer = setTimeout(loop, PERIOD_MS);
  return () => { stopped = true; clearTimeout(timer); };
}

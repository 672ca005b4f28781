// Users and personal access tokens: the users list (with read_users), creating a user,
// changing a user's global permissions and deleting one (with manage_users), and the logged-in
// user's own personal access tokens: list, create (the token is shown once) and delete.

import { can, currentUser, get, request } from "./api.js";
import { timestamp } from "./format.js";
import { parseExpiry } from "./streams.js";
import { attempt, confirmAction, field, h, say, table } from "./ui.js";

const GLOBAL_FLAGS = [
  ["manage_servers", "Manage servers"], ["read_servers", "Read servers"],
  ["manage_users", "Manage users"], ["read_users", "Read users"],
  ["manage_streams", "Manage streams"], ["read_streams", "Read streams"],
  ["manage_topics", "Manage topics"], ["read_topics", "Read topics"],
  ["poll_messages", "Poll messages"], ["send_messages", "Send messages"],
];

function flagBoxes(legend, flags = {}) {
  return h("fieldset", { class: "flags" }, h("legend", {}, legend),
    GLOBAL_FLAGS.map(([name, text]) => h("label", {},
      h("input", { type: "checkbox", name, checked: Boolean(flags[name]) }), text)));
}

function readFlags(form) {
  return Object.fromEntries(GLOBAL_FLAGS.map(([name]) => [name, form.elements[name].checked]));
}

function permissionsText(permissions) {
  if (!permissions) return "none";
  const names = GLOBAL_FLAGS.filter(([name]) => permissions.global[name]).map(([, text]) => text.toLowerCase());
  const streams = permissions.streams ? Object.keys(permissions.streams).length : 0;
  const parts = [names.length === GLOBAL_FLAGS.length ? "all" : names.join(", ") || "no global permissions"];
  if (streams) parts.push(`and on ${streams} stream${streams === 1 ? "" : "s"}`);
  return parts.join(" ");
}

function submitForm(label, children, onSubmit, submitText) {
  const form = h("form", { class: "card form", "aria-label": label }, h("h2", {}, label), children,
    h("button", { type: "submit", class: "primary" }, submitText));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await attempt(form.querySelector("button[type=submit]"), () => onSubmit(form));
  });
  return form;
}

export async function render(container) {
  container.append(h("h1", {}, "Users and tokens"));
  const again = async () => { container.replaceChildren(); await render(container); };
  if (can("read_users")) {
    const users = (await get("/users")).sort((a, b) => a.id - b.id);
    const details = await Promise.all(users.map((u) => get(`/users/${u.id}`)));
    const me = currentUser();
    container.append(table("Users", [
      ["Username", (u) => u.username], ["ID", (u) => u.id], ["Status", (u) => u.status],
      ["Permissions", (u) => permissionsText(u.permissions)], ["Created", (u) => timestamp(u.created_at)],
      ["Actions", (u) => (can("manage_users") ? h("div", { class: "actions" },
        h("a", { href: `#/users/${u.id}`, "aria-label": `Edit permissions of ${u.username}` }, "Permissions"),
        u.id === me.id ? null : h("button", {
          type: "button", class: "danger", "aria-label": `Delete user ${u.username}`,
          onclick: async (event) => {
            if (!await confirmAction("Delete user", `Delete user '${u.username}'? Their logins and personal access tokens stop working.`)) return;
            await attempt(event.target, async () => {
              await request("DELETE", `/users/${u.id}`);
              say(`User '${u.username}' deleted.`);
              await again();
            });
          },
        }, "Delete")) : "")],
    ], details));
  }
  if (can("manage_users")) {
    const [name, nameInput] = field("Username", { name: "username", required: true, autocomplete: "off" });
    const [password, passwordInput] = field("Password", { name: "password", type: "password", required: true, autocomplete: "new-password" });
    container.append(submitForm("Create a user", [name, password, flagBoxes("Global permissions")], async (form) => {
      const created = await request("POST", "/users", {
        username: nameInput.value.trim(), password: passwordInput.value,
        permissions: { global: readFlags(form), streams: null },
      });
      say(`User '${created.username}' created.`);
      await again();
    }, "Create user"));
  }
  await tokens(container, again);
}

async function tokens(container, again) {
  const mine = await get("/personal-access-tokens");
  container.append(h("h2", {}, "Your personal access tokens"), table("Your personal access tokens", [
    ["Name", (t) => t.name],
    ["Expires", (t) => (t.expiry_at ? timestamp(t.expiry_at) : "never")],
    ["Actions", (t) => h("button", {
      type: "button", class: "danger", "aria-label": `Delete token ${t.name}`,
      onclick: async (event) => {
        if (!await confirmAction("Delete token", `Delete personal access token '${t.name}'? Logins with it stop working.`)) return;
        await attempt(event.target, async () => {
          await request("DELETE", `/personal-access-tokens/${encodeURIComponent(t.name)}`);
          say(`Token '${t.name}' deleted.`);
          await again();
        });
      },
    }, "Delete")],
  ], mine, "You have no personal access tokens."));
  const [name, nameInput] = field("Name", { name: "token_name", required: true, autocomplete: "off" });
  const [expiry, expiryInput] = field("Expires after", { name: "token_expiry", placeholder: "server default", help: 'e.g. "30 d", "never"; empty: the server default', autocomplete: "off" });
  const shown = h("div", { id: "new-token", "aria-live": "polite" });
  container.append(submitForm("Create a personal access token", [name, expiry], async () => {
    const created = await request("POST", "/personal-access-tokens", {
      name: nameInput.value.trim(), expiry: parseExpiry(expiryInput.value),
    });
    await again();
    const slot = document.getElementById("new-token");
    slot.replaceChildren(h("div", { class: "card once", role: "alert" },
      h("p", {}, h("strong", {}, `Token '${nameInput.value.trim()}' created. Copy it now: it is shown only once.`)),
      h("code", { class: "token", tabindex: 0 }, created.token)));
  }, "Create token"), shown);
}

const STREAM_FLAGS = [
  ["manage_stream", "Manage"], ["read_stream", "Read"], ["manage_topics", "Manage topics"],
  ["read_topics", "Read topics"], ["poll_messages", "Poll"], ["send_messages", "Send"],
];

// A table of the server's streams with a checkbox per stream-level flag (named "s<id>.<flag>").
function streamBoxes(streams, given) {
  return table("Permissions on single streams", [
    ["Stream", (s) => s.name],
    ...STREAM_FLAGS.map(([flag, text]) => [text, (s) => h("input", {
      type: "checkbox", name: `s${s.id}.${flag}`, checked: Boolean(given[String(s.id)] && given[String(s.id)][flag]),
      "aria-label": `${text} on stream ${s.name}`,
    })]),
  ], streams, "No streams yet.");
}

// The streams map to save: the boxes' flags; a stream's topic-level permissions are kept.
function readStreams(form, streams, given) {
  const out = {};
  for (const [id, kept] of Object.entries(given)) {
    if (!streams.some((s) => String(s.id) === id)) out[id] = kept; // a stream this list lacks
  }
  for (const stream of streams) {
    const flags = Object.fromEntries(STREAM_FLAGS.map(([flag]) => [flag, form.elements[`s${stream.id}.${flag}`].checked]));
    const topics = given[String(stream.id)] && given[String(stream.id)].topics;
    if (Object.values(flags).some(Boolean) || topics) out[String(stream.id)] = { ...flags, topics: topics || null };
  }
  return Object.keys(out).length ? out : null;
}

// One user's permissions: the global flags and the stream-level ones (topic-level ones are
// kept as they are).
export async function renderUser(container, [userId]) {
  const user = await get(`/users/${encodeURIComponent(userId)}`);
  const permissions = user.permissions || { global: {}, streams: null };
  const onStreams = permissions.streams || {};
  const streams = can("read_streams_list") ? (await get("/streams")).sort((a, b) => a.id - b.id) : [];
  container.append(
    h("nav", { "aria-label": "Breadcrumb", class: "crumbs" }, h("ol", {},
      h("li", {}, h("a", { href: "#/users" }, "Users")), h("li", {}, h("span", { "aria-current": "page" }, user.username)))),
    h("h1", {}, `User ${user.username}`),
    h("p", { class: "summary" }, `ID ${user.id} · ${user.status} · permissions: ${permissionsText(user.permissions)} · created `, timestamp(user.created_at)));
  if (!can("manage_users")) return;
  container.append(submitForm("Change permissions", [flagBoxes("Global permissions", permissions.global),
    streams.length ? streamBoxes(streams, onStreams) : null,
    h("p", { class: "note" }, "Permissions on single topics are kept as they are (change them with the API or the CLI)."),
  ], async (form) => {
    const streamPermissions = streams.length ? readStreams(form, streams, onStreams) : permissions.streams;
    await request("PUT", `/users/${user.id}/permissions`, { permissions: { global: readFlags(form), streams: streamPermissions } });
    say(`Permissions of '${user.username}' saved.`);
    location.hash = "#/users";
  }, "Save permissions"));
}

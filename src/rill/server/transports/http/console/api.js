// The HTTP API as the console uses it: the login (the same JWT as any API client, kept in this
// tab's sessionStorage), one fetch wrapper that turns error bodies into ApiError, and the
// logged-in user's permissions (what buttons the views may show).

const TOKEN = "rill.console.token";
const USER = "rill.console.user";
export const U64_MAX = "18446744073709551615"; // "never" / "unlimited": kept as text (JS numbers stop at 2^53)

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.reason ? body.reason : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN);
}

export function currentUser() {
  const text = sessionStorage.getItem(USER);
  return text ? JSON.parse(text) : null;
}

// JSON text of a body; the "__u64_max__" placeholder becomes the exact 2^64-1.
function bodyText(body) {
  return JSON.stringify(body).replaceAll('"__u64_max__"', U64_MAX);
}

export async function request(method, path, body, { signal } = {}) {
  const headers = {};
  const auth = token();
  if (auth) headers.Authorization = `Bearer ${auth}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, body: body === undefined ? undefined : bodyText(body),
  });
  if (response.status === 401 && auth) {
    forget();
    window.dispatchEvent(new Event("rill-logged-out"));
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path, options) => request("GET", path, undefined, options);

async function remember(identity) {
  sessionStorage.setItem(TOKEN, identity.access_token.token);
  const user = await get(`/users/${identity.user_id}`);
  sessionStorage.setItem(USER, JSON.stringify(user));
  return user;
}

export async function login(username, password) {
  return remember(await request("POST", "/users/login", { username, password }));
}

export async function loginWithToken(personalToken) {
  return remember(await request("POST", "/personal-access-tokens/login", { token: personalToken }));
}

function forget() {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(USER);
}

export async function logout() {
  try { await request("DELETE", "/users/logout"); } catch { /* the token may be gone already */ }
  forget();
}

// The permission rules of the server (rill.server.auth.permissioner.Action): which global,
// stream and topic flags grant an action. The console shows only what the user may do; the
// server still decides.
const RULES = {
  read_server: [["manage_servers", "read_servers"], [], []],
  read_users: [["manage_users", "read_users"], [], []],
  manage_users: [["manage_users"], [], []],
  read_streams_list: [["manage_streams", "read_streams"], [], []],
  create_stream: [["manage_streams"], [], []],
  manage_stream: [["manage_streams"], ["manage_stream"], []],
  create_topic: [["manage_streams", "manage_topics"], ["manage_topics"], []],
  manage_topic: [["manage_streams", "manage_topics"], ["manage_topics"], ["manage_topic"]],
  read_messages: [["poll_messages"], ["poll_messages", "read_stream", "manage_topics", "read_topics"],
                  ["poll_messages", "read_topic", "manage_topic"]],
  write_messages: [["send_messages"], ["send_messages", "manage_stream", "manage_topics"],
                   ["send_messages", "manage_topic"]],
};

// Whether the logged-in user may do `action` (a key of RULES) on the server, a stream or a topic.
export function can(action, streamId, topicId) {
  const user = currentUser();
  const permissions = user && user.permissions;
  if (!permissions) return false;
  const [globalFlags, streamFlags, topicFlags] = RULES[action];
  const global = permissions.global || {};
  if (globalFlags.some((flag) => global[flag])) return true;
  if (streamId === undefined || !permissions.streams) return false;
  const stream = permissions.streams[String(streamId)];
  if (!stream) return false;
  if (streamFlags.some((flag) => stream[flag])) return true;
  if (topicId === undefined || !stream.topics) return false;
  const topic = stream.topics[String(topicId)];
  return Boolean(topic && topicFlags.some((flag) => topic[flag]));
}

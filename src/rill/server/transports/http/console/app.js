// The console's shell: login and logout, the navigation, and the hash router that shows one
// view at a time (#/overview, #/streams, #/streams/S, #/streams/S/topics/T, #/messages?...,
// #/consumers?..., #/users, #/users/U, #/cluster).
// A view is `render(container, params)`; it may return a function that stops its timers and
// streams when the view is left.

import { currentUser, login, loginWithToken, logout, token } from "./api.js";
import { clearStatus, say } from "./ui.js";
import * as overview from "./overview.js";
import * as streams from "./streams.js";
import * as consumers from "./consumers.js";
import * as messages from "./messages.js";
import * as users from "./users.js";
import * as cluster from "./cluster.js";

const ROUTES = [
  [/^#\/overview$/, overview.render, "overview"],
  [/^#\/streams$/, streams.renderStreams, "streams"],
  [/^#\/streams\/([^/]+)$/, streams.renderStream, "streams"],
  [/^#\/streams\/([^/]+)\/topics\/([^/]+)$/, streams.renderTopic, "streams"],
  [/^#\/messages$/, messages.render, "messages"],
  [/^#\/consumers$/, consumers.render, "consumers"],
  [/^#\/users$/, users.render, "users"],
  [/^#\/users\/([^/]+)$/, users.renderUser, "users"],
  [/^#\/cluster$/, cluster.render, "cluster"],
];

let stopView = null;

function show(loggedIn) {
  document.getElementById("login-view").hidden = loggedIn;
  document.getElementById("view").hidden = !loggedIn;
  document.getElementById("nav").hidden = !loggedIn;
  document.getElementById("who").hidden = !loggedIn;
  if (loggedIn) {
    document.getElementById("who-name").textContent = `Logged in as ${currentUser().username}`;
  }
}

// Shows the view of the location's hash. `moved`: the person went there (a link, the login), so
// the keyboard focus goes to the new view's heading, where a screen reader starts reading.
async function route(moved = false) {
  if (stopView) { stopView(); stopView = null; }
  if (!token() || !currentUser()) {
    show(false);
    document.getElementById("login-username").focus();
    return;
  }
  show(true);
  const [path, query] = (location.hash || "#/overview").split("?");
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  if (!found) { location.hash = "#/overview"; return; }
  const [pattern, render, section] = found;
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.view === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const view = document.getElementById("view");
  view.replaceChildren();
  const ids = pattern.exec(path).slice(1).map(decodeURIComponent);
  try {
    stopView = (await render(view, ids, new URLSearchParams(query || ""))) || null;
    const heading = view.querySelector("h1");
    if (moved && heading) {
      heading.tabIndex = -1;
      heading.focus();
    }
  } catch (error) {
    say(error.message, "error");
  }
}

function setUpLogin() {
  const form = document.getElementById("login-form");
  const error = document.getElementById("login-error");
  form.addEventListener("change", () => {
    const byToken = form.elements.method.value === "token";
    document.getElementById("password-fields").hidden = byToken;
    document.getElementById("token-fields").hidden = !byToken;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      if (form.elements.method.value === "token") await loginWithToken(form.elements.token.value.trim());
      else await login(form.elements.username.value.trim(), form.elements.password.value);
      form.reset();
      if (!location.hash || location.hash === "#/login") location.hash = "#/overview";
      else route(true);
    } catch (failure) {
      error.textContent = `Login failed: ${failure.message}`;
      error.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
  document.getElementById("logout").addEventListener("click", async () => {
    await logout();
    clearStatus();
    say("Logged out.");
    route();
  });
}

setUpLogin();
window.addEventListener("hashchange", () => route(true));
window.addEventListener("rill-logged-out", () => { say("Your session ended: log in again.", "error"); route(); });
route();

// Small DOM helpers shared by the views: element building, the status line, the confirmation
// dialog, tables and labelled form fields. Text is always set as text (never as HTML).

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

let statusTimer = null;

// A message in the status line: "ok" or "error"; errors stay until the next message.
export function say(text, kind = "ok") {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = `status ${kind}`;
  status.hidden = false;
  clearTimeout(statusTimer);
  if (kind === "ok") statusTimer = setTimeout(() => { status.hidden = true; }, 6000);
}

export function clearStatus() {
  document.getElementById("status").hidden = true;
}

// Asks in a modal dialog; resolves true when confirmed. `text` names what will be lost.
export function confirmAction(title, text, action = "Delete") {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = action;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

// A table with a caption; `columns` are [header, cell(row)] pairs; cells may return nodes.
export function table(caption, columns, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("div", { class: "table-wrap" }, h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map(([header]) => h("th", { scope: "col" }, header)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row))))))));
}

let fieldIds = 0;

// A labelled input: returns [wrapper, input].
export function field(label, attributes = {}) {
  const id = `field-${++fieldIds}`;
  const input = attributes.tag === "select"
    ? h("select", { id, name: attributes.name }, (attributes.options || []).map(
      ([value, text]) => h("option", { value, selected: value === attributes.value }, text)))
    : attributes.tag === "textarea"
      ? h("textarea", { id, name: attributes.name, rows: attributes.rows || 4 }, attributes.value || "")
      : h("input", { id, ...attributes, tag: undefined });
  const wrapper = h("div", { class: "field" }, h("label", { for: id }, label), input,
    attributes.help ? h("small", {}, attributes.help) : null);
  return [wrapper, input];
}

// Runs an API call for a button: disables it meanwhile, reports the error in the status line.
export async function attempt(button, work) {
  if (button) button.disabled = true;
  try {
    return await work();
  } catch (error) {
    say(error.message, "error");
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// The topic a link names, by ID or by name (undefined: none).
export function findTopic(topics, named) {
  if (!named) return undefined;
  return topics.find((t) => String(t.id) === named) || topics.find((t) => t.name === named);
}

// Building the page: elements from data (always as text, never as HTML, since memory
// contents and names come from anyone who wrote to the store), a memory as a list item,
// a refused call as a message, and the two dialogs (confirm, supersede).

import { ApiError } from "./api.js";

/** el("button", {type: "button", onclick}, "text", child...): attributes, then children. */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const $ = (selector) => document.querySelector(selector);

export function show(node, visible = true) {
  node.hidden = !visible;
}

/** A refused call in words: "409 conflict_error: <message>" and the fields it carries. */
export function describeError(failure) {
  if (!(failure instanceof ApiError)) return { title: "Error", message: String(failure.message || failure), details: [] };
  const { type, message, ...rest } = failure.error;
  const details = Object.entries(rest).map(([name, value]) => [name, typeof value === "string" ? value : JSON.stringify(value)]);
  return { title: `${failure.status} ${type || "error"}`, message: message || "", details };
}

export function errorBox(failure) {
  const { title, message, details } = describeError(failure);
  return el(
    "div",
    { class: "error-text" },
    el("strong", { class: "error-title" }, title),
    " ",
    el("span", { class: "error-message" }, message),
    details.length
      ? el("dl", { class: "error-details" }, details.map(([name, value]) => [el("dt", {}, name), el("dd", { dataset: { field: name } }, value)]))
      : null,
  );
}

const DATE_FIELDS = [
  ["created_at", "stored"],
  ["event_date", "happened"],
  ["time_bucket", "month"],
];

/** One memory as a list item; ``actions`` are buttons appended to it. */
export function memoryItem(memory, actions = []) {
  const facts = [
    el("span", { class: "speaker", dataset: { speaker: memory.speaker ?? "" } }, memory.speaker ?? "untagged"),
    el("span", { class: "category" }, memory.category ?? "general"),
    ...DATE_FIELDS.filter(([name]) => memory[name]).map(([name, label]) =>
      el("span", { class: name }, `${label} `, el("time", { datetime: memory[name] }, memory[name])),
    ),
    memory.similarity !== undefined ? el("span", { class: "similarity" }, `similarity ${memory.similarity.toFixed(3)}`) : null,
    memory.is_superseded
      ? el("span", { class: "superseded" }, "superseded by ", el("code", {}, memory.superseded_by ?? "?"))
      : el("span", { class: "current" }, "current"),
  ];
  return el(
    "li",
    { class: memory.is_superseded ? "memory is-superseded" : "memory", dataset: { id: memory.id } },
    el("p", { class: "content" }, memory.content),
    el("p", { class: "facts" }, facts),
    el("p", { class: "memory-id" }, "id ", el("code", {}, memory.id)),
    actions.length ? el("div", { class: "actions" }, actions) : null,
  );
}

/** Ask yes or no in a modal dialog (Escape and Cancel say no); resolves to true or false. */
export function confirmDialog({ title, body, confirmLabel, failure = null }) {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-body").replaceChildren(...[body].flat().map((line) => el("p", {}, line)));
  const problem = $("#confirm-error");
  problem.replaceChildren(failure ? errorBox(failure) : "");
  show(problem, Boolean(failure));
  $("#confirm-ok").textContent = confirmLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $("#confirm-cancel").focus();
  });
}

/** Ask for the new text of a memory; resolves to the text, or null when cancelled. */
export function supersedeDialog(memory) {
  return textDialog("supersede", memory.content);
}

/** Ask for a speaker's new name; resolves to the name, or null when cancelled. */
export function renameDialog(name) {
  return textDialog("rename", name);
}

/** The dialog ``#<id>`` showing ``old`` in ``#<id>-old`` and editing it in ``#<id>-text``. */
function textDialog(id, old) {
  const dialog = $(`#${id}`);
  $(`#${id}-old`).textContent = old;
  const input = $(`#${id}-text`);
  input.value = old;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" ? input.value : null), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
    input.select();
  });
}

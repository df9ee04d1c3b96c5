// Building the page: elements from data (always as text, never as HTML, since memory
// contents and names come from anyone who wrote to the store), a memory as a list item,
// a refused call as sentences, and the dialogs (confirm, supersede, rename).

import { ApiError } from "./api.js";
import { exactTime, excerpt, many, readableTime } from "./format.js";

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

const FIELD_WORDS = {
  as: "people's choices",
  body: "file",
  confirm_records: "count to confirm",
  content: "text",
  "content-type": "request",
  file: "file and its format",
  format: "format",
  limit: "number of results",
  max_results: "number of results",
  memory_id: "memory",
  new_content: "new version",
  new_name: "new name",
  query: "query",
  register: "people to register",
  skip: "people left out",
  speaker: "speaker's name",
  start: "time the recording began",
  tz: "time zone",
  user_id: "store id",
  user_name: "history's user",
};

/** ``text`` as a sentence: a capital first letter and a full stop. */
export function sentence(text) {
  const trimmed = String(text || "").trim();
  if (!trimmed) return "";
  const capital = trimmed[0].toLocaleUpperCase() + trimmed.slice(1);
  return /[.!?…:)]$/.test(capital) ? capital : `${capital}.`;
}

function seconds(ms) {
  return many(Math.max(1, Math.ceil(ms / 1000)), "second");
}

/** What to do about a refusal, in plain words, from the fields it carries, never from its message. */
function hint(status, error) {
  const field = error.field;
  if (status === 0) return "Check that the server is running, then try again.";
  if (status === 401) return "Enter the server's API key to go on.";
  if (status === 403) return "Open this page from the server's own address.";
  if (Number.isFinite(error.retry_after_ms)) return `Try again in ${seconds(error.retry_after_ms)}.`;
  if (status === 503) return "The server is not ready yet; try again in a moment.";
  if (Number.isInteger(error.records_to_delete)) return "Nothing changed: the memories changed meanwhile. Try again.";
  if (error.conflicts_with) {
    return `The store ${error.conflicts_with} exists already, and ids that differ only in ".", "_" or "-" cannot both exist.`;
  }
  if (error.superseded_by) return "Only the current version of a memory can be superseded.";
  if (Number.isInteger(error.speaker_limit)) return `A store registers at most ${many(error.speaker_limit, "person")}.`;
  if (Array.isArray(error.unresolved)) {
    return `Choose for ${many(error.unresolved.length, "person")} of the file: register, the same as a registered speaker, untagged, or left out.`;
  }
  if (Number.isInteger(error.max_bytes)) return `At most ${(error.max_bytes / 1048576).toFixed(0)} MiB fit in one request.`;
  if (Number.isInteger(error.max_chars)) return `At most ${many(error.max_chars, "character")} fit.`;
  if (status === 404 && field === "speaker") return `Pick a speaker from the list, or register ${error.speaker ?? "them"} first.`;
  if (status === 404 && field === "user_id") return "Pick a store from the list, or create it.";
  if (status === 404 && field === "memory_id") return "It may have been forgotten meanwhile.";
  if (field) return `Check the ${FIELD_WORDS[field] ?? field.replaceAll("_", " ")}.`;
  return "";
}

/** A refused call as sentences: what the server said and what to do about it. */
export function describeError(failure) {
  if (!(failure instanceof ApiError)) return { message: sentence(failure?.message || failure), hint: "", status: "", type: "" };
  const error = failure.error;
  return { message: sentence(error.message), hint: hint(failure.status, error), status: failure.status, type: error.type || "" };
}

/** The box a refusal is shown in; status, type and field stay on it as data, not as text. */
export function errorBox(failure) {
  const { message, hint: advice, status, type } = describeError(failure);
  const field = failure instanceof ApiError ? failure.error.field : undefined;
  return el(
    "div",
    { class: "error-text", dataset: { status: String(status), type, field: field ?? "" } },
    el("p", { class: "error-message" }, message),
    advice ? el("p", { class: "error-hint" }, advice) : null,
  );
}

/** A ``<time>`` for an RFC 3339 string: readable (relative when recent), exact in its title. */
export function timeElement(text, now = new Date()) {
  return el("time", { datetime: text, title: exactTime(text) }, readableTime(text, now));
}

/** One memory as a list item; ``actions`` are buttons appended to it. The month bucket is
 * not shown: it is the month of the date shown beside it (when it happened, else stored).
 * Machine words (the id, a search's similarity) stay out of the reading view: they are in
 * the memory's Details menu, with a button that copies the id; a search result says its
 * ``closeness`` in words instead ("close match"). */
export function memoryItem(memory, actions = [], now = new Date(), closeness = undefined) {
  const facts = [
    closeness ? el("span", { class: "closeness", dataset: { closeness } }, closeness) : null,
    el("span", { class: "speaker", dataset: { speaker: memory.speaker ?? "" } }, memory.speaker ?? "untagged"),
    el("span", { class: "category" }, memory.category ?? "general"),
    memory.event_date ? el("span", { class: "event_date" }, "happened ", timeElement(memory.event_date, now)) : null,
    memory.created_at ? el("span", { class: "created_at" }, "stored ", timeElement(memory.created_at, now)) : null,
    memory.is_superseded
      ? el("span", { class: "superseded" }, "superseded by a later version")
      : el("span", { class: "current" }, "current"),
  ];
  return el(
    "li",
    { class: memory.is_superseded ? "memory is-superseded" : "memory", dataset: { id: memory.id }, tabindex: "-1" },
    el("p", { class: "content" }, memory.content),
    el("p", { class: "facts" }, facts),
    el("div", { class: "actions" }, actions, detailsMenu(memory)),
  );
}

/** Where a search's close matches end: the line between the last close match and the
 * results further from the question (format.closeness). */
export function lessCloseDivider() {
  return el("li", { class: "less-close-divider" }, el("p", {}, "Less close to the question:"));
}

/** The Details menu of a memory: what a program needs (its id, to copy; the similarity a
 * search gave it), one click away and never in the text a person reads. */
function detailsMenu(memory) {
  const rows = [["Id", el("code", { class: "memory-id" }, memory.id)]];
  if (memory.similarity !== undefined) rows.push(["Similarity to the query", memory.similarity.toFixed(3)]);
  return el(
    "details",
    { class: "more" },
    el("summary", { "aria-label": `Details of the memory “${excerpt(memory.content)}”` }, "Details"),
    el(
      "div",
      { class: "panel" },
      el("dl", {}, rows.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)])),
      el("button", { type: "button", class: "copy-id", onclick: (event) => copyId(memory.id, event.currentTarget) }, "Copy id"),
    ),
  );
}

/** Put ``id`` on the clipboard; where the browser allows no clipboard (a page served over
 * plain HTTP from another host), select it so that the reader's own copy takes it. */
async function copyId(id, trigger) {
  try {
    await navigator.clipboard.writeText(id);
    trigger.textContent = "Copied";
  } catch {
    const code = trigger.closest(".panel").querySelector("code");
    getSelection().selectAllChildren(code);
    trigger.textContent = "Selected: press Ctrl+C to copy";
  }
}

/** Ask yes or no in a modal dialog (Escape and Cancel say no); resolves to true or false. */
export function confirmDialog({ title, body, confirmLabel, failure = null }) {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-body").replaceChildren(...[body].flat().map((line) => el("p", {}, line)));
  const problem = $("#confirm-error");
  problem.replaceChildren(failure instanceof Error ? errorBox(failure) : el("p", {}, failure ?? ""));
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

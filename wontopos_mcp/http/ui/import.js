// Importing a conversation export into the open store, through the REST import route
// (POST /api/v1/memory/import: the file as the body, options in the query string):
//
// 1. the file, dropped or picked, is read without storing anything (a dry run): per
//    conversation, the people with their message counts and how each resolves;
// 2. each name that is not a registered speaker gets a choice: register it (the default),
//    the same person as a registered speaker, me, untagged, or left out;
// 3. Import sends the file again with those choices (register / as / skip), the upload's
//    progress shown, then "storing" until the answer, then what was stored, with a button
//    per speaker to that speaker's memories (the by-speaker view: newest first, so what
//    the import stored is on top; no REST read filters by conversation).
//
// A dry run answers every name, those that resolve to no one included ("unresolved", with
// a reason when the name rules refuse it: those cannot be registered, only mapped); the
// import itself refuses while one is left, so each gets a choice. A refusal of the server
// is shown as every other one is.

import { rest } from "./api.js";
import { $, el, sentence, show, timeElement } from "./dom.js";
import { many } from "./format.js";

const MAX_BYTES = 32 * 1024 * 1024; // the route's own limit
const FORMATS = [
  ["auto", "Detect from the content"],
  ["whatsapp", "WhatsApp (the .txt of Export chat)"],
  ["telegram", "Telegram Desktop (result.json)"],
  ["slack", "Slack (workspace export .zip)"],
  ["discord", "Discord (DiscordChatExporter .json)"],
  ["chatgpt", "ChatGPT (conversations.json)"],
  ["claude", "Claude (conversations.json)"],
  ["claude-code", "Claude Code (session .jsonl)"],
  ["vtt", "WebVTT subtitles (.vtt)"],
  ["srt", "SubRip subtitles (.srt)"],
  ["transcript", "Plain-text transcript"],
];
const UNTAGGED_KEY = "(untagged)"; // the summary's name for memories without a speaker

let host = null; // what the page lends this flow (wireImport)
const flow = {
  file: null, // the File chosen
  reading: 0, // the latest read's number: an answer to an older one is dropped
  read: null, // the dry run: {summary, choices: [entry], user: entry | null, speakers, limit}
};

// -- opening and closing -----------------------------------------------------------------------

/** Show the import for the open store, at the step it is at; the reader taken to it. */
export function openImport() {
  $("#import-store").textContent = host.store();
  show($("#import"));
  $("#open-import").setAttribute("aria-expanded", "true");
  const title = $("#import-title");
  title.scrollIntoView({ block: "start" });
  title.focus({ preventScroll: true });
}

/** Hide the import and forget its file (another store is opened, the key forgotten). */
export function closeImport() {
  show($("#import"), false);
  $("#open-import").setAttribute("aria-expanded", "false");
  startOver();
}

function startOver() {
  flow.file = null;
  flow.read = null;
  flow.reading += 1;
  $("#import-file").value = "";
  $("#import-file-name").textContent = "";
  for (const part of ["#import-review", "#import-progress", "#import-done"]) show($(part), false);
  show($("#import-form"));
}

function size(bytes) {
  const units = ["bytes", "kB", "MB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${new Intl.NumberFormat(undefined, { maximumFractionDigits: unit ? 1 : 0 }).format(value)} ${units[unit]}`;
}

async function chooseFile(file) {
  if (!file) return;
  flow.file = file;
  $("#import-file-name").textContent = size(file.size);
  await read();
}

// -- the query -----------------------------------------------------------------------------------

/** The options every request of one file carries: store, format, time zone, start, name. */
function baseParams(format = $("#import-format").value) {
  const params = new URLSearchParams({ user_id: host.store(), format, name: flow.file.name });
  const zone = $("#import-tz");
  if (!zone.closest(".field").hidden && zone.value.trim()) params.set("tz", zone.value.trim());
  const start = $("#import-start"); // in the reader's local time
  if (!start.closest(".field").hidden && start.value) params.set("start", new Date(start.value).toISOString());
  return params;
}

/** The query of the import itself, from the choices made. */
function importParams() {
  const { summary, choices, user } = flow.read;
  const params = baseParams(summary.format); // the format the read found: not detected twice
  for (const entry of choices) {
    if (entry.choice === "register") params.set("register", "true");
    else if (entry.choice === "skip") params.append("skip", entry.name);
    else params.append("as", `${entry.name}=${target(entry.choice)}`);
  }
  if (user && user.choice.startsWith("as:")) params.set("user_name", user.choice.slice(3));
  return params;
}

/** ``as``'s right-hand side for a choice: a registered speaker, ``me``, or ``-`` (untagged). */
function target(choice) {
  if (choice === "me") return "me";
  if (choice === "untagged") return "-";
  return choice.slice(3); // "as:<speaker>"
}

// -- reading: the dry run ---------------------------------------------------------------------------

/** Read the chosen file without storing anything and show who is who. */
async function read() {
  const file = flow.file;
  if (!file) {
    $("#import-file").focus();
    return;
  }
  if (file.size > MAX_BYTES) {
    throw new Error(
      `${file.name} is ${size(file.size)}; one import takes at most 32 MiB. Import it with the command line (wontopos-mcp import), which takes any size`,
    );
  }
  const reading = ++flow.reading;
  host.notify(); // what was said before (a refused read) is over
  show($("#import-review"), false);
  show($("#import-done"), false);
  const params = baseParams();
  params.set("dry_run", "true");
  let summary;
  try {
    summary = await rest.importFile(params, file, progress("Reading the file"));
  } catch (failure) {
    if (reading === flow.reading) throw failure;
    return; // a read nobody waits for any more: another file or option was chosen
  } finally {
    if (reading === flow.reading) show($("#import-progress"), false);
  }
  if (reading !== flow.reading) return;
  const speakers = await rest.speakers(host.store());
  flow.read = {
    summary,
    choices: choicesOf(summary),
    user: userChoice(summary),
    speakers: speakers.speakers.map((entry) => entry.speaker).sort(new Intl.Collator(undefined, { numeric: true }).compare),
    registered: speakers.count,
    limit: speakers.limit,
  };
  renderReview();
  const title = $("#import-review-title");
  title.scrollIntoView({ block: "start" });
  title.focus({ preventScroll: true });
}

/** One entry per export name that resolves to no one, over every conversation: ``name``
 * as the export writes it, ``messages``, ``register`` (the speaker it would register as;
 * null when the name rules refuse it, which ``reason`` says), and the ``choice``: register
 * when it can, else untagged. */
function choicesOf(summary) {
  const entries = new Map();
  for (const person of summary.conversations.flatMap((c) => c.people)) {
    if (person.role !== "person" || person.resolves !== "unresolved") continue;
    const entry = entries.get(person.name);
    if (entry) {
      entry.messages += person.messages;
      continue;
    }
    const register = person.reason ? null : person.speaker ?? person.name.trim();
    entries.set(person.name, {
      name: person.name,
      messages: person.messages,
      register,
      reason: person.reason ?? null,
      choice: register ? "register" : "untagged",
    });
  }
  return [...entries.values()];
}

/** The owner of an assistant history (untagged unless named): a choice among the
 * registered speakers, when the file has one. */
function userChoice(summary) {
  const messages = summary.conversations
    .flatMap((c) => c.people)
    .filter((p) => p.role === "user")
    .reduce((sum, p) => sum + p.messages, 0);
  return messages ? { name: "you (the history's user)", messages, choice: "untagged", user: true } : null;
}

/** What a choice does, in words. */
function meaning(entry) {
  const choice = entry.choice;
  if (choice === "register") return `${entry.register}, registered by this import`;
  if (choice === "me") return "me (the assistant)";
  if (choice === "untagged") return "untagged";
  if (choice === "skip") return "left out: not imported";
  return choice.slice(3);
}

/** What a person of the dry run resolves to, in words (the choices' own are ``meaning``). */
function resolvesText(person) {
  const entry = choiceFor(person);
  if (entry) return meaning(entry);
  switch (person.resolves) {
    case "registered":
      return `${person.speaker}, registered`;
    case "mapped":
      return `${person.speaker}`;
    case "register":
      return `${person.speaker}, registered by this import`;
    case "me":
      return "me (the assistant)";
    case "untagged":
      return "untagged";
    case "unresolved":
      return "no one yet: the import would be refused";
    default:
      return person.resolves;
  }
}

function choiceFor(person) {
  if (person.role === "user") return flow.read.user;
  if (person.role !== "person") return null;
  return flow.read.choices.find((entry) => entry.name === person.name) ?? null;
}

function personName(person) {
  if (person.role === "assistant") return "the assistant";
  if (person.role === "user") return "you (the history's user)";
  return person.name;
}

// -- the review: who is who, per conversation -------------------------------------------------------

function renderReview() {
  const { summary, choices, user } = flow.read;
  const conversations = summary.conversations;
  $("#import-review-title").textContent = `Who is who in ${summary.file}`;
  const format = FORMATS.find(([name]) => name === summary.format)?.[1] ?? summary.format;
  $("#import-overview").textContent = [
    format,
    `${many(summary.messages, "message")} in ${many(conversations.length, "conversation")}`,
    `times read in ${summary.tz}`,
  ].join(" · ");
  const deciding = user ? [...choices, user] : choices;
  show($("#import-choices"), deciding.length > 0);
  $("#import-people").replaceChildren(...deciding.map((entry, index) => choiceRow(entry, index)));
  $("#import-conversations").replaceChildren(...conversations.map(conversationItem));
  updateReview();
  show($("#import-review"));
}

function choiceRow(entry, index) {
  const id = `import-choice-${index}`;
  const speakers = flow.read.speakers;
  const options = entry.user
    ? [el("option", { value: "untagged" }, "untagged"), speakers.map((name) => el("option", { value: `as:${name}` }, name))]
    : [
        entry.register ? el("option", { value: "register" }, `register ${entry.register} as a new speaker`) : null,
        speakers.length
          ? el("optgroup", { label: "the same person as" }, speakers.map((name) => el("option", { value: `as:${name}` }, name)))
          : null,
        el("option", { value: "me" }, "me (the assistant)"),
        el("option", { value: "untagged" }, "untagged (no speaker)"),
        el("option", { value: "skip" }, "leave out (not imported)"),
      ];
  const select = el(
    "select",
    {
      id,
      "aria-label": `Store the messages of ${entry.user ? "the history's user" : entry.name} as`,
      onchange: (event) => {
        entry.choice = event.currentTarget.value;
        updateReview();
      },
    },
    options,
  );
  select.value = entry.choice;
  return el(
    "li",
    { class: "choice", dataset: { name: entry.name } },
    el("label", { for: id }, el("span", { class: "person" }, entry.name), " ", el("span", { class: "count" }, many(entry.messages, "message"))),
    select,
    entry.reason ? el("p", { class: "hint" }, "Cannot be registered: ", sentence(entry.reason)) : null,
  );
}

function conversationItem(conversation) {
  const title = conversation.title || conversation.conversation_id.replace(/^[^:]*:/, "");
  const skipped = Object.entries(conversation.skipped);
  const facts = [
    el("span", {}, many(conversation.messages, "message")),
    conversation.first
      ? el("span", {}, "from ", timeElement(conversation.first), " to ", timeElement(conversation.last))
      : null,
    skipped.length
      ? el("span", {}, "skipped: ", skipped.map(([kind, count]) => `${count} ${kind.replaceAll("_", " ")}`).join(", "))
      : null,
  ];
  return el(
    "li",
    { class: "conversation", dataset: { conversation: conversation.conversation_id } },
    el("p", { class: "conversation-title" }, title),
    el("p", { class: "facts" }, facts),
    el(
      "ul",
      { class: "people" },
      conversation.people.map((person) =>
        el(
          "li",
          { dataset: { name: person.name, role: person.role } },
          el("span", { class: "person" }, personName(person)),
          el("span", { class: "count" }, many(person.messages, "message")),
          el("span", { class: "resolves", dataset: { resolves: person.resolves } }, "→ ", resolvesText(person)),
        ),
      ),
    ),
  );
}

/** After a choice: each person's "→ ..." and the Import button's words. */
function updateReview() {
  const { summary, choices, registered, limit } = flow.read;
  let kept = 0;
  for (const conversation of summary.conversations) {
    const item = [...document.querySelectorAll("#import-conversations > li")].find(
      (node) => node.dataset.conversation === conversation.conversation_id,
    );
    for (const person of conversation.people) {
      const entry = choiceFor(person);
      if (entry?.choice !== "skip") kept += person.messages;
      const row = [...item.querySelectorAll(".people > li")].find((node) => node.dataset.name === person.name);
      row.querySelector(".resolves").replaceChildren("→ ", resolvesText(person));
    }
  }
  const registering = choices.filter((entry) => entry.choice === "register").length;
  const total = registered + registering;
  $("#import-choices-legend").textContent = `Not yet speakers of ${summary.user_id}`;
  $("#import-choices-hint").textContent = [
    "Choose how to store what each said.",
    registering ? `Registering ${many(registering, "person")} makes ${total} of the store's ${limit}.` : "",
    total > limit ? "That is past its limit: map some to a registered speaker, or leave them out." : "",
  ]
    .filter(Boolean)
    .join(" ");
  $("#import-run").textContent = `Import ${many(kept, "message")}`;
}

// -- importing ---------------------------------------------------------------------------------------

/** A progress callback for ``api.upload``: the share sent, then ``phase`` until the answer. */
function progress(phase) {
  const bar = $("#import-bar");
  const words = $("#import-phase");
  const name = flow.file.name;
  bar.max = 1;
  bar.value = 0;
  words.textContent = `Sending ${name}: 0%`;
  show($("#import-progress"));
  return (sent) => {
    if (sent) {
      const share = sent.total ? sent.loaded / sent.total : 1;
      bar.value = share;
      words.textContent = `Sending ${name}: ${Math.floor(share * 100)}%`;
    } else {
      bar.removeAttribute("value"); // indeterminate: the server is at work
      words.textContent = `${phase}…`;
    }
  };
}

async function runImport() {
  const reading = flow.reading;
  const params = importParams();
  host.notify();
  const review = $("#import-review");
  review.inert = true;
  $("#import-run").disabled = true;
  $("#import-form").inert = true;
  let summary;
  try {
    summary = await rest.importFile(params, flow.file, progress("Storing the messages: each is embedded, a long chat takes a while"));
  } finally {
    show($("#import-progress"), false);
    review.inert = false;
    $("#import-run").disabled = false;
    $("#import-form").inert = false;
  }
  if (reading !== flow.reading) return;
  renderDone(summary);
  show(review, false);
  show($("#import-form"), false);
  const title = $("#import-done-title");
  title.scrollIntoView({ block: "start" });
  title.focus({ preventScroll: true });
  host.notify(`Imported ${summary.file}: ${many(summary.stored, "memory")} stored`);
  await host.refresh();
}

function renderDone(summary) {
  $("#import-done-title").textContent =
    summary.stored || !summary.already_imported
      ? `Imported ${summary.file} into ${summary.user_id}`
      : `Nothing new in ${summary.file}: every message was imported before`;
  const skipped = Object.entries(summary.skipped);
  const totals = [
    `${many(summary.stored, "memory")} stored`,
    summary.already_imported ? `${many(summary.already_imported, "message")} imported before, not stored again` : null,
    summary.duplicates ? `${many(summary.duplicates, "message")} restating a memory already stored, not stored again` : null,
    summary.refused ? `${many(summary.refused, "message")} refused by the store` : null,
    skipped.length ? `skipped: ${skipped.map(([kind, count]) => `${count} ${kind.replaceAll("_", " ")}`).join(", ")}` : null,
    summary.registered?.length ? `registered: ${summary.registered.join(", ")}` : null,
    `times read in ${summary.tz}`,
  ];
  $("#import-totals").replaceChildren(...totals.filter(Boolean).map((line) => el("li", {}, sentence(line))));
  // Every speaker the file's people went to, with what this run stored for each: a
  // re-import stores nothing and still leads to them.
  const stored = new Map(Object.entries(summary.speakers));
  const people = summary.conversations.flatMap((c) => c.people);
  for (const person of people) {
    const speaker = person.speaker ?? (person.resolves === "untagged" ? UNTAGGED_KEY : null);
    if (speaker && !stored.has(speaker)) stored.set(speaker, 0);
  }
  const untaggedLast = (a, b) => Number(a[0] === UNTAGGED_KEY) - Number(b[0] === UNTAGGED_KEY);
  const rows = [...stored.entries()].sort((a, b) => untaggedLast(a, b) || b[1] - a[1]);
  $("#import-speakers tbody").replaceChildren(
    ...rows.map(([speaker, count]) => {
      const untagged = speaker === UNTAGGED_KEY;
      return el(
        "tr",
        { dataset: { speaker } },
        el("th", { scope: "row" }, untagged ? "untagged" : speaker),
        el("td", { class: "count" }, many(count, "memory")),
        el(
          "td",
          {},
          untagged
            ? el("button", { type: "button", onclick: host.action(host.showAll) }, "All memories")
            : el(
                "button",
                { type: "button", "aria-label": `Show the memories of ${speaker}`, onclick: host.action(() => host.showSpeaker(speaker)) },
                "Memories",
              ),
        ),
      );
    }),
  );
  show($("#import-speakers"), rows.length > 0);
  show($("#import-done"));
}

// -- wiring --------------------------------------------------------------------------------------------

const hasFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes("Files");

// Which formats read local times (the time zone) or need the time a recording began.
const ZONED = new Set(["auto", "whatsapp", "transcript"]);
const STARTED = new Set(["auto", "vtt", "srt", "transcript"]);

/** Show the time zone and the start only where the chosen format reads them. */
function showOptions() {
  const format = $("#import-format").value;
  show($("#import-tz").closest(".field"), ZONED.has(format));
  show($("#import-start").closest(".field"), STARTED.has(format));
}

/** Wire the flow; ``page`` lends what it needs of the page: ``store()`` (the open store's
 * id), ``action(run)`` (a refusal becomes the notice), ``notify``, ``refresh`` (counts
 * again), ``showSpeaker(name)`` and ``showAll()`` (the views that show memories). */
export function wireImport(page) {
  host = page;
  const format = $("#import-format");
  format.replaceChildren(...FORMATS.map(([value, label]) => el("option", { value }, label)));
  $("#import-tz").value = Intl.DateTimeFormat().resolvedOptions().timeZone ?? "";
  $("#import-tz").placeholder = "the server's";
  format.addEventListener("change", showOptions);
  showOptions();
  const input = $("#import-file");
  input.addEventListener(
    "change",
    host.action(() => chooseFile(input.files[0])),
  );
  $("#import-form").addEventListener("submit", host.action(read));
  // Another way to read the same file: read it again (a stale review would mislead).
  for (const option of ["#import-format", "#import-tz", "#import-start"]) {
    $(option).addEventListener(
      "change",
      host.action(() => (flow.file ? read() : null)),
    );
  }
  $("#import-close").addEventListener("click", () => {
    closeImport();
    $("#open-import").focus();
  });
  $("#import-run").addEventListener("click", host.action(runImport));
  $("#import-again").addEventListener("click", () => {
    startOver();
    input.focus();
  });
  // A file dropped on the zone, or anywhere on the page while a store is open (instead of
  // the browser opening it), is the file to import.
  const zone = $("#import-drop");
  document.addEventListener("dragover", (event) => {
    if (!hasFiles(event) || !host.store() || $("#app").hidden) return;
    event.preventDefault();
    zone.classList.toggle("over", zone.contains(event.target));
  });
  document.addEventListener("dragleave", (event) => {
    if (event.target === zone) zone.classList.remove("over");
  });
  document.addEventListener(
    "drop",
    (event) => {
      if (!hasFiles(event) || !host.store() || $("#app").hidden) return;
      event.preventDefault();
      zone.classList.remove("over");
      const file = event.dataTransfer.files[0];
      if ($("#import").hidden) openImport();
      if (!$("#import-done").hidden) startOver();
      input.files = event.dataTransfer.files; // the picker names the file dropped (no change event)
      return host.action(() => chooseFile(file))();
    },
  );
}

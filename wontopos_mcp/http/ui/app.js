// The memory browser: pick a store, see its speakers with their counts, read one
// speaker's memories newest first (by_speaker pages), list or search them, and fix what
// is wrong (forget, supersede, register, rename and remove speakers), every call through
// the REST API (api.js). Every view is plain HTML controls, so the keyboard reaches all of it.

import { ApiError, key, rest } from "./api.js";
import { $, confirmDialog, el, errorBox, memoryItem, renameDialog, show, supersedeDialog } from "./dom.js";
import { download, fileName, speakerMemories, storeMemories } from "./export.js";

const SPEAKER_PAGE = 20; // by_speaker's largest page
const LIST_PAGE = 20;
const MAX_CHAIN = 50; // later versions followed by "Show later versions"

const state = {
  store: null, // the open store's id, as the server echoes it
  view: null, // the results shown: {title, load(page) -> {memories, summary, next}, pages: [page params]}
};

// -- messages ------------------------------------------------------------------------------

function notify(text) {
  show($("#notice"), false);
  $("#status").textContent = text;
}

function fail(failure) {
  if (failure instanceof ApiError && failure.status === 401) {
    key.clear();
    showLogin(failure);
    return;
  }
  $("#status").textContent = "";
  const notice = $("#notice");
  notice.replaceChildren(errorBox(failure));
  show(notice);
}

/** Run an action from a button or form; a refused call becomes the notice. */
function action(run) {
  return async (event) => {
    event?.preventDefault?.();
    try {
      await run(event);
    } catch (failure) {
      fail(failure);
    }
  };
}

// -- the key --------------------------------------------------------------------------------

function showLogin(failure = null) {
  show($("#app"), false);
  show($("#logout"), false);
  show($("#login"));
  const notice = $("#notice");
  notice.replaceChildren(failure ? errorBox(failure) : "");
  show(notice, Boolean(failure));
  $("#api-key").value = "";
  $("#api-key").focus();
}

async function enter() {
  await loadStores();
  show($("#login"), false);
  show($("#app"));
  show($("#logout"));
  $("#store-select").focus();
}

// -- stores ---------------------------------------------------------------------------------

async function loadStores(selected = state.store) {
  const { collections } = await rest.stores();
  const select = $("#store-select");
  select.replaceChildren(...collections.map(({ user_id }) => el("option", { value: user_id }, user_id)));
  if (selected && collections.some(({ user_id }) => user_id === selected)) select.value = selected;
}

async function openStore(userId) {
  state.store = userId;
  $("#store-name").textContent = userId;
  $("#where").textContent = `store ${userId}`;
  show($("#results"), false);
  await loadSpeakers();
  show($("#store"));
}

// -- speakers -------------------------------------------------------------------------------

function button(label, run, attributes = {}) {
  return el("button", { type: "button", onclick: action(run), ...attributes }, label);
}

function speakerRow(name, count, createdAt, registered) {
  const label = (verb) => `${verb} ${name}`;
  return el(
    "tr",
    { dataset: { speaker: name } },
    el("th", { scope: "row" }, name, registered ? null : el("span", { class: "hint" }, " (the assistant)")),
    el("td", { class: "count" }, registered ? String(count) : "not counted"),
    el("td", {}, createdAt ? el("time", { datetime: createdAt }, createdAt) : "—"),
    el(
      "td",
      { class: "actions" },
      button("Memories", () => showSpeaker(name), { "aria-label": label("Show the memories of") }),
      button("Export", () => exportSpeaker(name), { "aria-label": label("Export the memories of") }),
      button("Forget memories…", () => forgetSpeaker(name), { class: "danger", "aria-label": label("Forget every memory of") }),
      registered ? button("Rename…", () => renameSpeaker(name, count), { "aria-label": label("Rename") }) : null,
      registered ? button("Remove…", () => removeSpeaker(name, count), { class: "danger", "aria-label": label("Remove") }) : null,
    ),
  );
}

async function loadSpeakers() {
  const answer = await rest.speakers(state.store);
  $("#speakers tbody").replaceChildren(
    ...answer.speakers.map((s) => speakerRow(s.speaker, s.memories, s.created_at, true)),
    speakerRow("me", null, null, false),
  );
  $("#speaker-limit").textContent = `${answer.count} of ${answer.limit} people registered`;
  const filter = $("#search-speaker");
  const chosen = filter.value;
  filter.replaceChildren(
    el("option", { value: "" }, "any speaker"),
    el("option", { value: "me" }, "me (the assistant)"),
    ...answer.speakers.map((s) => el("option", { value: s.speaker }, s.speaker)),
  );
  if ([...filter.options].some((option) => option.value === chosen)) filter.value = chosen;
}

async function registerSpeaker(name) {
  const answer = await rest.addSpeaker(state.store, name);
  await loadSpeakers();
  notify(answer.status === "exists" ? `${answer.speaker} was already registered` : `Registered ${answer.speaker}`);
}

async function renameSpeaker(name, count) {
  const wanted = await renameDialog(name);
  if (wanted === null || wanted.trim() === name) return;
  try {
    const answer = await rest.renameSpeaker(state.store, name, wanted);
    await loadSpeakers();
    show($("#results"), false); // a view of the old name would now be refused
    notify(`${answer.previous} is now ${answer.speaker}; ${answer.memories_retagged} memories follow`);
  } catch (refused) {
    // The new name is someone registered: offer to make the two one person instead.
    if (!(refused instanceof ApiError && refused.status === 409 && refused.error.field === "new_name")) throw refused;
    await mergeSpeaker(name, refused.error.speaker, count);
  }
}

/** ``n`` with the word that goes with it: "1 memory", "2 memories". */
function many(n, one, more) {
  return `${n} ${n === 1 ? one : more}`;
}

/** What a delete of every memory of a speaker removes, as a person checks it: the
 * memories first, the indexed records (what ``confirm_records`` counts) beside them. */
function deleteCount(page) {
  return `${many(page.memories_to_delete, "memory", "memories")} (${many(page.records_to_delete, "record", "records")})`;
}

async function mergeSpeaker(name, into, count) {
  const records = (await rest.bySpeaker(state.store, name, { limit: 5 })).records_to_delete;
  const sure = await confirmDialog({
    title: `Merge ${name} into ${into}?`,
    body: [`${into} is already registered. ${name}'s ${count} memories become ${into}'s and ${name}'s registration ends.`],
    confirmLabel: `Merge into ${into}`,
  });
  if (!sure) return;
  const answer = await rest.mergeSpeakers(state.store, name, into, records);
  await loadSpeakers();
  show($("#results"), false);
  notify(`Merged ${answer.merged} into ${answer.speaker}; ${answer.memories_retagged} memories moved`);
}

async function removeSpeaker(name, count) {
  const sure = await confirmDialog({
    title: `Remove the speaker ${name}?`,
    body: [`The registration goes; ${name}'s ${count} memories stay, untagged.`],
    confirmLabel: `Remove ${name}`,
  });
  if (!sure) return;
  const answer = await rest.removeSpeaker(state.store, name);
  await loadSpeakers();
  show($("#results"), false);
  notify(`Removed ${name}; ${answer.memories_untagged} memories are untagged now`);
}

// -- the results: a speaker's memories, all memories, a search -------------------------------

async function render() {
  const view = state.view;
  const page = view.pages[view.pages.length - 1];
  const { memories, summary, next } = await view.load(page);
  $("#results-title").textContent = view.title;
  $("#results-summary").textContent = summary;
  $("#memories").replaceChildren(...memories.map((memory) => memoryItem(memory, memoryActions(memory))));
  view.next = next;
  show($("#newer"), view.pages.length > 1);
  show($("#older"), Boolean(next));
  show($("#results"));
}

function openView(view) {
  state.view = { ...view, pages: [null] };
  return render();
}

async function refresh() {
  await loadSpeakers();
  if (state.view && !$("#results").hidden) {
    state.view.pages = [null]; // counts moved: start again from the first page
    await render();
  }
}

function showSpeaker(name) {
  return openView({
    title: `${name}: newest first`,
    load: async (page) => {
      const answer = await rest.bySpeaker(state.store, name, { limit: SPEAKER_PAGE, ...page });
      const next = answer.has_more ? { before: answer.next_before, skip_ids: answer.next_skip_ids } : null;
      return {
        memories: answer.memories,
        summary: `${many(answer.returned, "memory", "memories")} on this page; "Forget memories" would delete ${deleteCount(answer)} in all.`,
        next,
      };
    },
  });
}

function showAll() {
  return openView({
    title: "All memories: oldest first",
    load: async (cursor) => {
      const answer = await rest.list(state.store, LIST_PAGE, cursor);
      return { memories: answer.memories, summary: `${answer.count} memories on this page`, next: answer.next_cursor };
    },
  });
}

function search(query, speaker, limit, includeSuperseded) {
  return openView({
    title: `Search: ${query}`,
    load: async () => {
      const answer = await rest.search(state.store, query, { speaker: speaker || undefined, limit, includeSuperseded });
      const scope = speaker ? ` said by ${speaker}` : "";
      return { memories: answer.memories, summary: `${answer.memories.length} memories${scope}, best first`, next: null };
    },
  });
}

// -- one memory --------------------------------------------------------------------------------

function memoryActions(memory) {
  const actions = [button("Forget…", () => forgetMemory(memory), { class: "danger", "aria-label": `Forget memory ${memory.id}` })];
  if (memory.is_superseded) {
    actions.push(button("Show later versions", (event) => showChain(memory, event.currentTarget)));
  } else {
    actions.push(button("Supersede…", () => supersede(memory), { "aria-label": `Supersede memory ${memory.id}` }));
  }
  return actions;
}

async function forgetMemory(memory) {
  const sure = await confirmDialog({
    title: "Forget this memory?",
    body: [memory.content, "It is deleted with everything derived from it, and within a minute no file of the database holds it; this cannot be undone."],
    confirmLabel: "Forget it",
  });
  if (!sure) return;
  const answer = await rest.forget(state.store, memory.id);
  await refresh();
  notify(`Forgot ${answer.deleted} memory`);
}

async function supersede(memory) {
  const content = await supersedeDialog(memory);
  if (content === null) return;
  const answer = await rest.supersede(state.store, memory.id, content);
  await refresh();
  notify(`Stored the new version ${answer.id}; ${answer.superseded} is superseded`);
}

/** The supersede chain forward from ``memory``: each later version, to the current one. */
async function showChain(memory, trigger) {
  const versions = [];
  let next = memory.superseded_by;
  while (next && versions.length < MAX_CHAIN) {
    const { memory: later } = await rest.get(state.store, next);
    versions.push(later);
    next = later.superseded_by;
  }
  const chain = el(
    "ol",
    { class: "chain", "aria-label": "later versions" },
    versions.map((later) => memoryItem(later)),
  );
  trigger.closest("li").querySelector(".chain")?.remove();
  trigger.closest("li").append(chain);
}

// -- destructive speaker actions and export ------------------------------------------------------

/** Forget every memory of ``name``: the count by_speaker reports is shown and confirmed;
 * when it changed meanwhile (409), the new count is shown and confirmed again. */
async function forgetSpeaker(name) {
  let counted = await rest.bySpeaker(state.store, name, { limit: 5 });
  let failure = null;
  for (;;) {
    const count = deleteCount(counted);
    const sure = await confirmDialog({
      title: `Forget every memory of ${name}?`,
      body: [
        failure ? `The count changed meanwhile: ${count} now.` : `This deletes ${count}.`,
        `Every memory ${name} said goes, superseded versions included (a record is one indexed sentence of a memory). The registration stays.`,
      ],
      confirmLabel: `Delete ${many(counted.memories_to_delete, "memory", "memories")}`,
      failure,
    });
    if (!sure) return;
    try {
      const answer = await rest.forgetSpeaker(state.store, name, counted.records_to_delete);
      await refresh();
      notify(`Deleted ${many(answer.deleted, "memory", "memories")} of ${name}`);
      return;
    } catch (refused) {
      if (!(refused instanceof ApiError && refused.status === 409 && Number.isInteger(refused.error.records_to_delete))) {
        throw refused;
      }
      counted = await rest.bySpeaker(state.store, name, { limit: 5 });  // both counts, as they are now
      failure = refused;
    }
  }
}

async function exportStore() {
  const memories = await storeMemories(state.store);
  download(fileName(state.store), memories);
  notify(`Exported ${memories.length} memories of ${state.store}`);
}

async function exportSpeaker(name) {
  const memories = await speakerMemories(state.store, name);
  download(fileName(state.store, name), memories);
  notify(`Exported ${memories.length} memories of ${name}`);
}

/** After a page change the pressed button may be hidden: move focus to the results. */
function keepFocus() {
  if (!document.activeElement || document.activeElement.hidden || document.activeElement === document.body) {
    $("#results-title").focus();
  }
}

// -- wiring ----------------------------------------------------------------------------------------

function wire() {
  $("#key-form").addEventListener(
    "submit",
    action(async () => {
      key.set($("#api-key").value.trim());
      await enter();
      notify("Connected");
    }),
  );
  $("#logout").addEventListener("click", () => {
    key.clear();
    state.store = null;
    state.view = null;
    showLogin();
  });
  $("#store-form").addEventListener("submit", action(() => openStore($("#store-select").value)));
  $("#create-store-form").addEventListener(
    "submit",
    action(async () => {
      const answer = await rest.createStore($("#new-store").value.trim());
      $("#new-store").value = "";
      await loadStores(answer.user_id);
      await openStore(answer.user_id);
      notify(answer.status === "exists" ? `${answer.user_id} already existed` : `Created ${answer.user_id}`);
    }),
  );
  $("#register-form").addEventListener(
    "submit",
    action(async () => {
      await registerSpeaker($("#new-speaker").value);
      $("#new-speaker").value = "";
    }),
  );
  $("#search-form").addEventListener(
    "submit",
    action(() =>
      search($("#query").value, $("#search-speaker").value, Number($("#search-limit").value), $("#include-superseded").checked),
    ),
  );
  $("#all-memories").addEventListener("click", action(showAll));
  $("#export-store").addEventListener("click", action(exportStore));
  $("#older").addEventListener(
    "click",
    action(() => {
      state.view.pages.push(state.view.next);
      return render().then(keepFocus);
    }),
  );
  $("#newer").addEventListener(
    "click",
    action(() => {
      state.view.pages.pop();
      return render().then(keepFocus);
    }),
  );
  // Enter stores the new version; Shift+Enter is a line break.
  $("#supersede-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#supersede").close("ok");
    }
  });
  // Enter renames (the form's first button is Cancel, which implicit submission would press).
  $("#rename-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing && event.target.value.trim()) {
      event.preventDefault();
      $("#rename").close("ok");
    }
  });
}

wire();
if (key.known()) action(enter)();
else showLogin();

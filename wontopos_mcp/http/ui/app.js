// The memory browser: pick a store, see its speakers with their counts, read one
// speaker's memories newest first (by_speaker pages), list or search them, fix what
// is wrong (forget, supersede, register, rename and remove speakers), and import a
// conversation export (import.js), every call through the REST API (api.js). Every view is plain HTML controls, so the keyboard reaches all of it.

import { ApiError, health, key, rest } from "./api.js";
import { $, confirmDialog, el, errorBox, lessCloseDivider, memoryItem, renameDialog, show, supersedeDialog, timeElement } from "./dom.js";
import { download, fileName, speakerMemories, storeMemories } from "./export.js";
import { closeness, excerpt, many, searchSummary } from "./format.js";
import { closeImport, openImport, wireImport } from "./import.js";

const SPEAKER_PAGE = 20; // by_speaker's largest page
const LIST_PAGE = 20;
const MAX_CHAIN = 50; // later versions followed by "Show later versions"

const byName = new Intl.Collator(undefined, { numeric: true }).compare; // the reader's order of names

const STORE_SLOT = "wontopos-mcp.store"; // the store this tab had open, opened again on a reload

const state = {
  store: null, // the open store's id, as the server echoes it
  view: null, // the results shown: {title, load(page) -> {memories, summary, next}, pages: [page params]}
};

// -- messages ------------------------------------------------------------------------------

/** A status line: words, and maybe a button (to show what was done), never a raw id. */
function notify(...parts) {
  show($("#notice"), false);
  $("#status").replaceChildren(...parts);
}

function fail(failure) {
  if (failure instanceof ApiError && failure.status === 401) {
    // A page that sent no key yet only learns here that the server wants one: ask for it
    // without calling that an error. A key that was sent and refused is shown as refused.
    const sent = Boolean(key.get());
    key.clear();
    showLogin(sent ? failure : null);
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
  show($("#search-form"), false);
  $("#where").textContent = "";
  show($("#login"));
  const notice = $("#notice");
  notice.replaceChildren(failure ? errorBox(failure) : "");
  show(notice, Boolean(failure));
  $("#api-key").value = "";
  $("#api-key").focus();
}

/** Show the stores and open one. Without a key in this tab, /healthz (never behind the
 * key) says first whether the server wants one: the page then asks for it before any call
 * instead of after a refused one (a 401 the browser's console reports as an error). A
 * server that cannot say goes on without a key; a 401 then still asks (``fail``). */
async function enter() {
  if (!key.known() && (await health()).api_key === "required") {
    showLogin();
    return;
  }
  const stores = await loadStores();
  const remembered = [state.store, sessionStorage.getItem(STORE_SLOT), "default"];
  const opening = remembered.find((name) => name && stores.includes(name)) ?? stores[0];
  if (opening !== undefined) await openStore(opening);
  show($("#login"), false);
  show($("#app"));
  show($("#logout"), Boolean(key.get()));
  $("#store-list button[aria-current]")?.focus() ?? $("#store-list button")?.focus();
}

// -- stores ---------------------------------------------------------------------------------

/** The stores, each a button that opens it, with its memories counted (superseded
 * included); answers their ids. */
async function loadStores() {
  const { collections } = await rest.stores();
  const focused = document.activeElement?.closest?.("#store-list button")?.dataset.store;
  $("#store-list").replaceChildren(
    ...collections.map(({ user_id, memories }) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "store",
            dataset: { store: user_id },
            "aria-current": user_id === state.store ? "true" : null,
            onclick: action(() => openStore(user_id, { focus: true })),
          },
          el("span", { class: "store-id" }, user_id),
          " ",
          el("span", { class: "store-count" }, Number.isInteger(memories) ? many(memories, "memory") : ""),
        ),
      ),
    ),
  );
  if (focused) $(`#store-list button[data-store="${CSS.escape(focused)}"]`)?.focus();
  return collections.map(({ user_id }) => user_id);
}

async function openStore(userId, { focus = false } = {}) {
  state.store = userId;
  state.view = null;
  sessionStorage.setItem(STORE_SLOT, userId);
  $("#store-name").textContent = userId;
  $("#where").textContent = `store ${userId}`;
  $("#search-form").setAttribute("aria-label", `Search the memories of ${userId}`);
  for (const item of document.querySelectorAll("#store-list button")) {
    if (item.dataset.store === userId) item.setAttribute("aria-current", "true");
    else item.removeAttribute("aria-current");
  }
  show($("#results"), false);
  closeImport(); // an import goes into the store it was opened for
  $("#status").replaceChildren(); // what was said about the store before does not carry over
  await loadSpeakers();
  show($("#store"));
  show($("#search-form"));
  show($("#search-options"));
  if (focus) $("#store-title").focus();
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
    el("td", { class: "count" }, Number.isInteger(count) ? many(count, "memory") : ""),
    el("td", { class: "registered" }, createdAt ? ["registered ", timeElement(createdAt)] : "never registered"),
    el(
      "td",
      {},
      el(
        "div",
        { class: "actions" },
        button("Memories", () => showSpeaker(name), { "aria-label": label("Show the memories of") }),
        button("Search", () => searchSpeaker(name), { "aria-label": label("Search the memories of") }),
        button("Export", () => exportSpeaker(name), { "aria-label": label("Export the memories of") }),
        registered ? button("Rename…", () => renameSpeaker(name), { "aria-label": label("Rename") }) : null,
        button("Forget memories…", () => forgetSpeaker(name), { class: "danger", "aria-label": label("Forget every memory of") }),
        registered ? button("Remove…", () => removeSpeaker(name, count), { class: "danger", "aria-label": label("Remove") }) : null,
      ),
    ),
  );
}

/** The registered speakers in the reader's order of names with their memories, and "me"
 * (never registered, so not in speakers_list: its count is by_speaker's). */
async function loadSpeakers() {
  const [answer, mine] = await Promise.all([rest.speakers(state.store), rest.bySpeaker(state.store, "me", { limit: 5 })]);
  const speakers = [...answer.speakers].sort((a, b) => byName(a.speaker, b.speaker));
  $("#speakers tbody").replaceChildren(
    ...speakers.map((s) => speakerRow(s.speaker, s.memories, s.created_at, true)),
    speakerRow("me", mine.memories_to_delete, null, false),
  );
  $("#speaker-limit").textContent = `${answer.count} of ${many(answer.limit, "person")} registered`;
  const filter = $("#search-speaker");
  const chosen = filter.value;
  filter.replaceChildren(
    el("option", { value: "" }, "any speaker"),
    el("option", { value: "me" }, "me (the assistant)"),
    ...speakers.map((s) => el("option", { value: s.speaker }, s.speaker)),
  );
  if ([...filter.options].some((option) => option.value === chosen)) filter.value = chosen;
}

async function registerSpeaker(name) {
  const answer = await rest.addSpeaker(state.store, name);
  await loadSpeakers();
  notify(answer.status === "exists" ? `${answer.speaker} was registered already` : `Registered ${answer.speaker}`);
}

async function renameSpeaker(name) {
  const wanted = await renameDialog(name);
  if (wanted === null || wanted.trim() === name) return;
  try {
    const answer = await rest.renameSpeaker(state.store, name, wanted);
    await loadSpeakers();
    show($("#results"), false); // a view of the old name would now be refused
    notify(`Renamed ${answer.previous} to ${answer.speaker}; ${many(answer.memories_retagged, "memory")} moved with the name`);
  } catch (refused) {
    // The new name is someone registered: offer to make the two one person instead.
    if (!(refused instanceof ApiError && refused.status === 409 && refused.error.field === "new_name")) throw refused;
    await mergeSpeaker(name, refused.error.speaker);
  }
}

/** Ask to confirm a change to every memory of ``name`` (a delete, a merge) counted by
 * by_speaker, then ``run(records_to_delete)``, the count the server checks. A person
 * reads memories, never records: ``ask(memories, changed)`` words the dialog (title,
 * body, confirmLabel, and what went undone when ``changed``). When the memories changed
 * meanwhile (409), the new count is shown and confirmed again. Answers
 * ``run``'s answer, or null when the reader said no. */
async function confirmCounted(name, ask, run) {
  let changed = false;
  for (;;) {
    const counted = await rest.bySpeaker(state.store, name, { limit: 5 }); // both counts, as they are now
    const sure = await confirmDialog(ask(many(counted.memories_to_delete, "memory"), changed));
    if (!sure) return null;
    try {
      return await run(counted.records_to_delete);
    } catch (refused) {
      if (!(refused instanceof ApiError && refused.status === 409 && Number.isInteger(refused.error.records_to_delete))) {
        throw refused;
      }
      changed = true;
    }
  }
}

async function mergeSpeaker(name, into) {
  const answer = await confirmCounted(
    name,
    (memories, changed) => ({
      title: `Merge ${name} into ${into}?`,
      body: [
        changed ? `The count changed meanwhile: ${memories} now.` : `${into} is registered already.`,
        `Merging moves ${memories} from ${name} to ${into}, and ends ${name}'s registration.`,
      ],
      confirmLabel: `Merge into ${into}`,
      failure: changed ? `Nothing was moved: ${name}'s memories changed while you were deciding.` : null,
    }),
    (records) => rest.mergeSpeakers(state.store, name, into, records),
  );
  if (answer === null) return;
  await loadSpeakers();
  show($("#results"), false);
  notify(`Merged ${answer.merged} into ${answer.speaker}; ${many(answer.memories_retagged, "memory")} moved`);
}

async function removeSpeaker(name, count) {
  const sure = await confirmDialog({
    title: `Remove the speaker ${name}?`,
    body: [`The registration goes; ${name}'s memories stay, untagged (${many(count, "memory")}).`],
    confirmLabel: `Remove ${name}`,
  });
  if (!sure) return;
  const answer = await rest.removeSpeaker(state.store, name);
  await loadSpeakers();
  show($("#results"), false);
  notify(`Removed ${name}; ${many(answer.memories_untagged, "memory")} untagged`);
}

// -- the results: a speaker's memories, all memories, a search -------------------------------

async function render() {
  const view = state.view;
  const page = view.pages[view.pages.length - 1];
  const { memories, summary, next, closeness: words } = await view.load(page);
  $("#results-title").textContent = view.title;
  $("#results-summary").textContent = summary;
  const items = memories.map((memory, i) => memoryItem(memory, memoryActions(memory), new Date(), words?.[i]));
  const further = words ? words.indexOf("less close") : -1;
  if (further > 0) items.splice(further, 0, lessCloseDivider());
  $("#memories").replaceChildren(...items);
  view.next = next;
  show($("#newer"), view.pages.length > 1);
  show($("#older"), Boolean(next));
  show($("#results"));
}

/** Show a new view and take the reader to it: scrolled into sight, focus on its heading. */
async function openView(view) {
  state.view = { ...view, pages: [null] };
  await render();
  const title = $("#results-title");
  title.scrollIntoView({ block: "start" });
  title.focus({ preventScroll: true });
}

async function refresh() {
  await Promise.all([loadSpeakers(), loadStores()]);
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
        summary: `${many(answer.returned, "memory")} on this page; "Forget memories" would delete ${many(answer.memories_to_delete, "memory")} in all.`,
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
      return { memories: answer.memories, summary: `${many(answer.count, "memory")} on this page`, next: answer.next_cursor };
    },
  });
}

function search(query, speaker, limit, includeSuperseded) {
  return openView({
    title: `Search: ${query}`,
    load: async () => {
      const answer = await rest.search(state.store, query, { speaker: speaker || undefined, limit, includeSuperseded });
      const scope = speaker ? ` said by ${speaker}` : "";
      const words = closeness(answer.memories);
      return { memories: answer.memories, closeness: words, summary: searchSummary(words, scope), next: null };
    },
  });
}

/** A speaker's Search: the query in the box, searched in that speaker's memories; with no
 * query yet, the box is where the reader is taken, the speaker already chosen. */
function searchSpeaker(name) {
  $("#search-speaker").value = name;
  const query = $("#query");
  if (query.value.trim()) return submitSearch();
  query.focus(); // in the bar that stays in sight
  return null;
}

function submitSearch() {
  return search($("#query").value, $("#search-speaker").value, Number($("#search-limit").value), $("#include-superseded").checked);
}

/** One memory, taken to: its card when the results show it, else a view of it alone. */
async function showMemory(memoryId) {
  const card = [...document.querySelectorAll("#memories li.memory")].find((item) => item.dataset.id === memoryId);
  if (card) {
    for (const marked of document.querySelectorAll("li.memory.marked")) marked.classList.remove("marked");
    card.classList.add("marked");
    card.scrollIntoView({ block: "center" });
    card.focus({ preventScroll: true });
    return;
  }
  await openView({
    title: "One memory",
    load: async () => ({ memories: [(await rest.get(state.store, memoryId)).memory], summary: "", next: null }),
  });
}

// -- one memory --------------------------------------------------------------------------------

function memoryActions(memory) {
  const named = (verb) => `${verb} the memory “${excerpt(memory.content)}”`;
  const actions = [button("Forget…", () => forgetMemory(memory), { class: "danger", "aria-label": named("Forget") })];
  if (memory.is_superseded) {
    actions.push(button("Show later versions", (event) => toggleChain(memory, event.currentTarget), { "aria-expanded": "false" }));
  } else {
    actions.push(button("Supersede…", () => supersede(memory), { "aria-label": named("Supersede") }));
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
  notify(`Forgot ${many(answer.deleted, "memory")}`);
}

async function supersede(memory) {
  const content = await supersedeDialog(memory);
  if (content === null) return;
  const answer = await rest.supersede(state.store, memory.id, content);
  await refresh();
  notify("Stored the new version; the old one is kept, superseded. ", button("Show it", () => showMemory(answer.id), { class: "link" }));
}

/** "Show later versions" / "Hide later versions": the supersede chain forward from
 * ``memory`` (each later version, to the current one), fetched once, then shown or hidden. */
async function toggleChain(memory, trigger) {
  const item = trigger.closest("li");
  let chain = item.querySelector(":scope > .chain");
  const open = trigger.getAttribute("aria-expanded") === "true";
  if (!open && !chain) {
    const versions = [];
    let next = memory.superseded_by;
    while (next && versions.length < MAX_CHAIN) {
      const { memory: later } = await rest.get(state.store, next);
      versions.push(later);
      next = later.superseded_by;
    }
    const id = `chain-${memory.id}`;
    chain = el("ol", { class: "chain", id, "aria-label": "later versions" }, versions.map((later) => memoryItem(later)));
    item.append(chain);
    trigger.setAttribute("aria-controls", id);
  }
  show(chain, !open);
  trigger.setAttribute("aria-expanded", String(!open));
  trigger.textContent = open ? "Show later versions" : "Hide later versions";
}

// -- destructive speaker actions and export ------------------------------------------------------

/** Forget every memory of ``name``, after a confirm of how many (``confirmCounted``). */
async function forgetSpeaker(name) {
  const answer = await confirmCounted(
    name,
    (memories, changed) => ({
      title: `Forget every memory of ${name}?`,
      body: [
        changed ? `The count changed meanwhile: ${memories} now.` : `This deletes ${memories}.`,
        `Every memory ${name} said goes, superseded versions included. The registration stays.`,
      ],
      confirmLabel: `Delete ${memories}`,
      failure: changed ? `Nothing was deleted: ${name}'s memories changed while you were deciding.` : null,
    }),
    (records) => rest.forgetSpeaker(state.store, name, records),
  );
  if (answer === null) return;
  await refresh();
  notify(`Deleted ${many(answer.deleted, "memory")} of ${name}`);
}

async function exportStore() {
  const memories = await storeMemories(state.store);
  download(fileName(state.store), memories);
  notify(`Exported ${many(memories.length, "memory")} of ${state.store}`);
}

async function exportSpeaker(name) {
  const memories = await speakerMemories(state.store, name);
  download(fileName(state.store, name), memories);
  notify(`Exported ${many(memories.length, "memory")} of ${name}`);
}

/** After a page change the pressed button may be hidden: move focus to the results. */
function keepFocus() {
  if (!document.activeElement || document.activeElement.hidden || document.activeElement === document.body) {
    $("#results-title").focus();
  }
}

// -- wiring ----------------------------------------------------------------------------------------

/** The sticky bar's height as ``--bar``, so that whatever the page scrolls to (a heading,
 * a memory) lands below the bar instead of under it (style.css: scroll-padding-top). */
function trackBar() {
  const bar = $("#bar");
  const root = document.documentElement;
  new ResizeObserver(() => root.style.setProperty("--bar", `${bar.offsetHeight}px`)).observe(bar);
}

/** A memory's Details menu closes as a menu does: on a click elsewhere, and on Escape
 * (focus back on its summary). */
function wireMenus() {
  document.addEventListener("click", (event) => {
    for (const menu of document.querySelectorAll("details.more[open]")) {
      if (!menu.contains(event.target)) menu.open = false;
    }
  });
  document.addEventListener("keydown", (event) => {
    const menu = event.target.closest?.("details.more[open]");
    if (event.key !== "Escape" || !menu) return;
    menu.open = false;
    menu.querySelector("summary").focus();
  });
}

function wire() {
  trackBar();
  wireMenus();
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
    sessionStorage.removeItem(STORE_SLOT);
    state.store = null;
    state.view = null;
    closeImport();
    showLogin();
  });
  $("#create-store-form").addEventListener(
    "submit",
    action(async () => {
      const answer = await rest.createStore($("#new-store").value.trim());
      $("#new-store").value = "";
      state.store = answer.user_id;
      await loadStores();
      await openStore(answer.user_id, { focus: true });
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
  $("#search-form").addEventListener("submit", action(submitSearch));
  $("#all-memories").addEventListener("click", action(showAll));
  $("#export-store").addEventListener("click", action(exportStore));
  $("#open-import").addEventListener("click", action(openImport));
  wireImport({ store: () => state.store, action, notify, refresh, showSpeaker, showAll });
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
action(enter)(); // with the tab's key if it has one, else without: only a 401 asks for one

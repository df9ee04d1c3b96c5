// Export as JSON Lines, built in the page from the REST reads, in the format of the CLI's
// `wontopos-mcp export` (one memory per line as every read returns it, oldest first,
// superseded versions included), so `wontopos-mcp import` reads either file.

import { rest } from "./api.js";

const LIST_PAGE = 500; // memory_list's largest page
const SPEAKER_PAGE = 20; // by_speaker's largest page

/** Every memory of a store, oldest first (memory_list's order). */
export async function storeMemories(userId) {
  const memories = [];
  let cursor = null;
  do {
    const page = await rest.list(userId, LIST_PAGE, cursor);
    memories.push(...page.memories);
    cursor = page.next_cursor;
  } while (cursor);
  return memories;
}

/** Every memory of one speaker, oldest first (by_speaker walks newest first). */
export async function speakerMemories(userId, speaker) {
  const memories = [];
  let page = { limit: SPEAKER_PAGE };
  for (;;) {
    const answer = await rest.bySpeaker(userId, speaker, page);
    memories.push(...answer.memories);
    if (!answer.has_more) break;
    page = { limit: SPEAKER_PAGE, before: answer.next_before, skip_ids: answer.next_skip_ids };
  }
  return memories.reverse();
}

/** Offer ``memories`` as a .jsonl download named ``name``. */
export function download(name, memories) {
  const text = memories.map((memory) => JSON.stringify(memory)).join("\n") + (memories.length ? "\n" : "");
  const url = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A file name from store and speaker, safe on every file system. */
export function fileName(...parts) {
  return parts.map((part) => part.replace(/[^\p{L}\p{N}._-]+/gu, "_")).join("-") + ".jsonl";
}

// Words and times for the page: counts with the noun that goes with them ("1 memory",
// "2 memories"), and times in the reader's locale and time zone (Intl), relative where
// that reads better ("3 days ago"), with the exact moment kept for a title.
//
// The page's words are English, so plurals follow English rules; numbers, dates and
// relative times follow the browser's locale.

const PLURALS = { memory: "memories", person: "people", version: "versions", "close match": "close matches" };
const englishPlural = new Intl.PluralRules("en");
const number = new Intl.NumberFormat();

/** ``n`` with the noun that goes with it: many(1, "memory") is "1 memory", many(2,
 * "memory") "2 memories"; a noun missing from PLURALS takes an "s". The one helper for
 * every count the page shows. */
export function many(n, noun) {
  const word = englishPlural.select(n) === "one" ? noun : PLURALS[noun] ?? `${noun}s`;
  return `${number.format(n)} ${word}`;
}

const PLAIN_DAY = /^\d{4}-\d{2}-\d{2}$/;
const STEPS = [
  // [unit, seconds in it, shown while the distance is under this many seconds]
  ["minute", 60, 45 * 60],
  ["hour", 3600, 22 * 3600],
  ["day", 86400, 7 * 86400],
];

/** The exact moment of an RFC 3339 string (or of a plain day, which means that UTC day),
 * in full words of the reader's locale: for a title. */
export function exactTime(text) {
  const moment = new Date(text);
  if (Number.isNaN(moment.getTime())) return text;
  if (PLAIN_DAY.test(text)) return new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeZone: "UTC" }).format(moment);
  return new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" }).format(moment);
}

/** When ``text`` (RFC 3339) was, as a reader says it: "just now", "5 minutes ago",
 * "yesterday", "3 days ago" within a week of ``now``, else a date and time of their
 * locale ("Mar 3, 2026, 2:05 PM"). A plain day ("2024-03-01") is that day, never a time. */
export function readableTime(text, now = new Date()) {
  const moment = new Date(text);
  if (Number.isNaN(moment.getTime())) return text;
  if (PLAIN_DAY.test(text)) return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeZone: "UTC" }).format(moment);
  const seconds = (moment.getTime() - now.getTime()) / 1000;
  const distance = Math.abs(seconds);
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  if (distance < 45) {
    return relative.resolvedOptions().locale.startsWith("en") ? "just now" : relative.format(0, "second");
  }
  for (const [unit, size, under] of STEPS) {
    if (distance < under) return relative.format(Math.round(seconds / size), unit);
  }
  return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }).format(moment);
}

/** The first words of ``content`` on one line, for a control that names a memory (never
 * by its id). */
export function excerpt(content, size = 60) {
  const line = content.replace(/\s+/g, " ").trim();
  return line.length > size ? `${line.slice(0, size - 1)}…` : line;
}

/** How much less similar to the question than the best result a result may be and still
 * read as a close match. A search answers ``limit`` results whatever they hold (the agent
 * decides what counts); a person needs to see where the real matches end. Measured on
 * the public conversation sets' questions (bench/closeness.py): within this distance of
 * the best result's similarity lie most of the answers found in the top 10, while the
 * results past it are mostly not answers. */
export const CLOSE_WITHIN = 0.04;

/** Each search result's closeness, as a person reads it: "closest match" for the best,
 * "close match" for one within CLOSE_WITHIN of its similarity, "less close" for the rest
 * (results come best first; similarity is the closeness of a memory's own words to the
 * question, while the order also reads the conversation around it). */
export function closeness(memories) {
  const best = memories.length ? memories[0].similarity : undefined;
  return memories.map((memory, i) => {
    if (i === 0) return "closest match";
    if (best === undefined || memory.similarity === undefined) return "close match";
    return memory.similarity >= best - CLOSE_WITHIN ? "close match" : "less close";
  });
}

/** The summary of a search: how many results read as close matches, and how many are
 * further from the question ("1 close match, then 9 less close"). */
export function searchSummary(words, scope = "") {
  const close = words.filter((word) => word !== "less close").length;
  const rest = words.length - close;
  const head = `${many(close, "close match")}${scope}`;
  return rest ? `${head}, then ${rest} less close` : `${head}, best first`;
}

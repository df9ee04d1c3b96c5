// The page's one way to the server: the REST API the official wontopos SDK speaks
// (wontopos_mcp/rest.py), with the API key as X-API-Key on every call.
//
// The key lives in this tab's sessionStorage (gone when the tab closes) and only ever
// travels in a header: never in a URL, a query string or a log line. A refused call
// throws an ApiError carrying the structured error body ({status, error: {type, message,
// field, ...}}), so the page can show exactly what the server said.

const KEY_SLOT = "wontopos-mcp.api-key";
const API = "/api/v1/memory";

export class ApiError extends Error {
  /** status: the HTTP status; error: the body's `error` object (type, message, field, ...). */
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

export const key = {
  get: () => sessionStorage.getItem(KEY_SLOT),
  set: (value) => sessionStorage.setItem(KEY_SLOT, value),
  clear: () => sessionStorage.removeItem(KEY_SLOT),
  known: () => sessionStorage.getItem(KEY_SLOT) !== null,
};

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const secret = key.get();
  if (secret) headers["X-API-Key"] = secret;
  const init = { method, headers, credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" };
  let url = API + path;
  if (method === "GET") {
    // Only store ids go in a query string (the routes the SDK reads with GET, and the
    // import's options: upload); never the key.
    const query = new URLSearchParams(body || {}).toString();
    if (query) url += `?${query}`;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (failure) {
    throw new ApiError(0, { type: "network_error", message: `the server did not answer (${failure.message})` });
  }
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    answer = null;
  }
  if (!response.ok) throw refusal(response.status, answer);
  return answer || {};
}

/** The ApiError of a refused call from its status and parsed body (null when none). */
function refusal(status, answer) {
  const error = answer && typeof answer.error === "object" && answer.error ? answer.error : null;
  return new ApiError(status, error || { type: "http_error", message: `HTTP ${status}` });
}

/** POST ``file`` itself as the body of ``path`` (the import route: options in the query
 * string ``params``, a URLSearchParams, never the key). fetch says nothing of an upload's
 * progress, so this one call is an XMLHttpRequest: ``progress({loaded, total})`` as the
 * bytes go, then ``progress(null)`` once the server has them all and works on its answer. */
function upload(path, params, file, progress = () => {}) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", `${API}${path}?${params}`);
    request.setRequestHeader("Accept", "application/json");
    request.setRequestHeader("Content-Type", "application/octet-stream"); // never a form's type
    const secret = key.get();
    if (secret) request.setRequestHeader("X-API-Key", secret);
    request.upload.addEventListener("progress", (event) =>
      progress({ loaded: event.loaded, total: event.lengthComputable ? event.total : file.size }),
    );
    request.upload.addEventListener("load", () => progress(null));
    request.addEventListener("load", () => {
      let answer = null;
      try {
        answer = JSON.parse(request.responseText);
      } catch {
        answer = null;
      }
      if (request.status >= 200 && request.status < 300) resolve(answer || {});
      else reject(refusal(request.status, answer));
    });
    const lost = () => reject(new ApiError(0, { type: "network_error", message: "the server did not answer" }));
    request.addEventListener("error", lost);
    request.addEventListener("abort", lost);
    request.send(file);
  });
}

/** What /healthz says (served without the key), e.g. ``api_key``: "required" or
 * "none"; an empty object when it cannot say, so the caller goes on as if it had not asked. */
export async function health() {
  try {
    const response = await fetch("/healthz", { headers: { Accept: "application/json" }, credentials: "omit", cache: "no-store" });
    const answer = await response.json();
    return answer && typeof answer === "object" ? answer : {};
  } catch {
    return {};
  }
}

const drop = (object) => Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined && v !== null));

// One function per SDK call the page makes; the paths and bodies are those the SDK sends.
export const rest = {
  stores: () => call("GET", "/collections"),
  createStore: (user_id) => call("POST", "/collection", { user_id }),
  speakers: (user_id) => call("GET", "/speakers", { user_id }),
  addSpeaker: (user_id, speaker) => call("POST", "/speakers", { user_id, speaker }),
  removeSpeaker: (user_id, speaker) => call("DELETE", "/speakers", { user_id, speaker }),
  // Our documented extensions (the SDK has no such calls): rename and merge a speaker.
  renameSpeaker: (user_id, speaker, new_name) => call("POST", "/speakers/rename", { user_id, speaker, new_name }),
  mergeSpeakers: (user_id, speaker, into, confirm_records) =>
    call("POST", "/speakers/merge", { user_id, speaker, into, confirm_records }),
  // And the conversation import: the export file as the body, its options in the query.
  importFile: (params, file, progress) => upload("/import", params, file, progress),
  bySpeaker: (user_id, speaker, page = {}) =>
    call("POST", "/by-speaker", drop({ user_id, speaker, limit: page.limit, before: page.before, skip_ids: page.skip_ids })),
  list: (user_id, limit, cursor) => call("POST", "/list", drop({ user_id, limit, cursor })),
  search: (user_id, query, options) =>
    call(
      "POST",
      "/search",
      drop({
        user_id,
        query,
        max_results: options.limit,
        speaker: options.speaker,
        include_superseded: options.includeSuperseded || undefined,
      }),
    ),
  get: (user_id, memory_id) => call("POST", "/get", { user_id, memory_id }),
  forget: (user_id, memory_id) => call("POST", "/forget", { user_id, memory_id }),
  forgetSpeaker: (user_id, speaker, confirm_records) => call("POST", "/forget", { user_id, speaker, confirm_records }),
  supersede: (user_id, old_memory_id, new_content) => call("POST", "/supersede", { user_id, old_memory_id, new_content }),
};

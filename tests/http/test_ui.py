"""The memory browser at ``/ui/``, in a real browser: the system's headless Chromium
driven by Playwright, over one real server (uvicorn, a real service: LanceDB in a
temporary folder and the session's real model), each test on a store of its own.

Every data call the page makes goes through the REST API with the key as ``X-API-Key``;
the tests watch the requests (the key never in a URL, never a request to anywhere else)
and check each view and each destructive flow against what the REST API then answers.

The browser is the system's (``apt-get install chromium``), never one Playwright
downloads. Under ``CI=true`` a missing browser or Playwright fails these tests: they can
never skip silently where the suite is meant to prove them. Set
``WONTOPOS_UI_SCREENSHOTS`` to a folder to keep screenshots of the main views.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from support import KEY, REPO, TRIP_CHAT, TRIP_NAME, LiveServer, error_body, served

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

UI_FILES = REPO / "wontopos_mcp" / "http" / "ui"
SCREENSHOTS = os.environ.get("WONTOPOS_UI_SCREENSHOTS")
LIMIT = 64 * 1024
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    """Fail under CI (the browser tests must run there), else skip saying why."""
    if _in_ci():
        pytest.fail(f"CI=true but {reason}: .ci/run installs it (apt-get install chromium; the test extra)")
    pytest.skip(reason)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    _unavailable("no system Chromium (apt-get install chromium)")
    raise AssertionError("unreachable")


# -- fixtures: one server, one browser ----------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    with served(tmp_path_factory.mktemp("ui"), embedder, api_key=KEY, max_body_bytes=LIMIT) as server:
        yield server


@pytest.fixture(scope="module")
def open_live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    """A server with no key configured (the loopback default)."""
    with served(tmp_path_factory.mktemp("ui-open"), embedder) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (the test extra)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def api(live: LiveServer) -> Iterator[httpx.Client]:
    """The REST API as the page sees it, with the key: to seed data and check results."""
    with httpx.Client(base_url=f"{live.url}/api/v1/memory", headers={"X-API-Key": KEY}, timeout=60) as client:
        yield client


class Requests:
    """Every request a page made: URL, method and headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, request: Any) -> None:
        self.seen.append((request.method, request.url, request.all_headers()))


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    from playwright.sync_api import expect

    # A search may wait for the model, up to the 60 s a call may wait, while the rest of the
    # suite shares the 2 cores: one search under the full suite once took over 20 s. A
    # request that never ends still fails here.
    expect.set_options(timeout=60_000)
    context = browser.new_context(
        accept_downloads=True,
        viewport={"width": 1200, "height": 900},
        locale="en-US",
        timezone_id="America/New_York",  # a plain day must not become the evening before
    )
    yield context.new_page()
    context.close()


@pytest.fixture
def seen(page: Any) -> Requests:
    requests = Requests()
    page.on("request", requests)
    return requests


def _post(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _store(api: httpx.Client, name: str, speakers: tuple[str, ...] = ()) -> str:
    assert _post(api, "/collection", {"user_id": name})["status"] == "created"
    for speaker in speakers:
        _post(api, "/speakers", {"user_id": name, "speaker": speaker})
    return name


def _add(api: httpx.Client, store: str, content: str, **metadata: Any) -> str:
    answer = _post(api, "/store", {"user_id": store, "content": content, "metadata": metadata})
    assert answer["status"] == "stored", answer
    return str(answer["id"])


def _by_speaker(api: httpx.Client, store: str, speaker: str) -> dict[str, Any]:
    return _post(api, "/by-speaker", {"user_id": store, "speaker": speaker, "limit": 5})


def _close_within() -> float:
    """The page's own distance from the best similarity that still reads as a close match
    (read from format.js, so the test checks the page against its rule, not a copy)."""
    found = re.search(r"export const CLOSE_WITHIN = ([0-9.]+);", (UI_FILES / "format.js").read_text(encoding="utf-8"))
    assert found, "format.js declares CLOSE_WITHIN"
    return float(found[1])


def _search_summary(api: httpx.Client, store: str, query: str, scope: str = "", **options: Any) -> str:
    """What the page's summary must say for this search, from the REST answer: how many
    results lie within CLOSE_WITHIN of the best one's similarity, then how many are further."""
    memories = _post(api, "/search", {"user_id": store, "query": query, **options})["memories"]
    best = memories[0]["similarity"]
    close = sum(1 for m in memories if m["similarity"] >= best - _close_within())
    head = f"{close} close {'match' if close == 1 else 'matches'}{scope}"
    rest = len(memories) - close
    return f"{head}, then {rest} less close" if rest else f"{head}, best first"


def _screenshot(page: Any, name: str, *, always: bool = False, full_page: bool = True) -> bytes | None:
    """The whole page (or only what the window shows) as PNG bytes, kept under
    ``WONTOPOS_UI_SCREENSHOTS`` when that is set; taken without it only when ``always`` (a
    test that reads the image)."""
    if not (SCREENSHOTS or always):
        return None
    path = str(Path(SCREENSHOTS) / f"ui-{name}.png") if SCREENSHOTS else None
    png: bytes = page.screenshot(path=path, full_page=full_page)
    return png


def _png_width(png: bytes) -> int:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(png[16:20], "big")  # IHDR: width, then height


def _login(page: Any, live: LiveServer) -> None:
    from playwright.sync_api import expect

    page.goto(f"{live.url}/ui/")
    page.get_by_label("The server's API key").fill(KEY)
    page.get_by_label("The server's API key").press("Enter")
    expect(page.locator("#app")).to_be_visible()


def _store_button(page: Any, store: str) -> Any:
    return page.locator(f'#store-list button[data-store="{store}"]')


def _open_store(page: Any, live: LiveServer, store: str) -> None:
    from playwright.sync_api import expect

    _login(page, live)
    _store_button(page, store).click()  # a store opens when it is picked: no other button
    expect(page.locator("#store-name")).to_have_text(store)


def _row(page: Any, speaker: str) -> Any:
    return page.locator(f'#speakers tbody tr[data-speaker="{speaker}"]')


def _contents(page: Any) -> list[str]:
    return [str(text) for text in page.locator("#memories > li > .content").all_inner_texts()]


def _notice(page: Any) -> Any:
    return page.locator("#notice")


# -- the browser must run where the suite proves it ---------------------------------------------------


def test_a_missing_browser_fails_under_ci_and_only_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        _unavailable("no system Chromium")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _unavailable("no system Chromium")


# -- serving the page --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_files_are_served_without_the_key_with_the_host_and_origin_checks(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as bare:
        moved = bare.get("/ui")
        assert moved.status_code == 308
        assert moved.headers["location"] == "/ui/"
        home = bare.get("/")  # whoever opens the bare address finds the page, key or not
        assert home.status_code == 308
        assert home.headers["location"] == "/ui/"
        assert home.headers["x-content-type-options"] == "nosniff"
        index = bare.get("/ui/")
        assert index.status_code == 200
        assert index.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in index.text
        script = bare.get("/ui/app.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        # Data still needs the key; the checks of every route apply to the page too.
        error_body(bare.get("/api/v1/memory/collections").json(), 401, "authentication_error")
        error_body(bare.get("/ui/", headers={"Host": "evil.example"}).json(), 421, "invalid_request_error")
        error_body(bare.get("/ui/app.js", headers={"Origin": "http://evil.example"}).json(), 403, "permission_error")
        error_body(bare.post("/ui/", content=b"x" * (LIMIT + 1)).json(), 413, "invalid_request_error")
        error_body(bare.get("/ui/nothing.js").json(), 404, "not_found_error")
    # A path that climbs out of /ui/ is not a way around the key (httpx would normalise it).
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        for path in ("/ui/../api/v1/memory/collections", "/ui/%2e%2e/api/v1/memory/collections"):
            connection.request("GET", path)
            answer = connection.getresponse()
            body = json.loads(answer.read())
            assert answer.status == 404, (path, body)
            assert "collections" not in body, (path, body)
    finally:
        connection.close()


def test_the_files_load_nothing_from_anywhere_else() -> None:
    files = {path.name: path.read_text(encoding="utf-8") for path in UI_FILES.iterdir()}
    scripts = {"app.js", "api.js", "dom.js", "export.js", "format.js", "import.js"}
    pages = {"index.html", "style.css", "favicon.svg", *scripts}
    assert set(files) == pages
    for name, text in files.items():
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # the icon's namespace: a name, never loaded
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), name
        assert "innerHTML" not in text, name
        assert "insertAdjacentHTML" not in text, name  # contents are text, never HTML
    for name in ("app.js", "dom.js", "export.js", "format.js", "import.js"):
        for imported in re.findall(r'^import\b[^;]*?\bfrom "([^"]+)"', files[name], re.MULTILINE):
            assert imported.startswith("./"), (name, imported)
            assert imported[2:] in files, (name, imported)


def test_every_file_of_the_page_ships_in_the_package() -> None:
    """pyproject's package-data names the page's files by pattern; a file no pattern
    matches (the icon was one) is missing from an installed copy: a 404 there."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    shipped = patterns["package-data"]["wontopos_mcp.http"]
    for path in UI_FILES.iterdir():
        assert any(fnmatch.fnmatch(f"ui/{path.name}", pattern) for pattern in shipped), path.name


@pytest.mark.slow
def test_the_key_is_asked_once_sent_as_a_header_and_never_put_in_a_url(
    page: Any, seen: Requests, live: LiveServer
) -> None:
    from playwright.sync_api import expect

    page.goto(f"{live.url}/ui/")
    key_input = page.get_by_label("The server's API key")
    expect(key_input).to_be_focused()  # /healthz said the server wants a key: it asks before any call
    expect(_notice(page)).to_be_hidden()  # not an error: the page had not sent a key yet
    expect(page.get_by_label("Query")).to_be_hidden()  # nothing to search before the key
    key_input.fill("not-the-key")
    key_input.press("Enter")
    expect(_notice(page).locator(".error-message")).to_have_text("Wrong API key.")
    expect(_notice(page).locator(".error-hint")).to_have_text("Enter the server's API key to go on.")
    expect(_notice(page).locator(".error-text")).to_have_attribute("data-type", "authentication_error")
    expect(page.locator("#app")).to_be_hidden()

    _login(page, live)
    expect(_store_button(page, "default")).to_have_count(1)
    expect(page.get_by_role("button", name="Forget the key")).to_be_visible()
    _screenshot(page, "stores")
    page.reload()  # asked once: the tab keeps it
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#login")).to_be_hidden()

    api_calls = [(method, url, headers) for method, url, headers in seen.seen if "/api/" in url]
    assert len(api_calls) >= 3
    for _, url, headers in seen.seen:
        assert url.startswith(f"{live.url}/"), url  # nothing from anywhere else
        assert KEY not in url, url
        assert "not-the-key" not in url, url
        if "/api/" not in url:
            assert "x-api-key" not in headers, url  # the files need no key
    sent = [h.get("x-api-key") for _, _, h in api_calls]
    # No call goes without the key; after the reload the tab's key goes at once.
    assert sent == ["not-the-key"] + [KEY] * (len(api_calls) - 1)
    assert KEY not in page.url


class Console:
    """What a page reported as an error: console errors (a refused request's status among
    them: Chromium logs every 4xx and 5xx), uncaught exceptions, and every answer it got."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        self.answers: list[tuple[int, str]] = []
        page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("response", lambda response: self.answers.append((response.status, response.url)))


@pytest.mark.slow
def test_a_keyed_server_loads_without_a_console_error_before_and_after_the_key(page: Any, live: LiveServer) -> None:
    from playwright.sync_api import expect

    console = Console(page)
    _login(page, live)  # the form first (nothing refused: /healthz said a key is needed), then the stores
    expect(_store_button(page, "default")).to_be_focused()
    page.reload()
    expect(_store_button(page, "default")).to_be_focused()
    assert console.errors == []
    assert all(status < 400 for status, _ in console.answers), console.answers
    icons = [url for _, url in console.answers if "icon" in url]
    assert set(icons) == {f"{live.url}/ui/favicon.svg"}, icons  # the page's own, never /favicon.ico


@pytest.mark.slow
def test_an_open_server_loads_without_a_console_error(page: Any, open_live: LiveServer) -> None:
    from playwright.sync_api import expect

    console = Console(page)
    page.goto(f"{open_live.url}/ui/")
    expect(_store_button(page, "default")).to_be_focused()
    assert console.errors == []
    assert all(status < 400 for status, _ in console.answers), console.answers


# -- the views ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_store_shows_its_speakers_with_their_counts_and_all_its_memories(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "counts", ("Bob", "さくら"))
    for text in ("Bob likes tea.", "Bob walks his dog.", "Bob plays chess."):
        _add(api, store, text, speaker="Bob")
    _add(api, store, "さくらは京都に住んでいる。", speaker="さくら")
    _add(api, store, "I am the assistant.", speaker="me")
    _add(api, store, "Nobody said this.")

    _login(page, live)
    expect(_store_button(page, "default")).to_have_attribute("aria-current", "true")  # one is open at once
    expect(_store_button(page, "default")).to_be_focused()  # by keyboard: a store is a button
    button = _store_button(page, store)
    expect(button).to_have_text(f"{store} 6 memories")
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_attribute("aria-current", "true")
    expect(page.locator("#store-title")).to_be_focused()
    expect(_row(page, "Bob").locator("td.count")).to_have_text("3 memories")
    expect(_row(page, "さくら").locator("td.count")).to_have_text("1 memory")
    expect(_row(page, "me")).to_contain_text("the assistant")
    expect(_row(page, "me").locator("td.count")).to_have_text("1 memory")
    expect(page.locator("#speaker-limit")).to_have_text("2 of 50 people registered")
    _screenshot(page, "store")

    page.get_by_role("button", name="All memories").click()
    expect(page.locator("#memories > li")).to_have_count(6)
    assert _contents(page)[0] == "Bob likes tea."  # oldest first
    untagged = page.locator("#memories > li", has_text="Nobody said this.")
    expect(untagged.locator(".speaker")).to_have_text("untagged")

    page.get_by_label("New store id").fill("counts-new")  # a store created here opens at once
    page.get_by_label("New store id").press("Enter")
    expect(page.locator("#store-name")).to_have_text("counts-new")
    expect(_store_button(page, "counts-new")).to_have_text("counts-new 0 memories")
    expect(_store_button(page, "counts-new")).to_have_attribute("aria-current", "true")
    expect(button).not_to_have_attribute("aria-current", "true")
    expect(page.locator("#status")).to_have_text("Created counts-new")
    expect(page.locator("#results")).to_be_hidden()


@pytest.mark.slow
def test_one_speakers_memories_newest_first_with_paging_by_keyboard(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "paging", ("Dana",))
    notes = [f"Dana's note number {i:02d}." for i in range(23)]
    for text in notes:
        _add(api, store, text, speaker="Dana", category="notes")

    _open_store(page, live, store)
    _row(page, "Dana").get_by_role("button", name="Show the memories of Dana").click()
    expect(page.locator("#memories > li")).to_have_count(20)
    assert _contents(page) == notes[::-1][:20]
    counts = _by_speaker(api, store, "Dana")
    expect(page.locator("#results-summary")).to_contain_text(
        f'20 memories on this page; "Forget memories" would delete {counts["memories_to_delete"]} memories in all.'
    )
    expect(page.get_by_role("button", name="Newer")).to_be_hidden()
    _screenshot(page, "speaker-memories")

    older = page.get_by_role("button", name="Older")
    older.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#memories > li")).to_have_count(3)
    assert _contents(page) == notes[2::-1]
    expect(older).to_be_hidden()
    expect(page.locator("#results-title")).to_be_focused()  # focus is not lost with the button
    page.get_by_role("button", name="Newer").press("Enter")
    expect(page.locator("#memories > li")).to_have_count(20)
    assert _contents(page)[0] == notes[-1]


@pytest.mark.slow
def test_search_with_and_without_a_speaker_shows_speaker_dates_category_and_the_chain(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "searching", ("Bob", "Carol"))
    allergy = _add(api, store, "Bob is allergic to peanuts.", speaker="Bob", category="health", event_date="2024-03-01")
    _add(api, store, "Carol is allergic to cats.", speaker="Carol", category="health")
    old = _add(api, store, "Bob lives in Paris.", speaker="Bob", category="home")
    later = {"user_id": store, "old_memory_id": old, "new_content": "Bob lives in Berlin."}
    new = _post(api, "/supersede", later)["id"]

    _open_store(page, live, store)
    page.get_by_label("Query").fill("allergy")
    page.get_by_label("Query").press("Enter")
    summary = _search_summary(api, store, "allergy", max_results=10)
    expect(page.locator("#results-summary")).to_have_text(summary)
    assert sum(int(n) for n in re.findall(r"\d+", summary)) == 3  # the superseded one left out
    speakers = page.locator("#memories > li .speaker").all_inner_texts()
    assert sorted(speakers) == ["Bob", "Bob", "Carol"]
    peanuts = page.locator("#memories > li", has_text="peanuts")
    expect(peanuts.locator(".category")).to_have_text("health")
    expect(peanuts.locator(".event_date")).to_have_text("happened Mar 1, 2024")  # that UTC day, in New York too
    expect(peanuts.locator(".event_date time")).to_have_attribute("datetime", "2024-03-01")
    expect(peanuts.locator(".event_date time")).to_have_attribute("title", "Friday, March 1, 2024")
    stored = peanuts.locator(".created_at time")
    expect(stored).to_have_text("just now")
    expect(stored).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"))
    expect(stored).to_have_attribute(
        "title", re.compile(r"^\w+day, \w+ \d{1,2}, \d{4} at \d{1,2}:\d\d:\d\d [AP]M E[SD]T$")
    )
    expect(peanuts.locator(".time_bucket")).to_have_count(0)  # the month of the date beside it: not repeated
    for shown in page.locator("#results").all_inner_texts():
        assert not re.search(r"\d{4}-\d\d-\d\d|\.\d{6}", shown), shown  # no raw ISO time anywhere
    # Machine words stay out of what a person reads: no id, no similarity...
    shown = page.locator("body").inner_text()
    assert not UUID.search(shown), shown
    assert "similarity" not in shown.lower(), shown
    # ... they are in each memory's Details menu, the id with a button that copies it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    details = peanuts.get_by_label("Details of the memory “Bob is allergic to peanuts.”")
    details.click()
    panel = peanuts.locator("details.more > .panel")
    expect(panel.locator(".memory-id")).to_have_text(allergy)
    expect(panel).to_contain_text(re.compile(r"Similarity to the query\s*0\.\d{3}"))
    panel.get_by_role("button", name="Copy id").click()
    expect(panel.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == allergy
    page.keyboard.press("Escape")  # it closes as a menu does: on Escape...
    expect(panel).to_be_hidden()
    expect(details).to_be_focused()
    details.click()
    page.locator("#results-summary").click()  # ... and on a click elsewhere
    expect(panel).to_be_hidden()

    page.get_by_role("combobox", name="Speaker", exact=True).select_option("Carol")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#results-summary")).to_have_text("1 close match said by Carol, best first")
    assert page.locator("#memories > li .speaker").all_inner_texts() == ["Carol"]

    page.get_by_role("combobox", name="Speaker", exact=True).select_option("Bob")
    page.get_by_label("Query").fill("where does Bob live")
    page.get_by_label("include superseded versions").check()
    page.get_by_label("Query").press("Enter")
    expect(page.locator("#results-summary")).to_have_text(
        _search_summary(
            api, store, "where does Bob live", " said by Bob", speaker="Bob", include_superseded=True, max_results=10
        )
    )
    paris = page.locator("#memories > li", has_text="Paris")
    expect(paris.locator(".superseded")).to_have_text("superseded by a later version")
    toggle = paris.get_by_role("button", name="Show later versions")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    hide = paris.get_by_role("button", name="Hide later versions")  # the same button, now saying what it does
    expect(hide).to_have_attribute("aria-expanded", "true")
    chain = paris.locator(".chain")
    expect(hide).to_have_attribute("aria-controls", str(chain.get_attribute("id")))
    expect(chain.locator("> li .content")).to_have_text(["Bob lives in Berlin."])
    expect(chain.locator("> li .current")).to_have_count(1)
    expect(chain.locator(f'> li[data-id="{new}"]')).to_be_visible()
    _screenshot(page, "search")
    hide.click()
    expect(chain).to_be_hidden()
    expect(paris.get_by_role("button", name="Show later versions")).to_have_attribute("aria-expanded", "false")
    paris.get_by_role("button", name="Show later versions").click()
    expect(chain).to_be_visible()
    expect(paris.locator(".chain")).to_have_count(1)  # shown again, not appended twice


def test_a_search_says_where_its_close_matches_end_one_hit_and_many(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    """A question one memory answers reads as one close match, the rest set apart below a
    line as less close; a question many memories answer reads as many close matches. Each
    result says its closeness in words; the similarity itself stays in Details."""
    from playwright.sync_api import expect

    store = _store(api, "closeness", ("Bob",))
    for text in (
        "The project deadline moved to Tuesday the 14th.",
        "Bob's sister lives in Busan.",
        "The printer on the third floor is out of toner.",
        "We ordered pizza for the team lunch.",
        "Der Zug nach Hamburg fällt heute aus.",
        "猫がキーボードの上で寝ている。",
    ):
        _add(api, store, text, speaker="Bob")
    for text in ("I play tennis on Saturdays.", "Tennis lessons start at nine.", "My tennis racket needs new strings."):
        _add(api, store, text)

    _open_store(page, live, store)
    page.get_by_label("Query").fill("when is the project deadline?")
    page.get_by_label("Query").press("Enter")
    summary = _search_summary(api, store, "when is the project deadline?", max_results=10)
    assert summary.startswith("1 close match, then ")  # the store's one real hit stands apart
    expect(page.locator("#results-summary")).to_have_text(summary)
    words = page.locator("#memories > li.memory .closeness").all_inner_texts()
    assert words[0] == "closest match"
    assert set(words[1:]) == {"less close"}
    items = page.locator("#memories > li")
    expect(items.nth(1)).to_have_class("less-close-divider")  # the line right after the one close match
    expect(items.nth(1)).to_have_text("Less close to the question:")
    expect(page.locator("#memories > li.memory").first).to_contain_text("deadline")
    _both_widths(page, "search-one-hit")

    page.get_by_label("Query").fill("tennis")
    page.get_by_label("Query").press("Enter")
    summary = _search_summary(api, store, "tennis", max_results=10)
    expect(page.locator("#results-summary")).to_have_text(summary)
    close = int(summary.split()[0])
    assert close >= 3  # the three tennis memories all read as close
    firsts = page.locator("#memories > li.memory .content").all_inner_texts()[:3]
    assert all("ennis" in text for text in firsts), firsts
    _both_widths(page, "search-many-hits")


_FIT = """() => {
    const outside = [];
    for (const node of document.querySelectorAll("#speakers button, li.memory, li.memory .content")) {
        const box = node.getBoundingClientRect();
        const off = box.left < 0 || box.right > window.innerWidth + 0.5;
        if (box.width && off) outside.push(node.textContent.slice(0, 40));
    }
    const cards = [...document.querySelectorAll("li.memory")].filter((card) => card.scrollWidth > card.clientWidth);
    return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, outside,
            overflowing: cards.map((card) => card.textContent.slice(0, 40))};
}"""


def _fits(page: Any, width: int) -> None:
    """No sideways scroll at this width, every speaker action and card on screen, no card
    wider than itself."""
    fit = page.evaluate(_FIT)
    assert fit["inner"] == width
    assert fit["scroll"] <= fit["inner"], fit
    assert fit["outside"] == [], fit
    assert fit["overflowing"] == [], fit


def _in_view(page: Any, locator: Any) -> None:
    box = locator.bounding_box()
    size = page.viewport_size
    assert box is not None
    assert box["y"] >= 0, (box, size)
    assert box["y"] + box["height"] <= size["height"], (box, size)
    assert box["x"] >= 0, (box, size)
    assert box["x"] + box["width"] <= size["width"], (box, size)


@pytest.mark.slow
def test_the_page_fits_360_px_to_wide_screens_sorts_speakers_and_takes_the_reader_to_the_results(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    people = ("bob", "Zoë", "Álvaro", "anna", "Émile", "Carl", "dana", "Ørjan", "yuki", "Bea", "carla", "Ben")
    store = _store(api, "layout", people)
    token = "x" * 300  # one word wider than any screen
    url = "https://example.org/" + "/".join(f"segment{i}" for i in range(40))
    _add(api, store, f"bob pasted {token} into the chat.", speaker="bob")
    _add(api, store, f"bob shared {url} with everyone.", speaker="bob")
    for i in range(3):
        _add(api, store, f"Zoë wrote note {i}.", speaker="Zoë")

    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, live)
    expect(_store_button(page, store)).to_have_text(f"{store} 5 memories")
    _store_button(page, store).click()
    expect(page.locator("#store-title")).to_be_focused()
    # The reader's order of names (Intl.Collator), not code points; "me" last, counted too.
    names = page.locator("#speakers tbody th").all_inner_texts()
    expected = ["Álvaro", "anna", "Bea", "Ben", "bob", "Carl", "carla", "dana", "Émile", "Ørjan", "yuki", "Zoë"]
    assert names == [*expected, "me (the assistant)"]
    expect(_row(page, "bob").locator("td.count")).to_have_text("2 memories")
    expect(_row(page, "Zoë").locator("td.count")).to_have_text("3 memories")
    expect(_row(page, "me").locator("td.count")).to_have_text("0 memories")

    # A speaker's Memories: the results below the fold come into view, focus on their heading.
    _row(page, "Zoë").get_by_role("button", name="Show the memories of Zoë").click()
    title = page.locator("#results-title")
    expect(title).to_have_text("Zoë: newest first")
    expect(title).to_be_focused()
    _in_view(page, title)
    assert page.evaluate("window.scrollY") > 0  # it had to scroll: the results start below the fold

    # A speaker's Search with no query takes the reader to the query, that speaker chosen...
    page.evaluate("window.scrollTo(0, 0)")
    _row(page, "bob").get_by_role("button", name="Search the memories of bob").click()
    expect(page.get_by_label("Query")).to_be_focused()
    expect(page.get_by_role("combobox", name="Speaker", exact=True)).to_have_value("bob")
    page.get_by_label("Query").fill("chat")
    page.evaluate("window.scrollTo(0, 0)")
    # ... and with one, searches that speaker's memories and goes to the results.
    _row(page, "bob").get_by_role("button", name="Search the memories of bob").click()
    expect(title).to_have_text("Search: chat")
    expect(page.locator("#results-summary")).to_have_text(
        _search_summary(api, store, "chat", " said by bob", speaker="bob", max_results=10)
    )
    expect(title).to_be_focused()
    _in_view(page, title)

    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_role("button", name="All memories").click()
    expect(title).to_be_focused()
    _in_view(page, title)
    expect(page.locator("#memories > li")).to_have_count(5)
    _fits(page, 1280)
    wide = _screenshot(page, "layout-1280", always=True)
    assert wide is not None
    assert _png_width(wide) == 1280  # nothing wider than the window

    for width in (360, 390):
        page.set_viewport_size({"width": width, "height": 844})
        _fits(page, width)
        # Compact rows: name and count on one line, the actions in at most two more.
        rows = page.locator("#speakers tbody tr")
        heights = [box["height"] for box in (rows.nth(i).bounding_box() for i in range(rows.count())) if box]
        assert max(heights) < 130, heights
        long_one = page.locator("#memories > li", has_text="pasted")
        content = long_one.locator(".content").bounding_box()
        card = long_one.bounding_box()
        assert content
        assert card
        assert content["x"] + content["width"] <= card["x"] + card["width"]  # the 300-character word wraps
        assert card["x"] + card["width"] <= width
    narrow = _screenshot(page, "layout-390", always=True)
    assert narrow is not None
    assert _png_width(narrow) == 390
    assert not [text for text in console if "Content Security Policy" in text], console  # nothing inline needed


_UNDER_THE_HEADER = """() => {
    const header = document.querySelector("header").getBoundingClientRect();
    const next = document.querySelector("header").nextElementSibling.getBoundingClientRect();
    const query = document.querySelector("#query").getBoundingClientRect();
    return {gap: next.top - header.bottom, height: next.height, toQuery: query.top - header.bottom};
}"""


def _top(locator: Any) -> float:
    box = locator.bounding_box()
    assert box is not None
    return float(box["y"])


@pytest.mark.slow
def test_after_a_search_the_query_stays_in_sight_and_a_phone_shows_the_search_first(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    people = tuple(f"Person {i:02d}" for i in range(12))  # a long speakers table above the results
    store = _store(api, "sticky", people)
    for i, topic in enumerate(("tea", "chess", "the dog", "the garden", "the boat", "the piano")):
        _add(api, store, f"{people[i]} talked about {topic}.", speaker=people[i])
    _open_store(page, live, store)
    query = page.get_by_label("Query")
    title = page.locator("#results-title")
    for (width, height), words in zip(((1280, 720), (390, 844), (360, 740)), ("tea", "chess", "the dog"), strict=True):
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("window.scrollTo(0, 0)")
        # Right under the header: the bar with the query, no empty band between them.
        under = page.evaluate(_UNDER_THE_HEADER)
        assert abs(under["gap"]) < 0.5, (width, under)
        assert under["height"] > 0, (width, under)
        assert under["toQuery"] < 16, (width, under)
        if width < 400:  # a phone: the search before the stores and the speakers
            assert _top(query) < _top(page.locator("#stores-title")) < _top(page.locator("#speakers")), width

        query.fill(words)
        query.press("Enter")
        expect(title).to_have_text(f"Search: {words}")
        expect(title).to_be_focused()
        assert page.evaluate("window.scrollY") > 0, width  # the results start below the fold...
        _in_view(page, query)  # ... and the query is still in sight, the results not under it
        _in_view(page, title)
        bar = page.locator("#bar").bounding_box()
        assert bar is not None
        assert _top(title) >= bar["y"] + bar["height"], (width, bar)
        _fits(page, width)
        _screenshot(page, f"search-{width}", full_page=False)


_WORDS = """async () => {
    const {many, readableTime, exactTime} = await import("./format.js");
    const now = new Date("2026-03-10T12:00:00Z");
    const ago = (seconds) => new Date(now.getTime() - seconds * 1000).toISOString();
    return {
        counts: [many(0, "memory"), many(1, "memory"), many(2, "memory"), many(1, "record"),
                 many(1234, "memory"), many(1, "person"), many(50, "person")],
        times: [readableTime(ago(10), now), readableTime(ago(300), now), readableTime(ago(3 * 3600), now),
                readableTime(ago(30 * 3600), now), readableTime(ago(3 * 86400), now),
                readableTime("2026-01-05T14:05:09.123456Z", now), readableTime("2024-03-01", now)],
        exact: exactTime("2026-01-05T14:05:09.123456Z"),
    };
}"""


@pytest.mark.slow
def test_counts_and_times_read_as_words_in_the_readers_locale(browser: Any, live: LiveServer) -> None:
    for locale, zone, counts, times, exact in (
        (
            "en-US",
            "America/New_York",
            ["0 memories", "1 memory", "2 memories", "1 record", "1,234 memories", "1 person", "50 people"],
            [
                "just now",
                "5 minutes ago",
                "3 hours ago",
                "yesterday",
                "3 days ago",
                "Jan 5, 2026, 9:05 AM",
                "Mar 1, 2024",
            ],
            "Monday, January 5, 2026 at 9:05:09 AM EST",
        ),
        (
            "de-DE",
            "Europe/Berlin",
            ["0 memories", "1 memory", "2 memories", "1 record", "1.234 memories", "1 person", "50 people"],
            ["jetzt", "vor 5 Minuten", "vor 3 Stunden", "gestern", "vor 3 Tagen", "05.01.2026, 15:05", "01.03.2024"],
            "Montag, 5. Januar 2026 um 15:05:09 MEZ",
        ),
    ):
        context = browser.new_context(locale=locale, timezone_id=zone)
        try:
            page = context.new_page()
            page.goto(f"{live.url}/ui/")  # the module, as the page loads it (same origin, CSP and all)
            words = page.evaluate(_WORDS)
        finally:
            context.close()
        assert words == {"counts": counts, "times": times, "exact": exact}, locale


# -- the destructive flows ------------------------------------------------------------------------------


@pytest.mark.slow
def test_forget_one_memory_only_after_a_confirm(page: Any, live: LiveServer, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    store = _store(api, "forget-one", ("Ann",))
    keep = _add(api, store, "Ann keeps this one.", speaker="Ann")
    gone = _add(api, store, "Ann wants this forgotten.", speaker="Ann")
    _open_store(page, live, store)
    _row(page, "Ann").get_by_role("button", name="Show the memories of Ann").click()
    forget = page.get_by_role("button", name="Forget the memory “Ann wants this forgotten.”")  # words, not its id
    expect(page.locator(f'#memories > li[data-id="{gone}"]').get_by_role("button", name="Forget")).to_have_count(1)

    forget.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Ann wants this forgotten.")
    page.keyboard.press("Escape")  # no is the default
    expect(dialog).to_be_hidden()
    assert api.post("/get", json={"user_id": store, "memory_id": gone}).status_code == 200

    forget.click()
    dialog.get_by_role("button", name="Forget it").click()
    expect(page.locator("#status")).to_have_text("Forgot 1 memory")
    assert _contents(page) == ["Ann keeps this one."]
    error_body(api.post("/get", json={"user_id": store, "memory_id": gone}).json(), 404, "not_found_error")
    assert api.post("/get", json={"user_id": store, "memory_id": keep}).status_code == 200
    expect(_row(page, "Ann").locator("td.count")).to_have_text("1 memory")
    expect(_store_button(page, store)).to_have_text(f"{store} 1 memory")  # the store's count follows


@pytest.mark.slow
def test_forget_a_speakers_memories_shows_the_count_and_a_changed_count_again(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "forget-speaker", ("Eve",))
    _add(api, store, "Eve said one thing. And then another.", speaker="Eve")
    _add(api, store, "Eve said a second thing.", speaker="Eve")
    records = _by_speaker(api, store, "Eve")["records_to_delete"]
    assert records == 3  # chunks, not memories: what is confirmed; the person reads 2 memories first

    _open_store(page, live, store)
    forget_all = page.get_by_role("button", name="Forget every memory of Eve")
    forget_all.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("This deletes 2 memories.")
    expect(dialog).not_to_contain_text("record")  # a person counts memories; the records go as confirm_records
    page.keyboard.press("Escape")
    assert _by_speaker(api, store, "Eve")["records_to_delete"] == records

    forget_all.click()
    expect(dialog.get_by_role("button", name="Delete 2 memories")).to_be_visible()
    _screenshot(page, "confirm")
    _add(api, store, "Eve said a third thing meanwhile.", speaker="Eve")  # the count changes
    dialog.get_by_role("button", name="Delete 2 memories").click()
    expect(dialog.locator("#confirm-error")).to_have_text(
        "Nothing was deleted: Eve's memories changed while you were deciding."
    )
    expect(dialog).to_contain_text("The count changed meanwhile: 3 memories now.")
    expect(dialog).not_to_contain_text("record")
    assert _by_speaker(api, store, "Eve")["records_to_delete"] == records + 1  # nothing deleted
    _screenshot(page, "confirm-changed")

    dialog.get_by_role("button", name="Delete 3 memories").click()
    expect(page.locator("#status")).to_have_text("Deleted 3 memories of Eve")
    expect(dialog).to_be_hidden()
    after = _by_speaker(api, store, "Eve")
    assert after["records_to_delete"] == 0
    assert after["memories"] == []
    expect(_row(page, "Eve").locator("td.count")).to_have_text("0 memories")  # the registration stays


@pytest.mark.slow
def test_supersede_a_memory(page: Any, live: LiveServer, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    store = _store(api, "supersede", ("Ben",))
    old = _add(api, store, "Ben's meeting is on Friday.", speaker="Ben", category="work")
    _open_store(page, live, store)
    _row(page, "Ben").get_by_role("button", name="Show the memories of Ben").click()
    page.get_by_role("button", name="Supersede the memory “Ben's meeting is on Friday.”").click()
    text = page.get_by_label("The new version")
    expect(text).to_be_focused()
    text.fill("Ben's meeting is on Tuesday.")
    text.press("Enter")
    status = page.locator("#status")
    expect(status).to_have_text("Stored the new version; the old one is kept, superseded. Show it")
    assert old not in str(status.text_content())  # words, not ids
    assert _contents(page) == ["Ben's meeting is on Tuesday.", "Ben's meeting is on Friday."]
    status.get_by_role("button", name="Show it").click()
    newest = page.locator("#memories > li").first
    expect(newest).to_be_focused()
    expect(newest).to_have_class(re.compile(r"\bmarked\b"))
    expect(page.locator("#memories > li").first.locator(".category")).to_have_text("work")
    expect(page.locator(f'#memories > li[data-id="{old}"] .superseded')).to_contain_text("superseded by")
    stored = _post(api, "/get", {"user_id": store, "memory_id": old})["memory"]
    assert stored["is_superseded"] is True
    newest = _by_speaker(api, store, "Ben")["memories"][0]
    assert newest["id"] == stored["superseded_by"]
    assert newest["content"] == "Ben's meeting is on Tuesday."


@pytest.mark.slow
def test_register_and_remove_a_speaker_and_refusals_shown_as_their_error(
    page: Any, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "speakers", ("Gina",))
    _open_store(page, live, store)

    name = page.get_by_label("Register a speaker")
    name.fill("Frank")
    name.press("Enter")
    expect(page.locator("#status")).to_have_text("Registered Frank")
    expect(_row(page, "Frank").locator("td.count")).to_have_text("0 memories")

    name.fill("Me")  # the reserved name in another case: refused, said clearly
    name.press("Enter")
    box = _notice(page).locator(".error-text")
    expect(box.locator(".error-message")).to_have_text("'Me' is reserved: write exactly 'me' for the assistant itself.")
    expect(box.locator(".error-hint")).to_have_text("Check the speaker's name.")
    expect(box).to_have_attribute("data-field", "speaker")  # for machines, not shown
    assert "field" not in _notice(page).inner_text()
    expect(_row(page, "Me")).to_have_count(0)

    _add(api, store, "Frank fixed the boiler.", speaker="Frank")
    _store_button(page, store).click()  # counts again
    expect(_row(page, "Frank").locator("td.count")).to_have_text("1 memory")
    page.get_by_role("button", name="Remove Frank").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("The registration goes; Frank's memories stay, untagged (1 memory).")
    dialog.get_by_role("button", name="Remove Frank").click()
    expect(page.locator("#status")).to_have_text("Removed Frank; 1 memory untagged")
    expect(_row(page, "Frank")).to_have_count(0)
    assert [s["speaker"] for s in api.get("/speakers", params={"user_id": store}).json()["speakers"]] == ["Gina"]

    # A read refused by the server: Gina was removed after the page listed her.
    api.request("DELETE", "/speakers", json={"user_id": store, "speaker": "Gina"}).raise_for_status()
    page.get_by_role("combobox", name="Speaker", exact=True).select_option("Gina")
    page.get_by_label("Query").fill("boiler")
    page.get_by_label("Query").press("Enter")
    expect(_notice(page).locator(".error-text")).to_have_attribute("data-status", "404")
    expect(_notice(page).locator(".error-message")).to_have_text("Speaker 'Gina' is not registered in this store.")
    expect(_notice(page).locator(".error-hint")).to_have_text("Pick a speaker from the list, or register Gina first.")


@pytest.mark.slow
def test_rename_a_speaker_and_merge_when_the_new_name_is_taken(page: Any, live: LiveServer, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    store = _store(api, "rename", ("Bbo", "Bob", "Robert"))
    _add(api, store, "Bbo booked the train.", speaker="Bbo")
    _add(api, store, "Robert paid the deposit.", speaker="Robert")
    _open_store(page, live, store)

    page.get_by_role("button", name="Rename Bbo").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("The new name").fill("Bobby")
    dialog.get_by_label("The new name").press("Enter")
    expect(page.locator("#status")).to_have_text("Renamed Bbo to Bobby; 1 memory moved with the name")
    expect(_row(page, "Bobby").locator("td.count")).to_have_text("1 memory")
    expect(_row(page, "Bbo")).to_have_count(0)

    page.get_by_role("button", name="Rename Robert").click()  # to a registered name: merge, after a confirm
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("The new name").fill("Bob")
    dialog.get_by_role("button", name="Rename").click()
    confirm = page.get_by_role("dialog")
    expect(confirm).to_contain_text("Merging moves 1 memory from Robert to Bob")
    confirm.get_by_role("button", name="Merge into Bob").click()
    expect(page.locator("#status")).to_have_text("Merged Robert into Bob; 1 memory moved")
    expect(_row(page, "Robert")).to_have_count(0)
    speakers = {s["speaker"]: s["memories"] for s in api.get("/speakers", params={"user_id": store}).json()["speakers"]}
    assert speakers == {"Bob": 1, "Bobby": 1}


@pytest.mark.slow
def test_export_a_store_and_one_speaker_as_jsonl(page: Any, live: LiveServer, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    store = _store(api, "export", ("Hal",))
    old = _add(api, store, "Hal drives a red car.", speaker="Hal")
    _post(api, "/supersede", {"user_id": store, "old_memory_id": old, "new_content": "Hal drives a blue car."})
    for i in range(21):  # more than one by_speaker page
        _add(api, store, f"Hal's item {i}.", speaker="Hal")
    _add(api, store, "An untagged line.")
    everything = _post(api, "/list", {"user_id": store, "limit": 500})["memories"]
    assert len(everything) == 24

    _open_store(page, live, store)
    with page.expect_download() as store_file:
        page.get_by_role("button", name="Export store (JSONL)").click()
    assert store_file.value.suggested_filename == "export.jsonl"
    lines = Path(store_file.value.path()).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == everything  # memory_list's order: oldest first
    expect(page.locator("#status")).to_have_text(f"Exported 24 memories of {store}")

    with page.expect_download() as speaker_file:
        page.get_by_role("button", name="Export the memories of Hal").click()
    assert speaker_file.value.suggested_filename == "export-Hal.jsonl"
    hal = [json.loads(line) for line in Path(speaker_file.value.path()).read_text(encoding="utf-8").splitlines()]
    assert hal == [memory for memory in everything if memory.get("speaker") == "Hal"]


# -- other local web pages cannot write (issue 22) ------------------------------------------------

_FOREIGN_WRITE = """async ([url, type, mode]) => {
    try {
        const answer = await fetch(url, {method: "POST", mode, headers: {"Content-Type": type},
                                         body: JSON.stringify({user_id: "default", content: "planted " + type})});
        return mode === "no-cors" ? "opaque" : "status " + answer.status;
    } catch (refused) { return "refused"; }
}"""


@pytest.mark.slow
def test_a_page_on_another_local_port_cannot_write_and_the_page_itself_can(browser: Any, open_live: LiveServer) -> None:
    """The attack of issue 22 on a server with no key (the loopback default): a page served
    from another localhost port posts ``text/plain`` (no preflight) and JSON (preflight)
    with ``fetch``; nothing is stored. The memory browser's own origin still writes, and
    with no key configured it never asks for one."""
    from playwright.sync_api import expect

    server = open_live
    other = f"http://localhost:{server.port + 1}/"  # another origin: another port of localhost
    context = browser.new_context()
    try:
        page = context.new_page()
        page.route(other, lambda route: route.fulfill(status=200, content_type="text/html", body="<title>x</title>"))
        page.goto(other)
        target = f"{server.url}/api/v1/memory/store"
        for kind in ("text/plain", "application/json"):
            assert page.evaluate(_FOREIGN_WRITE, [target, kind, "cors"]) == "refused", kind
            # Chromium may send it and hide the answer, or block it itself: either way no write.
            assert page.evaluate(_FOREIGN_WRITE, [target, kind, "no-cors"]) in ("opaque", "refused"), kind
        with httpx.Client(base_url=f"{server.url}/api/v1/memory", timeout=60) as api:
            listed = api.post("/list", json={"user_id": "default", "limit": 100}).json()
            assert listed["memories"] == []  # no write reached a handler
            requests = Requests()
            page.on("request", requests)
            page.goto(f"{server.url}/ui/")
            # No key configured: the page asks for none and goes straight to the stores.
            expect(page.locator("#app")).to_be_visible()
            expect(_store_button(page, "default")).to_be_focused()
            expect(page.locator("#login")).to_be_hidden()
            expect(page.get_by_role("button", name="Forget the key")).to_be_hidden()
            api_calls = [headers for _, url, headers in requests.seen if "/api/" in url]
            assert api_calls
            assert all("x-api-key" not in headers for headers in api_calls)
            assert page.evaluate(_FOREIGN_WRITE, [target, "application/json", "cors"]) == "status 200"
            stored = api.post("/list", json={"user_id": "default", "limit": 100}).json()["memories"]
            assert [m["content"] for m in stored] == ["planted application/json"]
    finally:
        context.close()


# -- importing a conversation -----------------------------------------------------------------------

# ``support``'s trip chat (the REST import test's too), and someone called "me" (the
# assistant's reserved name: no import can register it).
TRIP = TRIP_CHAT + "13/04/2026, 18:25 - me: Ich komme auch mit.\n"
_NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= window.innerWidth"
_DROP = """(text) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([text], "WhatsApp Chat with Trip.txt", {type: "text/plain"}));
    return transfer;
}"""


def _both_widths(page: Any, name: str) -> None:
    """Screenshots of the whole page at 1280 and at 390 px (with
    ``WONTOPOS_UI_SCREENSHOTS``; scrolled to the top, where the sticky bar belongs, then
    back); at 390 px nothing scrolls sideways, shots or not."""
    scrolled = page.evaluate("window.scrollY")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(_NO_SIDEWAYS), name
    if SCREENSHOTS:
        page.evaluate("window.scrollTo(0, 0)")
        _screenshot(page, f"{name}-390")
    page.set_viewport_size({"width": 1280, "height": 900})
    if SCREENSHOTS:
        page.evaluate("window.scrollTo(0, 0)")
        _screenshot(page, f"{name}-1280")
        page.evaluate(f"window.scrollTo(0, {scrolled})")


def _people(page: Any) -> dict[str, tuple[str, str]]:
    """Each person of the one conversation read: (their messages, how they resolve)."""
    rows = page.locator("#import-conversations .people > li")
    return {
        str(rows.nth(i).locator(".person").inner_text()): (
            str(rows.nth(i).locator(".count").inner_text()),
            str(rows.nth(i).locator(".resolves").inner_text()),
        )
        for i in range(rows.count())
    }


@pytest.mark.slow
def test_import_a_chat_map_one_person_to_a_speaker_register_the_rest_and_land_on_their_memories(
    page: Any, seen: Requests, live: LiveServer, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    store = _store(api, "imported", ("Lena Ortiz",))
    _add(api, store, "Lena Ortiz likes slow ferries.", speaker="Lena Ortiz")
    console = Console(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    _open_store(page, live, store)
    page.get_by_role("button", name="Import a conversation…").click()
    expect(page.locator("#import-title")).to_be_focused()
    expect(page.get_by_label("Time zone of its times")).to_have_value("America/New_York")  # the reader's
    page.get_by_label("Format").select_option("vtt")  # a recording's start, no local times
    expect(page.get_by_label("Recording began")).to_be_visible()
    expect(page.get_by_label("Time zone of its times")).to_be_hidden()
    _both_widths(page, "import-pick")

    # A file the format refuses: the server's refusal, shown as every other one is.
    page.get_by_label("Format").select_option("telegram")
    page.set_input_files("#import-file", files=[{"name": TRIP_NAME, "mimeType": "text/plain", "buffer": TRIP.encode()}])
    box = _notice(page).locator(".error-text")
    expect(box).to_have_attribute("data-field", "file")
    expect(page.get_by_label("Recording began")).to_be_hidden()
    expect(box.locator(".error-message")).to_contain_text(TRIP_NAME)
    expect(box.locator(".error-hint")).to_have_text("Check the file and its format.")
    expect(page.locator("#import-review")).to_be_hidden()

    # The right format reads the same file again: who is who, nothing stored yet.
    page.get_by_label("Format").select_option("whatsapp")
    title = page.locator("#import-review-title")
    expect(title).to_have_text(f"Who is who in {TRIP_NAME}")
    expect(title).to_be_focused()
    expect(_notice(page)).to_be_hidden()
    expect(page.locator("#import-overview")).to_have_text(
        "WhatsApp (the .txt of Export chat) · 6 messages in 1 conversation · times read in America/New_York"
    )
    expect(page.locator("#import-conversations .facts")).to_contain_text("skipped: 1 media, 1 system")
    assert _people(page) == {
        "Νίκος": ("2 messages", "→ Νίκος, registered by this import"),
        "Lena": ("2 messages", "→ Lena, registered by this import"),
        "陽菜": ("1 message", "→ 陽菜, registered by this import"),
        "me": ("1 message", "→ untagged"),  # no one can register it: untagged unless chosen otherwise
    }
    me = page.locator('#import-people li.choice[data-name="me"]')
    expect(me.locator(".hint")).to_have_text(
        "Cannot be registered: 'me' is the assistant's reserved name; map this person with as."
    )
    expect(me.get_by_role("option")).to_have_text(  # no "register": the name rules refuse it
        ["Lena Ortiz", "me (the assistant)", "untagged (no speaker)", "leave out (not imported)"]
    )
    assert _post(api, "/list", {"user_id": store, "limit": 10})["count"] == 1  # a read stores nothing
    lena = page.get_by_label("Store the messages of Lena as")
    expect(lena).to_have_value("register")  # the default
    lena.select_option(label="Lena Ortiz")  # the same person as a registered speaker
    assert _people(page)["Lena"] == ("2 messages", "→ Lena Ortiz")
    page.get_by_label("Store the messages of 陽菜 as").select_option("skip")
    expect(page.locator("#import-run")).to_have_text("Import 5 messages")
    page.get_by_label("Store the messages of 陽菜 as").select_option("register")
    expect(page.locator("#import-choices-hint")).to_contain_text("Registering 2 people makes 3 of the store's 50.")
    _both_widths(page, "import-review")

    # Import: the upload, then "storing" until the answer (held here to be seen).
    held: list[Any] = []
    storing = re.compile(r"/api/v1/memory/import\?(?!.*dry_run)")
    page.route(storing, lambda route: held.append(route))
    run = page.get_by_role("button", name="Import 6 messages")
    run.click()
    expect(page.locator("#import-progress")).to_be_visible()
    expect(page.locator("#import-phase")).to_have_text(re.compile(rf"^(Sending {re.escape(TRIP_NAME)}: \d+%|Storing)"))
    expect(run).to_be_disabled()
    _both_widths(page, "import-progress")
    for _ in range(200):  # the route's handler runs while Playwright waits
        if held:
            break
        page.wait_for_timeout(25)
    (request,) = held
    request.continue_()
    page.unroute(storing)
    done = page.locator("#import-done-title")
    expect(done).to_have_text(f"Imported {TRIP_NAME} into {store}")
    expect(done).to_be_focused()
    expect(page.locator("#import-totals")).to_contain_text("6 memories stored.")
    expect(page.locator("#import-totals")).to_contain_text("Registered: Νίκος, 陽菜.")
    expect(page.locator("#import-speakers tbody th")).to_have_text(["Lena Ortiz", "Νίκος", "陽菜", "untagged"])
    expect(page.locator("#import-speakers td.count")).to_have_text(["2 memories", "2 memories", "1 memory", "1 memory"])
    expect(page.locator("#import-progress")).to_be_hidden()
    expect(_row(page, "Νίκος").locator("td.count")).to_have_text("2 memories")  # the store's counts follow
    expect(_row(page, "Lena Ortiz").locator("td.count")).to_have_text("3 memories")
    _both_widths(page, "import-done")

    # What the page sent: the choices as the route's options, the key in a header only.
    (sent,) = [(url, headers) for method, url, headers in seen.seen if "/import?" in url and "dry_run" not in url]
    query = parse_qs(urlsplit(sent[0]).query)
    assert query["as"] == ["Lena=Lena Ortiz", "me=-"]
    assert (query["register"], query["format"], query["user_id"]) == (["true"], ["whatsapp"], [store])
    assert "skip" not in query
    assert sent[1]["content-type"] == "application/octet-stream"
    assert sent[1]["x-api-key"] == KEY
    assert all(KEY not in url for _, url, _ in seen.seen)
    # ... and what the store now holds, by the REST API.
    speakers = {s["speaker"]: s["memories"] for s in api.get("/speakers", params={"user_id": store}).json()["speakers"]}
    assert speakers == {"Lena Ortiz": 3, "Νίκος": 2, "陽菜": 1}
    said = _by_speaker(api, store, "Lena Ortiz")["memories"]
    assert "Rooms booked: Harbour View,\ntwo nights, breakfast included." in [m["content"] for m in said]
    greek = _by_speaker(api, store, "Νίκος")["memories"]
    assert {m["content"] for m in greek} == {"Κλείνω το πλοίο για Νάξο την Παρασκευή.", "Το πλοίο φεύγει στις 07:30."}
    assert {m["event_date"] for m in greek} == {"2026-04-12T13:01:00.000000Z", "2026-04-12T13:05:00.000000Z"}
    last = _post(api, "/list", {"user_id": store, "limit": 10})["memories"][-1]
    assert (last["content"], last.get("speaker")) == ("Ich komme auch mit.", None)  # untagged

    # The way to what was imported: a speaker's memories, newest first.
    page.locator("#import-speakers").get_by_role("button", name="Show the memories of Lena Ortiz").click()
    expect(page.locator("#results-title")).to_have_text("Lena Ortiz: newest first")
    expect(page.locator("#memories > li")).to_have_count(3)
    assert set(page.locator("#memories > li .speaker").all_inner_texts()) == {"Lena Ortiz"}
    assert "Rooms booked: Harbour View,\ntwo nights, breakfast included." in _contents(page)
    _both_widths(page, "import-landed")

    # The same file dropped again: read, chosen the same way, imported: nothing new.
    page.get_by_role("button", name="Import another file").click()
    page.locator("#import-drop").dispatch_event("drop", {"dataTransfer": page.evaluate_handle(_DROP, TRIP)})
    expect(title).to_be_focused()  # read again, not the last review's words
    expect(title).to_have_text(f"Who is who in {TRIP_NAME}")
    expect(page.locator("#import-file-name")).to_have_text(f"{len(TRIP.encode())} bytes")
    assert _people(page)["Νίκος"] == ("2 messages", "→ Νίκος, registered")
    page.get_by_label("Store the messages of Lena as").select_option(label="Lena Ortiz")
    page.get_by_role("button", name="Import 6 messages").click()
    expect(done).to_have_text(f"Nothing new in {TRIP_NAME}: every message was imported before")
    expect(page.locator("#import-totals")).to_contain_text("6 messages imported before, not stored again.")
    assert _post(api, "/list", {"user_id": store, "limit": 10})["count"] == 7
    # Nothing went wrong in the page: the one error is the refused telegram read's 400.
    assert [e for e in console.errors if "status of 400" not in e] == [], console.errors
    assert [status for status, url in console.answers if status >= 400] == [400], console.answers

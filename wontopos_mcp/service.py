"""MemoryService: every rule of SPEC.md, once.

The faces (MCP tools, REST, the ``Memory`` library) call these methods with SPEC's MCP
parameter names and send back the dicts they return; refusals are ``WontoposError``s.
The service is synchronous and thread-safe: the async faces call it through
``anyio.to_thread.run_sync``.

Order of checks in every call (SPEC "Errors", precedence): argument shape and ranges,
then the store, then the speaker, then the memory, then conflicts, and only then the
model, so a call that fails early never waits for the model. Checks that depend on
stored state are repeated inside the write lock, where they decide.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import validation as v
from .conversation import context_line, context_window
from .dates import format_us, parse_moment, to_us
from .errors import InvalidRequestError
from .idempotency import Running
from .names import check_speaker
from .records import RECORD_FIELDS, memory_record
from .scope import filter_clauses, in_store, query_without_name, quote, quote_all
from .writes import MemoryWrites

if TYPE_CHECKING:
    from .config import Settings
    from .embeddings import ModelLoader
    from .store import Store

log = logging.getLogger(__name__)

def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MemoryService(MemoryWrites):
    """The engine: stores and speakers (``registry``), writes (``writes``), reads (here)."""

    def __init__(
        self,
        store: "Store",
        models: "ModelLoader",
        *,
        speaker_limit: int = 50,
        clock: Callable[[], datetime] = _utcnow,
        model_wait: float = 20.0,
        window_cap: int = 1024,
    ) -> None:
        self.store = store
        self.models = models
        self.speaker_limit = speaker_limit
        self.clock = clock
        self.model_wait = model_wait
        self._running = Running()
        self.window_cap = window_cap  # by_speaker: most rows a time window may hold before it narrows
        self._spans = _SpanHints()
        self._db_state = "opening"  # the background open's outcome: "opening", "ok" or "error"
        self._started = False
        self._start_lock = threading.Lock()
        store.on_open(self._ensure_default_store)

    @classmethod
    def open(cls, settings: "Settings", *, models: "ModelLoader | None" = None, **kwargs: Any) -> "MemoryService":
        """The composition root's way in: a database and a (not yet started) model loader."""
        from functools import partial

        from .embeddings import ModelLoader, load_embedder
        from .store import Store

        store = Store(settings.db, storage_options=settings.storage_options_dict)
        if models is None:
            models = ModelLoader(partial(load_embedder, settings.embed_model, settings.model_cache))
        return cls(store, models, speaker_limit=settings.speaker_limit, **kwargs)

    def start(self) -> None:
        """Open the database, then load the model, in the background (later calls do nothing).

        Returns at once: a server answers ``initialize`` and ``tools/list`` meanwhile.
        The database comes first and alone: calls that need no model wait only for it,
        and the model load (imports, a first-run conversion) competes with it for the
        interpreter. Measured with both at once, LanceDB's import alone (most of the open)
        took 1.4-1.5 s instead of 1.0 s on an idle 2-core machine, and 2.9-8.4 s instead
        of 2.2 s on a loaded one while a cold cache was converted. A call that needs the
        model before the database is open starts the load itself (``ModelLoader.get``).
        """
        with self._start_lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._warm_up, name="wontopos-open-db", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.store.connect()
            self._db_state = "ok"
        except Exception:  # the first call that needs the database reports it properly
            self._db_state = "error"
            log.warning("opening the database in the background failed", exc_info=True)
        finally:
            self.models.start()

    def database_state(self) -> str:
        """Where the background open stands, without waiting: "opening", "ok" or "error"."""
        return self._db_state

    def close(self) -> None:
        self.store.close()

    # -- memories: reads ---------------------------------------------------------------------------

    def memory_search(
        self,
        query: Any,
        speaker: Any = None,
        limit: Any = 10,
        filters: Any = None,
        include_superseded: Any = False,
        user_id: Any = None,
    ) -> dict[str, Any]:
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        limit = v.integer(limit, field="limit", low=5, high=20)
        scope_filters = filter_clauses(filters)
        include_superseded = v.boolean(include_superseded, field="include_superseded")
        key, display, _ = self._checked(user_id, [(name, "speaker")], writing=False)
        where = " AND ".join(
            [in_store(key)]
            + ([f"speaker = {quote(name)}"] if name is not None else [])
            + ([] if include_superseded else ["NOT superseded"])
            + scope_filters
        )
        embedder = self._embedder()
        from .search import search_memories

        hits = search_memories(self.store, embedder, query_without_name(text, name), where, limit)
        answer: dict[str, Any] = {"user_id": display, "query": text}
        if name is not None:
            answer["speaker"] = name
        answer["memories"] = [memory_record(row, similarity=sim) for row, sim in hits]
        return answer

    def by_speaker(
        self, speaker: Any, limit: Any = 20, before: Any = None, skip_ids: Any = None, user_id: Any = None
    ) -> dict[str, Any]:
        name = check_speaker(speaker)
        limit = v.integer(limit, field="limit", low=5, high=20)
        before_us = None if before is None else parse_moment(before, field="before")[0]
        skip = [] if skip_ids is None else v.string_list(skip_ids, field="skip_ids", max_items=v.MAX_SKIP_IDS)
        key, display, _ = self._checked(user_id, [(name, "speaker")], writing=False)
        said = in_store(key) + f" AND speaker = {quote(name)}"
        chunks = self.store.count(said)
        rows = self._newest_said(key, name, said, before_us, skip, limit + 1, chunks) if chunks else []
        page, has_more = rows[:limit], len(rows) > limit
        next_before, next_skip = None, []
        if has_more and page:
            last = page[-1]["created_us"]
            next_before = format_us(last)
            carried = skip if before_us == last else []
            next_skip = carried + [r["memory_id"] for r in page if r["created_us"] == last]
        return {
            "user_id": display,
            "speaker": name,
            "memories": [memory_record(r) for r in page],
            "returned": len(page),
            "chunks": chunks,
            "records_to_delete": chunks,
            "points_to_delete": chunks,
            "has_more": has_more,
            "next_before": next_before,
            "next_skip_ids": next_skip,
        }

    def _newest_said(
        self, key: str, name: str, said: str, before_us: int | None, skip: list[str], want: int, chunks: int
    ) -> list[dict[str, Any]]:
        """The speaker's newest ``want`` memories at or before ``before_us``, not in ``skip``.

        Exactly what ``rows(scope, order=(created_us desc, seq desc), limit=want)`` gives,
        but LanceDB sorts every row its filter matches, and a speaker's whole scope is
        slow to sort (720 ms for 320k memories at 1M rows). So only a time window
        ``lower < created_us <= before`` is sorted (just ``lower < created_us`` on a first
        page: memories may carry future dates).

        Why the window gives the same answer: every row outside it has ``created_us <=
        lower``, so it is older than every row inside it. When the window holds at least
        ``want`` rows, its newest ``want`` (ties by seq included: a tie never straddles
        ``lower``) are therefore the newest ``want`` overall. When it holds fewer, they are
        the whole answer only once a count has found no row at or below ``lower`` (made
        after the window was sized, so any row that exists throughout is seen); otherwise
        the window widens. A window reaching below year 1, where no timestamp is, is
        dropped for the unbounded query, and so is a window that never settles.

        The window is sized by counting it first (indexes: ~3 ms, growing with the table
        rows in the time range) before it is sorted (~3 µs per row in it): more than
        ``window_cap`` rows and it narrows, fewer than ``want`` and it widens (at most
        ×16, by the density seen), bisecting once both a short and a too-full span are
        known. It starts from the span that served this speaker last (first page and later
        pages apart; a later page's scaled to hold about ``window_cap // 8`` rows), else
        from a day. That memory is a hint only: another process may have written or
        deleted since; correctness never rests on it.
        """
        first_page = before_us is None
        skip_clause = f" AND memory_id NOT IN {quote_all(skip)}" if skip else ""
        scope = said + " AND chunk_idx = 0" + skip_clause
        cap, target = self.window_cap, max(1, self.window_cap // 8)
        if first_page and chunks <= cap:  # few rows: sorting them all is cheap
            rows = self._newest_first(scope, want)
            self._guess_later_span(key, name, rows, target)
            return rows
        upper = "" if first_page else f" AND created_us <= {before_us}"
        anchor = self._now_us() if before_us is None else before_us
        hint_key = (key, name, first_page)
        span = self._spans.get(hint_key) or _COLD_SPAN_US
        short, short_n, big = 0, -1, None  # widest span known short (its count), narrowest known too full
        older_known = False  # a count found rows below a short window that its widening has not reached yet
        for _ in range(_WINDOW_STEPS):
            lower = anchor - span
            if lower < _FLOOR_US:
                break
            window = scope + upper + f" AND created_us > {lower}"
            n = self.store.count(window)
            if n > cap and span - short > 1:
                big = span
                span = _between(short, big) if short else max(1, min(span // 2, span * target // n))
                continue
            if n > short_n:
                older_known = False
            # Fewer than want and the last widening found none more: perhaps all there is.
            # (A first page's empty window is not: the speaker has memories somewhere.)
            settled = big is None and n <= short_n and not older_known and not (first_page and n == 0)
            if n >= want or settled:
                if n < want and self.store.count(scope + f" AND created_us <= {lower}"):
                    older_known = True
                else:
                    rows = self._newest_first(window, want)
                    if len(rows) >= want:
                        self._remember_span(hint_key, span, n, rows, target)
                        return rows
                    if n < want or not self.store.count(scope + f" AND created_us <= {lower}"):
                        return rows
                    n = len(rows)  # rows went away since the count: keep looking
            found_more = n > short_n
            short, short_n = span, n
            if big is not None:
                span = _between(short, big)
            elif n == 0 or not found_more:
                span *= _GROWTH
            else:  # as many times wider as the rows seen are short of a full window, assuming even density
                span *= min(_GROWTH, max(2, -(-max(target, want) // n)))
        if big is not None:
            rows = self._newest_first(scope + upper + f" AND created_us > {anchor - big}", want)
            if len(rows) >= want:
                return rows
        return self._newest_first(scope + upper, want)

    def _newest_first(self, where: str, limit: int) -> list[dict[str, Any]]:
        """A page's rows: record fields only (each column costs about a millisecond at 1M rows)."""
        order = (("created_us", False), ("seq", False))
        return self.store.rows(where, columns=(*RECORD_FIELDS, "seq"), order=order, limit=limit)

    def _remember_span(
        self, hint_key: tuple[str, str, bool], span: int, n: int, rows: list[dict[str, Any]], target: int
    ) -> None:
        """Keep the span that served this page as the next page's starting window.

        A first page's window is anchored at now, and the gap from now to a speaker's
        newest memory is no guide to the density further back, so it is kept as it was.
        A later page's span is scaled to hold about ``target`` rows.
        """
        key, name, first_page = hint_key
        if first_page:
            self._spans.put(hint_key, span)
            self._guess_later_span(key, name, rows, target)
        else:
            scaled = span * target // max(1, n)
            self._spans.put(hint_key, max(_MIN_HINT_US, span // _GROWTH, min(span * _GROWTH, scaled)))

    def _guess_later_span(self, key: str, name: str, rows: list[dict[str, Any]], target: int) -> None:
        """The later pages' first span, if none is known yet: from the older half of a first page."""
        if len(rows) < 2:
            return
        half = len(rows) // 2
        per_row = (rows[half]["created_us"] - rows[-1]["created_us"]) / max(1, len(rows) - 1 - half)
        self._spans.put((key, name, False), max(_MIN_HINT_US, int(per_row * target)), replace=False)

    def memory_recall(
        self, query: Any, limit: Any = 10, context_limit: Any = 10, user_id: Any = None
    ) -> dict[str, Any]:
        """Prompt-ready context: recent turns, the best memories, the conversation around the best."""
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        limit = v.integer(limit, field="limit", low=5, high=20)
        context_limit = v.integer(context_limit, field="context_limit", low=0, high=20)
        key, display = self._resolve(user_id)
        memories = self.memory_search(text, limit=limit, user_id=user_id)["memories"]
        around: list[str] = []
        if memories and context_limit:
            top = self._memory_row(key, memories[0]["id"])
            same = in_store(key) + " AND chunk_idx = 0 AND NOT superseded"
            if top["conversation_id"] is not None:
                same += f" AND conversation_id = {quote(top['conversation_id'])}"
            else:
                same += f" AND seq >= {top['seq'] - context_limit} AND seq <= {top['seq'] + context_limit}"
            rows = self.store.rows(same, order=(("seq", True),))
            around = [context_line(pos, row) for pos, row in context_window(rows, top["memory_id"], context_limit)]
        turns = self.store.rows(
            in_store(key) + " AND chunk_idx = 0 AND role IS NOT NULL", order=(("seq", False),), limit=context_limit
        ) if context_limit else []
        return {
            "user_id": display,
            "short_term": {"turns": [_turn(row) for row in reversed(turns)]},
            "long_term": {"memories": memories},
            "context": {"around_top_memory": around},
        }

    def memory_get(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        mid = v.label(memory_id, field="memory_id")
        key, _ = self._resolve(user_id)
        return {"memory": memory_record(self._memory_row(key, mid))}

    def memory_list(self, limit: Any = 100, cursor: Any = None, user_id: Any = None) -> dict[str, Any]:
        limit = v.integer(limit, field="limit", low=1, high=500)
        after = _parse_cursor(cursor)
        key, display = self._resolve(user_id)
        where = in_store(key) + f" AND chunk_idx = 0 AND seq > {after}"
        rows = self.store.rows(where, order=(("seq", True),), limit=limit + 1)
        page = rows[:limit]
        more = len(rows) > limit and page
        return {
            "user_id": display,
            "memories": [memory_record(r) for r in page],
            "count": len(page),
            "next_cursor": str(page[-1]["seq"]) if more else None,
        }


# -- by_speaker's window (MemoryService._newest_said) ----------------------------------------------

_COLD_SPAN_US = 86_400_000_000  # a day: the first window for a speaker not seen yet
_GROWTH = 16  # most a window widens (or narrows, going by density) in one step
_WINDOW_STEPS = 24  # counts before giving up on windows (bisection halves a range per step)
_MIN_HINT_US = 1_000
_FLOOR_US = to_us(datetime(1, 1, 1, tzinfo=timezone.utc))  # no timestamp is older (SPEC dates: years 0001-9999)


def _between(short: int, big: int) -> int:
    """A span between a known-short and a known-too-full one (geometric while far apart)."""
    if big - short <= 1:
        return big
    middle = math.isqrt(short * big) if short and big > 4 * short else (short + big) // 2
    return min(big - 1, max(short + 1, middle))


class _SpanHints:
    """Per (store, speaker, first page or not): the window span to try first. Bounded, thread-safe."""

    def __init__(self, size: int = 4096) -> None:
        self._spans: OrderedDict[tuple[str, str, bool], int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, bool]) -> int | None:
        with self._lock:
            span = self._spans.get(key)
            if span is not None:
                self._spans.move_to_end(key)
            return span

    def put(self, key: tuple[str, str, bool], span: int, *, replace: bool = True) -> None:
        with self._lock:
            if not replace and key in self._spans:
                return
            self._spans[key] = span
            self._spans.move_to_end(key)
            while len(self._spans) > self._size:
                self._spans.popitem(last=False)


def _turn(row: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": row["role"], "content": row["content"]}
    if row["speaker"] is not None:
        turn["speaker"] = row["speaker"]
    turn["timestamp"] = format_us(row["created_us"])
    return turn


def _parse_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not re.fullmatch(r"[0-9]{1,18}", cursor):
        raise InvalidRequestError("cursor must be a next_cursor from an earlier memory_list", field="cursor")
    return int(cursor)



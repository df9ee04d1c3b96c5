"""``by_speaker``: a speaker's memories, newest first, a page at a time.

A page is exactly what ``rows(scope, order=(created_us desc, seq desc), limit=want)``
gives, but LanceDB sorts every row its filter matches, and a speaker's whole scope is
slow to sort (720 ms for 320k memories at 1M rows). So only a time window
``lower < created_us <= before`` is sorted (just ``lower < created_us`` on a first page:
memories may carry future dates); ``_WindowSearch`` finds one that gives the same page.

Why a window gives the same answer: every row outside it has ``created_us <= lower``,
so it is older than every row inside it. When the window holds at least ``want`` rows,
its newest ``want`` (ties by seq included: a tie never straddles ``lower``) are
therefore the newest ``want`` overall. When it holds fewer, they are the whole answer
only once a count has found no row at or below ``lower`` (made after the window was
sized, so any row that exists throughout is seen); otherwise the window widens. A
window reaching below year 1, where no timestamp is, is dropped for the unbounded query,
and so is a window that never settles.

The window is sized by counting it first (indexes: ~3 ms, growing with the table rows in
the time range) before it is sorted (~3 µs per row in it): more than ``window_cap`` rows
and it narrows, fewer than ``want`` and it widens (at most ×16, by the density seen),
bisecting once both a short and a too-full span are known. It starts from the span that
served this speaker last (first page and later pages apart; a later page's scaled to hold
about ``window_cap // 8`` rows), else from a day. That memory is a hint only: another
process may have written or deleted since; correctness never rests on it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from wontopos_mcp.contract import operation
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.answers import JSON, BySpeakerAnswer, MemoryRecord
from wontopos_mcp.rules.dates import format_us, parse_moment, to_us
from wontopos_mcp.rules.names import check_speaker
from wontopos_mcp.rules.records import memory_record
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import FIRST_CHUNK, created_after, created_by, not_among, said_by

from .history import History

if TYPE_CHECKING:
    from .memories import Memories
    from .registry import Registry

Row = ChunkRow
HintKey = tuple[str, str, bool]  # (store, speaker, first page or not)

_COLD_SPAN_US = 86_400_000_000  # a day: the first window for a speaker not seen yet
_GROWTH = 16  # most a window widens (or narrows, going by density) in one step
_WINDOW_STEPS = 24  # counts before giving up on windows (bisection halves a range per step)
_MIN_HINT_US = 1_000
_FLOOR_US = to_us(datetime(1, 1, 1, tzinfo=timezone.utc))  # no timestamp is older: dates run from year 0001


PAGE_LIMIT = operation("by_speaker").param("limit")  # range and default: the contract table's


@dataclass(frozen=True)
class Page:
    """One page of memories, newest first, and where the next one starts."""

    memories: list[MemoryRecord]
    has_more: bool
    next_before: str | None
    next_skip_ids: list[str]


class SpeakerPages:
    def __init__(self, registry: Registry, memories: Memories, *, window_cap: int, now_us: Callable[[], int]) -> None:
        self.registry = registry
        self.memories = memories
        self.window_cap = window_cap  # most rows a time window may hold before it narrows
        self.spans = SpanHints()
        self.history = History(memories.store)
        self._now_us = now_us

    def by_speaker(
        self,
        speaker: JSON,
        limit: JSON = PAGE_LIMIT.default,
        before: JSON = None,
        skip_ids: JSON = None,
        user_id: JSON = None,
    ) -> BySpeakerAnswer:
        name = check_speaker(speaker)
        limit = PAGE_LIMIT.integer(limit)
        before_us = None if before is None else parse_moment(before, field="before")[0]
        skip = [] if skip_ids is None else v.string_list(skip_ids, field="skip_ids", max_items=v.MAX_SKIP_IDS)
        handle = self.registry.resolve(user_id, [(name, "speaker")], writing=False)
        chunks = self.memories.count(said_by(handle.key, name))
        memories = self.memories.count_memories(said_by(handle.key, name)) if chunks else 0
        rows = self.newest_said(handle.key, name, before_us, skip, limit + 1, chunks) if chunks else []
        page = self.page(handle.key, rows, limit, before_us, skip)
        return {
            "user_id": handle.display,
            "speaker": name,
            "memories": page.memories,
            "returned": len(page.memories),
            "chunks": chunks,
            "records_to_delete": chunks,
            "points_to_delete": chunks,
            "memories_to_delete": memories,
            "has_more": page.has_more,
            "next_before": page.next_before,
            "next_skip_ids": page.next_skip_ids,
        }

    def page(self, key: str, rows: list[Row], limit: int, before_us: int | None, skip: list[str]) -> Page:
        """One page of ``rows`` (newest first, ``limit + 1`` asked for) with the cursor to
        the next (``next_before``: the last ``created_at``; ``next_skip_ids``: the ids
        already returned at it, those carried from ``skip`` included)."""
        kept, has_more = rows[:limit], len(rows) > limit
        next_before, next_skip = None, []
        if has_more and kept:
            last = kept[-1]["created_us"]
            next_before = format_us(last)
            carried = skip if before_us == last else []
            next_skip = carried + [r["memory_id"] for r in kept if r["created_us"] == last]
        return Page(self.history.dated(key, [memory_record(r) for r in kept]), has_more, next_before, next_skip)

    def newest_said(
        self, key: str, name: str, before_us: int | None, skip: list[str], want: int, chunks: int
    ) -> list[Row]:
        """The speaker's newest ``want`` memories at or before ``before_us``, not in ``skip``
        (the module docstring says how, and why it is exact); ``chunks``: the speaker's
        chunk rows, just counted."""
        return self.newest(key, name, said_by(key, name) + FIRST_CHUNK, before_us, skip, want, chunks)

    def newest(
        self, key: str, name: str, scope: str, before_us: int | None, skip: list[str], want: int, rows_in_scope: int
    ) -> list[Row]:
        """The newest ``want`` memories of ``scope`` (one row per memory) at or before
        ``before_us``, not in ``skip``; ``name`` keys the window hints (a speaker, or a
        name no speaker can have), ``rows_in_scope`` is how many rows ``scope`` holds."""
        first_page = before_us is None
        scope += not_among(skip)
        target = max(1, self.window_cap // 8)
        if first_page and rows_in_scope <= self.window_cap:
            rows = self.memories.newest_first(scope, want)  # few rows: sorting them all is cheap
            self._guess_later_span(key, name, rows, target)
            return rows
        hint: HintKey = (key, name, first_page)
        search = _WindowSearch(
            self.memories, scope, before_us, self._now_us() if before_us is None else before_us,
            want=want, cap=self.window_cap, target=target, span=self.spans.get(hint) or _COLD_SPAN_US,
        )  # fmt: skip
        rows, served = search.run()
        if served is not None:
            self._remember_span(hint, *served, rows, target)
        return rows

    def _remember_span(self, hint: HintKey, span: int, n: int, rows: list[Row], target: int) -> None:
        """Keep the span that served this page as the next page's starting window.

        A first page's window is anchored at now, and the gap from now to a speaker's
        newest memory is no guide to the density further back, so it is kept as it was.
        A later page's span is scaled to hold about ``target`` rows.
        """
        key, name, first_page = hint
        if first_page:
            self.spans.put(hint, span)
            self._guess_later_span(key, name, rows, target)
        else:
            scaled = span * target // max(1, n)
            self.spans.put(hint, max(_MIN_HINT_US, span // _GROWTH, min(span * _GROWTH, scaled)))

    def _guess_later_span(self, key: str, name: str, rows: list[Row], target: int) -> None:
        """The later pages' first span, if none is known yet: from the older half of a first page."""
        if len(rows) < 2:
            return
        half = len(rows) // 2
        per_row = (rows[half]["created_us"] - rows[-1]["created_us"]) / max(1, len(rows) - 1 - half)
        self.spans.put((key, name, False), max(_MIN_HINT_US, int(per_row * target)), replace=False)


class _WindowSearch:
    """One page's search for a window ``anchor - span < created_us (<= before)``.

    State: ``short`` is the widest span known to hold too few rows (``short_n`` of them),
    ``big`` the narrowest known to hold more than ``cap``; ``older_known`` says a count
    found rows below a short window that its widening has not reached yet.
    """

    def __init__(
        self, memories: Memories, scope: str, before_us: int | None, anchor: int,
        *, want: int, cap: int, target: int, span: int,
    ) -> None:  # fmt: skip
        self.memories = memories
        self.scope = scope
        self.first_page = before_us is None
        self.upper = "" if before_us is None else created_by(before_us)
        self.anchor = anchor
        self.want, self.cap, self.target = want, cap, target
        self.span = span
        self.short, self.short_n = 0, -1
        self.big: int | None = None
        self.older_known = False

    def run(self) -> tuple[list[Row], tuple[int, int] | None]:
        """(the page's rows, (span, rows counted) of the window that served it, if one did)."""
        for _ in range(_WINDOW_STEPS):
            lower = self.anchor - self.span
            if lower < _FLOOR_US:
                break
            window = self.scope + self.upper + created_after(lower)
            n = self.memories.count(window)
            if n > self.cap and self.span - self.short > 1:
                self._narrow(n)
                continue
            if n > self.short_n:
                self.older_known = False
            if n >= self.want or self._maybe_all(n):
                found = self._sort(window, lower, n)
                if isinstance(found, tuple):
                    return found
                n = found
            self._widen(n)
        return self._fallback(), None

    def _maybe_all(self, n: int) -> bool:
        """Fewer than want and the last widening found none more: perhaps all there is.
        (A first page's empty window is not: the speaker has memories somewhere.)"""
        return self.big is None and n <= self.short_n and not self.older_known and not (self.first_page and n == 0)

    def _older(self, lower: int) -> int:
        return self.memories.count(self.scope + created_by(lower))

    def _sort(self, window: str, lower: int, n: int) -> tuple[list[Row], tuple[int, int] | None] | int:
        """Sort the window if it gives the page: the answer, else the row count to widen by."""
        if n < self.want and self._older(lower):
            self.older_known = True
            return n
        rows = self.memories.newest_first(window, self.want)
        if len(rows) >= self.want:
            return rows, (self.span, n)
        if n < self.want or not self._older(lower):
            return rows, None
        return len(rows)  # rows went away since the count: keep looking

    def _narrow(self, n: int) -> None:
        self.big = self.span
        self.span = (
            _between(self.short, self.big) if self.short else max(1, min(self.span // 2, self.span * self.target // n))
        )

    def _widen(self, n: int) -> None:
        found_more = n > self.short_n
        self.short, self.short_n = self.span, n
        if self.big is not None:
            self.span = _between(self.short, self.big)
        elif n == 0 or not found_more:
            self.span *= _GROWTH
        else:  # as many times wider as the rows seen are short of a full window, assuming even density
            self.span *= min(_GROWTH, max(2, -(-max(self.target, self.want) // n)))

    def _fallback(self) -> list[Row]:
        """No window settled: the narrowest too-full one if it still holds a page, else all."""
        if self.big is not None:
            rows = self.memories.newest_first(
                self.scope + self.upper + created_after(self.anchor - self.big), self.want
            )
            if len(rows) >= self.want:
                return rows
        return self.memories.newest_first(self.scope + self.upper, self.want)


def _between(short: int, big: int) -> int:
    """A span between a known-short and a known-too-full one (geometric while far apart)."""
    if big - short <= 1:
        return big
    middle = math.isqrt(short * big) if short and big > 4 * short else (short + big) // 2
    return min(big - 1, max(short + 1, middle))


class SpanHints:
    """Per (store, speaker, first page or not): the window span to try first. Bounded, thread-safe."""

    def __init__(self, size: int = 4096) -> None:
        self._spans: OrderedDict[HintKey, int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: HintKey) -> int | None:
        with self._lock:
            span = self._spans.get(key)
            if span is not None:
                self._spans.move_to_end(key)
            return span

    def put(self, key: HintKey, span: int, *, replace: bool = True) -> None:
        with self._lock:
            if not replace and key in self._spans:
                return
            self._spans[key] = span
            self._spans.move_to_end(key)
            while len(self._spans) > self._size:
                self._spans.popitem(last=False)

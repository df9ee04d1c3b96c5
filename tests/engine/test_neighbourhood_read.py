"""The neighbourhood read of ``engine.ranking`` (issue 29): the memories said around the
candidates in their conversations are read in one of two forms, the whole conversations or
the stretches of write order around each candidate, and both give the same neighbours,
the same neighbour candidates (rows, cosines) and the same replies as the definition does:
the memory just before or after in the conversation, at most ``NEIGHBOUR_SPAN`` apart, of
the store's memories as the search reads them (current ones, or those of an ``as_of``
moment). The scoring reads nothing else, so the ranking cannot change.

The store has conversations whose turns interleave in write order, notes without a
conversation between them, a forgotten and a superseded memory, and one long
conversation, for which the whole read would be larger than the windows: the guard takes
the windows there. Everything is real: LanceDB on disk and the session's model.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import pytest
from support import SteppableClock

from wontopos_mcp.engine import ranking
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules.names import DEFAULT_STORE, store_key
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import created_by, search_scope

TOPICS = [
    "the trip to Lisbon in May", "the new aquarium downtown", "a bike chain that snapped", "the dentist on Friday",
    "repainting the kitchen", "the picnic games", "charades and a scavenger hunt", "sandwiches for the picnic",
    "the deadline for the report", "the tools for the garden", "a concert in Porto", "the cat's vet visit",
]  # fmt: skip
PEOPLE = ("Alice", "Bob", "Carol")
WHOLE, WINDOWS = 10**9, 0  # ``whole_rows`` that force each form


def _write(service: MemoryService, clock: SteppableClock) -> dict[str, Any]:
    """Three conversations interleaved turn by turn, a note without a conversation every
    fifth memory, then one long conversation; a forgotten and a superseded memory after a
    moment ``before`` (microseconds) that an ``as_of`` search reads as it stood."""
    for name in PEOPLE:
        service.speaker_register(name)
    items = []
    for i in range(60):
        text = f"Turn {i}: {PEOPLE[i % 3]} talks about {TOPICS[i % len(TOPICS)]}, item {i * 7 % 11}."
        conversation = None if i % 5 == 4 else f"c{i % 3}"
        items.append({"content": text, "speaker": PEOPLE[i % 3], "conversation_id": conversation})
    items += [
        {"content": f"Long {i}: {PEOPLE[i % 2]} on {TOPICS[(i * 5) % len(TOPICS)]}, step {i}.",
         "speaker": PEOPLE[i % 2], "conversation_id": "long"}
        for i in range(120)
    ]  # fmt: skip
    answer = service.memory_add_batch(items)
    assert answer["count"] == len(items), answer
    ids = answer["ids"]
    clock.advance(minutes=1)
    before = int(clock().timestamp() * 1e6)
    clock.advance(minutes=1)
    service.memory_forget(memory_id=ids[6])  # c0, between two of its turns
    service.memory_supersede(memory_id=ids[10], content="Turn 10, corrected: Bob talks about the museum.")
    return {"ids": ids, "before": before}


Oracle = tuple[dict[str, tuple[str, int]], dict[str, list[tuple[int, str]]]]


def _oracle(store: Store, base: str) -> Oracle:
    """Every conversation of ``base`` in write order, read whole: (each memory's
    conversation and place in it, each conversation's (seq, memory id))."""
    lines: dict[str, list[tuple[int, str]]] = {}
    for row in store.chunks.rows(base + " AND chunk_idx = 0", columns=("memory_id", "conversation_id", "seq")):
        if row["conversation_id"] is not None:
            lines.setdefault(row["conversation_id"], []).append((row["seq"], row["memory_id"]))
    lines = {c: sorted(line) for c, line in lines.items()}
    return {mid: (c, at) for c, line in lines.items() for at, (_, mid) in enumerate(line)}, lines


def _expected(oracle: Oracle, row: ChunkRow, offsets: Collection[int]) -> list[tuple[int, str]]:
    """The neighbours by definition: same conversation, at these offsets, within the span."""
    place, lines = oracle
    if row["memory_id"] not in place:
        return []
    conversation, at = place[row["memory_id"]]
    line = lines[conversation]
    return [
        (offset, line[at + offset][1])
        for offset in offsets
        if 0 <= at + offset < len(line) and abs(line[at + offset][0] - row["seq"]) <= ranking.NEIGHBOUR_SPAN
    ]


def _plain_row(row: ChunkRow) -> dict[str, Any]:
    """A row with its vector (a numpy row) as a tuple, so rows compare with ``==``."""
    return {k: tuple(v) if k == "vector" else v for k, v in row.items()}


def _plain(found: Any, newcomers: dict[str, ranking.Candidate]) -> Any:
    return found, {m: (_plain_row(c.row), c.dense, c.bm25, c.in_scope) for m, c in newcomers.items()}


def _candidates(store: Store, vector: Any, query: str, where: str, context: str) -> tuple[dict[str, Any], list[Any]]:
    """The candidates and reply seeds ``search_memories`` would have (the same calls)."""
    scope_rows = store.chunks.count(where)
    found = ranking.candidate_searches(store, lambda: vector, query, where, 40, scope_rows=scope_rows, context=context)
    candidates = ranking.dense_candidates(store, vector, where, 10, scope_rows, first=found.nearest)
    ranking.add_bm25(vector, found.matches, candidates)
    return candidates, found.context_matches


@pytest.mark.slow
@pytest.mark.parametrize("speaker", ["Alice", "Bob", None])
@pytest.mark.parametrize("moment", ["now", "as_of"])
def test_both_reads_give_the_neighbours_and_replies_the_definition_gives(
    make_service: Callable[..., MemoryService], clock: SteppableClock, embedder: Any, speaker: str | None, moment: str
) -> None:
    service = make_service(clock=clock)
    written = _write(service, clock)
    store = service.memories.store
    key = store_key(DEFAULT_STORE)
    if moment == "now":
        where, context = search_scope(key, speaker, False, []), search_scope(key, None, False, [])
    else:  # every version stored by then: the forgotten and superseded ones are still there
        where = search_scope(key, speaker, True, []) + created_by(written["before"])
        context = search_scope(key, None, True, []) + created_by(written["before"])
    oracle = _oracle(store, context)
    forms_seen = set()
    replied: dict[str, Any] = {}
    left_out: set[str] = set()
    for query in ("Lisbon in May", "What did they say about the picnic games?", "the deadline", "step 42"):
        vector = embedder.embed_query(query)
        candidates, seeds = _candidates(store, vector, query, where, context)
        # One read for both (as a search makes it), in either form, or each its own.
        shared = {
            rows: ranking.Lines.around_replies(
                store, [c.row for c in candidates.values()], ranking.reply_seeds(seeds, candidates), context,
                whole_rows=rows, scope=where,
            )
            for rows in (WINDOWS, WHOLE)
        }  # fmt: skip
        replies = {
            rows: ranking.replies(store, vector, seeds, where, dict(candidates), base=context, whole_rows=rows)
            for rows in (None, WINDOWS, WHOLE)
        }
        for rows, lines in shared.items():
            replies[("shared", rows)] = ranking.replies(store, vector, seeds, where, dict(candidates), lines=lines)
        as_plain = [{m: (_plain_row(c.row), c.dense) for m, c in got.items()} for got in replies.values()]
        assert all(got == as_plain[0] for got in as_plain), query
        # By definition: the next memory of each seed's conversation, within the span, not a
        # candidate, and in scope as a filtered read of ``where`` says.
        in_where = {row["memory_id"] for row in store.chunks.rows(where, columns=("memory_id",))}
        said_next = {
            mid
            for seed in ranking.reply_seeds(seeds, candidates)
            for _, mid in _expected(oracle, seed, ranking.REPLY_OFFSETS)
        }
        assert set(replies[None]) == (said_next - set(candidates)) & in_where, query
        assert all(c.in_scope for c in replies[None].values())
        replied.update(replies[None])
        left_out |= said_next - set(candidates) - in_where
        candidates.update(replies[None])
        found = {
            rows: _plain(*ranking.neighbours(store, vector, candidates, {}, base=context, whole_rows=rows))
            for rows in (None, WINDOWS, WHOLE)
        }
        for rows, lines in shared.items():
            found[("shared", rows)] = _plain(*ranking.neighbours(store, vector, candidates, {}, lines=lines))
        assert all(got == found[None] for got in found.values()), query
        assert {lines.whole for lines in shared.values()} == {False, True}  # both forms were read
        for mid, c in candidates.items():
            assert found[None][0][mid] == _expected(oracle, c.row, ranking.NEIGHBOUR_WEIGHTS), (query, mid)
        assert any(found[None][0].values()), query  # the premise: some candidates have neighbours
        lines = ranking.Lines(store, key, [c.row for c in candidates.values()], base=context)
        forms_seen.add(lines.whole)
    if speaker is not None:  # the premise: some replies were found, and some left out by the filter
        assert replied
        assert left_out
    assert written["ids"][6] not in oracle[0]  # forgotten: gone at every moment
    assert (written["ids"][10] in oracle[0]) == (moment == "as_of")  # superseded: a neighbour only as it stood
    assert True in forms_seen  # these candidates' conversations are small enough to read whole


@pytest.mark.slow
def test_a_long_conversation_is_read_by_its_windows_with_the_same_neighbours(
    make_service: Callable[..., MemoryService], clock: SteppableClock, embedder: Any
) -> None:
    service = make_service(clock=clock)
    _write(service, clock)
    store = service.memories.store
    key = store_key(DEFAULT_STORE)
    context = search_scope(key, None, False, [])
    oracle = _oracle(store, context)
    long = sorted(
        store.chunks.rows(context + " AND conversation_id = 'long' AND chunk_idx = 0"), key=lambda r: r["seq"]
    )
    vector = embedder.embed_query("step 42")
    # Three turns far apart in a conversation of 120: their windows hold ~99 memories, fewer
    # than the conversation, so the default read takes the windows.
    turns = (long[5], long[60], long[110])
    keys = ranking.CANDIDATE_KEYS
    picked = {r["memory_id"]: ranking.Candidate(ChunkRow(**{k: r[k] for k in keys}), 0.5) for r in turns}
    lines = ranking.Lines(store, key, [c.row for c in picked.values()], base=context)
    assert not lines.whole
    assert ranking.Lines(store, key, [c.row for c in picked.values()], base=context, whole_rows=WHOLE).whole
    found = {
        rows: _plain(*ranking.neighbours(store, vector, dict(picked), {}, base=context, whole_rows=rows))
        for rows in (None, WINDOWS, WHOLE)
    }
    assert found[None] == found[WINDOWS] == found[WHOLE]
    for mid, c in picked.items():
        assert found[None][0][mid] == _expected(oracle, c.row, ranking.NEIGHBOUR_WEIGHTS) != []
    # The whole search on it ranks as before, every result in scope.
    said = service.memory_search("step 42", speaker="Bob", limit=10)["memories"]
    assert len(said) == 10
    assert {m["speaker"] for m in said} == {"Bob"}

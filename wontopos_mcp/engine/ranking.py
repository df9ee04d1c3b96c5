"""Ranking memories for a query inside an exact scope: hybrid retrieval.

The scope (store, speaker, superseded, filters) is a LanceDB prefilter on every
candidate search, so nothing outside it is ever returned, and the answer has exactly
min(limit, memories in scope) memories, each once, best first.

Ranking, as measured on three public conversation sets of different shapes at once
(``../shared/eval/dev_sets.py``: LoCoMo, two people; FriendsQA, a sitcom's ~13 speakers;
LongMemEval, a user and an assistant over ~48 sessions): a signal stays only when the
mean over the sets rises and no set falls (figures beside each constant). Context comes
only from the memory's own conversation (the memories with the same ``conversation_id``,
in write order); a memory stored without one borrows from nothing and lends to nothing.

1. Candidates: the nearest chunks by cosine (e5 ``query:``/``passage:``) and the best
   memories by BM25 (LanceDB full text, ICU tokenizer; a memory is one document, on
   its first chunk, see ``text.full_text``; a query with Hangul, kana or Han also
   matches character bigrams of those runs, so "부산" finds "부산에서", see
   ``chunk_search.full_text_query``), both inside the scope. A memory's cosine is its
   best chunk's.
   Under a narrower scope (a speaker filter), the in-scope memory said right after
   each of the best full-text matches in the whole store (current memories, the
   ``context``) in the same conversation joins them: the reply to the other person's
   question that matches ("what games did you play?" -> "charades and a scavenger hunt")
   may share no word with the query and be far from it by cosine.
2. Score fusion: each signal is standardised over the candidates (raw cosines all sit
   near 0.8, so unstandardised fusion hurts), then ``0.3 * bm25 + 0.7 * dense``.
3. Neighbour propagation: a memory also gets a share of the fused score of the
   memories said just before and after it in the same conversation, whoever said them
   (their full-text score from a second search over ``context`` when they are outside
   the scope): the answer to "what did Bob say about X" often sits next to the turn that
   mentions X. Neighbours only add score; they are never returned unless they are in
   scope (known only when the scope is every current memory). Nothing is stored for it,
   so a forgotten or superseded memory lends nothing the moment it is gone.
4. Session lift: a memory gains a share of the best fused score in its conversation
   (its own included; neighbours that only lend count too): a question is mostly about
   one episode, and the best match tells which. A memory without a conversation is a
   conversation of one: it lifts itself as a conversation's best memory does.
5. Without a speaker filter, memories of a speaker the query names get
   ``NAMED_SPEAKER_BOOST`` (the name itself is dropped from the query by the caller).
6. A selection that covers: the results are chosen one at a time among the best few,
   each next one the best once its closeness to those already chosen counts against it
   (``COVERAGE``): an answer spread over several turns (everything a person said about
   something) is found in more of its parts, and a question about one fact keeps it first.

Measured and dropped (issue 21): the previous memory's full-text score added to a
memory's own ("contextual BM25": dropping it raised FriendsQA 71.1 -> 73.3 R@5 with the
filter and LoCoMo 79.3 -> 79.6); a penalty on each further result from one conversation
(0.1 / 0.3 / 0.6 lowered both sets); neighbours only around the best 10 / 20 candidates
(LoCoMo 79.0 -> 74.2 / 75.0). (LoCoMo 4-5 conversations and FriendsQA 6-7 episodes.)
Kept although it costs time: the replies of step 1 (without them LoCoMo 79.5 -> 78.9).
Measured and dropped (issue 29, bench/ranking_replay.py over a full dump of the three sets;
none raised every set, none moved the questions with several evidence turns by more than
about one point): the query moved towards its best matches' vectors (pseudo-relevance
feedback: LoCoMo 79.7 -> 79.0 with the filter); a session lift of 0.4 / 0.8, or the mean of a
conversation's best two; a conversation's lift shrinking with each result already taken
from it (LoCoMo without a filter 71.3 -> 67.8); a penalty on a turn next to a chosen one;
two more candidates from each conversation; a candidate floor of 120; the fusion at 0.4 /
0.6 (FriendsQA without a filter 43.9 -> 45.8, LongMemEval with the filter 87.9 -> 84.5);
each of these only for questions with English cues of asking for several things; a
ranker fitted on the candidates' features (no gain on the held-out half). Later (a full
dump of stop 49; each moved a set down): a memory's cosine partly that of its chunks' mean
vector (FriendsQA 72.0 -> 72.8, LongMemEval with the filter 89.7 -> 87.9); a prior for
longer turns; the named speaker's boost at 0.5 / 1.5 / 2; other neighbour weights, spans
and reply seeds; the conversations with the most full-text score among the context's
matches adding their best turns (LongMemEval without a filter 71.3 -> 74.7, FriendsQA with
the filter 72.0 -> 71.7) or lifting their turns. Later still (the same dump, stop 50), with
a session-level source's turns added after the full-text matches and the replies, where a
product would add them (the LongMemEval gain above came from adding them before; after, it
stays 71.3): the conversations nearest the query by their mean vector adding their best
turns (2 or 4 conversations: LoCoMo with the filter 80.0 -> 79.9, FriendsQA 72.0 -> 71.7) or
lifting their turns (0.2: LongMemEval with the filter 89.7 -> 87.9); either source's turns
scored against the other candidates without joining their standardisation (every set within
+0.1: not worth a read); the full-text matches that are no dense candidate kept out of it
(LoCoMo 80.0 / 71.3 -> 79.3 / 69.5); each signal standardised by its median and deviation,
its range or its best 10 / 20 (LongMemEval with the filter 89.7 -> 74.1-87.9); a share of the
same speaker's turn before (0.2: LongMemEval 89.7 / 71.3 -> 87.9 / 69.5).

Measured and dropped (issue 51, bench/ranking_replay.py over dumps of the three full dev
sets; R@5 with the speaker filter / without): a memory of several sentences also embedded
whole, as one more chunk read by search like any other ("whole rows", what a turn-level
index such as LanceDB's own hybrid search over turns sees): LoCoMo 80.0 / 71.3 -> 80.6 /
72.8, FriendsQA 71.5 / 45.0 -> 73.3 / 46.8 (the product itself, end to end: 72.3 / 46.7),
but LongMemEval 89.7 / 71.3 -> 86.2 / 73.0 (29 questions: one question falls with the
filter). From 3 chunks, or 200 characters: LongMemEval 91.4 / 69.5 (falls without a
filter); from 5 chunks: unchanged; from 400 characters: 89.7 / 69.5. The whole text's
cosine as a share of a memory's (0.2, 0.3, 0.5): LongMemEval 87.9 / 69.5, 86.8 / 73.0; the
larger of the two: 84.5 / 74.7. None raises every set. LanceDB's hybrid search itself
(replayed: reciprocal-rank fusion of whole-turn cosine and these full-text ranks, inside
the scope) stands at LoCoMo 69.3 / 58.9, FriendsQA 69.0 / 41.2, LongMemEval 89.7 / 78.2.
Where LongMemEval loses without a filter (5 of its 29 questions, looked at one by one):
the person's turn that holds the answer ranks 6th to 11th under the assistant's long
replies of the same sessions (20 to 43 chunks each). Each of these leaves its figure at
71.3 or below, or lowers the filter's 89.7 (LongMemEval alone, the first set each fails):
a cosine lowered for the chance that the best of many chunks is high (0.005 to 0.03 per
sqrt(2 ln chunks): 85.1-86.8 / 71.3); no neighbour or session lift (87.9 / 69.0), nor the
covering selection besides (86.8 / 66.1); reciprocal-rank fusion in place of the
standardised scores (k = 60: 81.6 / 59.8; k = 20: 89.7 / 66.7; without the context
signals: 86.8 / 74.7); fusion at 0.5 / 0.5 (86.2 / 73.0); a bonus for a candidate among
both the 10 best by cosine and the 10 best by full text (87.9 / 69.5); the whole text's
cosine alone for memories of 4, 8 or 20 chunks or more (84.5-85.1 / 67.8-73.0: the
assistant's replies lend their score to the person's turns around them even under the
filter).

``similarity`` in answers stays the cosine of the best chunk; the order is the score's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wontopos_mcp.rules.records import RECORD_FIELDS
from wontopos_mcp.storage.chunk_search import Found
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import in_conversations, memories_in, search_scope, seq_windows

if TYPE_CHECKING:
    from wontopos_mcp.model.embeddings import Embedder
    from wontopos_mcp.storage.adapter import Store

BM25_WEIGHT = 0.3
DENSE_WEIGHT = 0.7
# Share of a neighbour's fused score, by position relative to the memory: the turn
# before counts more than the turn after, and distance 2 half as much as distance 1.
# Measured on bench/data/retrieval.json (R@1 / R@5 / MRR, speaker filter on): none
# 0.56/0.90/0.695; {-1: .3, +1: .2, -2: .15, +2: .1} 0.61/0.96/0.768; {-1: .5, +1: .1}
# 0.71/0.97/0.833; {-1: .7} 0.80/0.97/0.882. That set leans on answers that follow
# the other person's question (48 of 70), so the middle setting is the one kept.
NEIGHBOUR_WEIGHTS = {-1: 0.5, 1: 0.1}
NEIGHBOUR_SPAN = 16  # how far (in store order) a conversation's neighbours are looked for
# Added to the (standardised) score of a memory said by a speaker the query names, when
# there is no speaker filter: "what did Bob say about X" leans towards Bob's words.
# LoCoMo raw/nofilter R@5 (5 conversations): none 57.3, 0.5 68.2, 1.0 69.8; without
# dropping the name from the query 1.0 gives 60.1. bench/retrieval.py: 0.5 hurt, 1.0 helped.
NAMED_SPEAKER_BOOST = 1.0
# Share of the best fused score in a memory's conversation added to its own. dev_sets
# replica (LoCoMo 5 conversations / FriendsQA 7 episodes, R@5 with the filter,
# contextual BM25 dropped): 0: 77.9 / 71.2; 0.2: 78.7 / 72.2; 0.4: 79.6 / 73.3; 0.6:
# 80.1 / 73.2; 0.8: 80.5 / 72.2 (FriendsQA falls: not kept). 0.6 against the product
# before issue 21 (0.4 with contextual BM25) on LoCoMo 6 / FriendsQA 9 / LongMemEval 8
# whole histories: filter 78.6 / 69.8 / 100 -> 79.5 / 71.7 / 100, no filter 70.3 / 43.0
# / 87.5 -> 71.5 / 43.9 / 93.8.
SESSION_LIFT = 0.6
# How many of the best full-text matches outside a narrower scope (the context search,
# made anyway) have their in-scope replies made candidates. LoCoMo R@5 (all 10, replica):
# raw/filter 77.5 -> 78.7 and nonames/filter+qnonames 76.8 -> 78.0, with 5, 10 or 20
# seeds alike. The 20 nearest chunks by cosine as seeds (a fourth search) measured 78.6
# / 78.1, and both together 78.7 / 78.1, but cost 1.2-1.5x the search at 100k
# (bench/scale.py); the memory said before a seed too, nothing.
REPLY_SEEDS = 10
REPLY_OFFSETS = (1,)
# The selection that covers (``covering``): a result's closeness to those chosen before it,
# standardised over the candidates left, weighs this much against its score, among the best
# ``limit`` + ``COVERAGE_POOL``. bench/ranking_replay.py over a full dump of the three sets
# (R@5 with the speaker filter / without; LoCoMo / FriendsQA / LongMemEval): none 79.7 / 71.28,
# 71.7 / 43.9, 87.9 / 70.1; 0.1 among 20 more: 80.0 / 71.30, 72.0 / 44.9, 89.7 / 71.3 (several
# evidence turns 46.4 -> 47.0 / 39.9 -> 40.2 and 86.4 -> 90.9 / 66.7 -> 69.7, one turn no
# fall); 0.1 among 10 more: LoCoMo without a filter 71.26 (falls); 0.15: 71.2; 0.2: LongMemEval
# with the filter 86.2 (falls); over every candidate (no pool) alike. With the fusion 0.4 / 0.6
# as well, LongMemEval with the filter fell to 84.5-86.2.
COVERAGE = 0.1
COVERAGE_POOL = 20
_CANDIDATE_FLOOR = 40
# What candidate searches read: every column read costs time for each row (at 1M rows,
# 40 nearest chunks with all memory fields took 80 ms, with these 35 ms); the candidates'
# memory fields are read by row id beside the lines read, a winner that was no candidate's
# at the end.
CANDIDATE_KEYS = ("memory_id", "user_id", "conversation_id", "seq")


@dataclass
class Candidate:
    row: ChunkRow
    dense: float
    bm25: float = 0.0
    in_scope: bool = True
    fused: float = 0.0


def search_memories(
    store: Store,
    embedder: Embedder,
    query: str,
    where: str,
    limit: int,
    *,
    mode: str = "hybrid",
    named: Collection[str] = (),
    context: str | None = None,
) -> list[tuple[ChunkRow, float]]:
    """The best ``limit`` memories in scope as (row, cosine similarity), best first.

    ``mode`` is for evaluation (``bench/retrieval.py``): ``vector`` ranks by cosine
    alone, ``bm25`` by full text alone (cosine breaks ties), ``hybrid`` is the product.
    ``named``: speakers the query names; their memories get ``NAMED_SPEAKER_BOOST``.
    ``context``: the memories whose words may lend full-text score to their neighbours
    and seed replies (the store's memories as the search reads them: current ones, or
    those of an ``as_of`` moment); None = only those in scope. Neighbours are read from
    it too (None: the current memories), so a past moment ranks as a search made then.
    """
    k = max(limit * 4, _CANDIDATE_FLOOR)
    records: Future[dict[int, ChunkRow]] | None = None  # the candidates' records, read beside the lines
    if mode == "vector":
        scope_rows = store.chunks.count(where)
        if scope_rows == 0:
            return []
        vector = embedder.embed_query(query)
        candidates = dense_candidates(store, vector, where, limit, scope_rows)
        scores = {mid: c.dense for mid, c in candidates.items()}
    else:
        keys = (*CANDIDATE_KEYS, "speaker") if named else CANDIDATE_KEYS
        wide = context if context is not None and context != where else None
        # The scope is counted beside the searches (1.7 ms at 100k rows, no longer before them).
        found = candidate_searches(store, lambda: embedder.embed_query(query), query, where, k, keys, None, wide)
        vector, scope_rows = found.vector, found.scope_rows
        if scope_rows == 0:
            return []
        context_bm25 = _best_bm25(found.context_matches if wide is not None else found.matches)
        candidates = dense_candidates(store, vector, where, limit, scope_rows, first=found.nearest, keys=keys)
        add_bm25(vector, found.matches, candidates)
        # The winners are mostly among these: their records are read beside the lines read.
        records = store.chunks.take_beside([c.row["_rowid"] for c in candidates.values()], RECORD_FIELDS)
        if mode == "bm25":
            scores = {mid: c.bm25 for mid, c in candidates.items()}
        else:
            # One read of the conversations around the candidates and the reply seeds serves both.
            seeds = reply_seeds(found.context_matches, candidates) if scope_rows > k else []
            lines = Lines.around_replies(store, [c.row for c in candidates.values()], seeds, base=context, scope=where)
            lines.take_ahead(store, candidates, seeds, keys)
            if seeds:  # else every memory in scope is a candidate already
                candidates.update(replies(store, vector, seeds, where, candidates, keys, context, lines=lines))
            # A scope that is the whole current store holds every neighbour: they may win.
            scores = _propagate(
                store, vector, candidates, context_bm25, keys, base=context, neighbours_in_scope=context == where,
                lines=lines,
            )  # fmt: skip
            for mid, c in candidates.items():
                if named and c.in_scope and c.row.get("speaker") in named:
                    scores[mid] += NAMED_SPEAKER_BOOST
    ranked = sorted(
        (c for c in candidates.values() if c.in_scope),
        key=lambda c: (-scores[c.row["memory_id"]], -c.dense, -c.row["seq"]),
    )
    taken = records.result() if records is not None else None
    if mode == "hybrid" and COVERAGE and len(ranked) > 1:
        return covering(store, vector, ranked[: limit + COVERAGE_POOL], scores, limit, taken=taken)
    return _with_memory_fields(store, ranked[:limit], taken)


def candidate_searches(
    store: Store, embed: Callable[[], Any], query: str, where: str, k: int, keys: tuple[str, ...] = CANDIDATE_KEYS,
    scope_rows: int | None = None, context: str | None = None,
) -> Found:  # fmt: skip
    """The three candidate searches of step 1, the query embedded meanwhile: inside the scope
    the nearest chunks and the full-text matches, with their vectors (the selection that
    covers weighs them, so it reads none again), and inside ``context`` the full-text
    matches' ``keys`` only (they seed replies and lend scores; none is returned).
    ``scope_rows`` unknown (``None``): counted beside them (``Found.scope_rows``)."""
    return store.chunks.vector_and_text_search(
        embed, query, where, k, (*keys, "vector"), scope_rows=scope_rows, context_where=context, context_columns=keys
    )


def covering(
    store: Store, vector: Any, ranked: list[Candidate], scores: dict[str, float], limit: int,
    *, taken: Mapping[int, ChunkRow] | None = None,
) -> list[tuple[ChunkRow, float]]:  # fmt: skip
    """``limit`` of ``ranked`` (best first) as (memory row, cosine), each next one the best
    once its closeness to those already chosen is taken off: its highest cosine to one of
    them, standardised over the candidates left, times ``COVERAGE``. The first is the
    best; a turn that says again what a chosen one says yields to one that adds something.

    A candidate's vector is its chunk's, as the search that found it read it (one from a
    search that read none is read here); then the winners' memory fields are read, and a
    winner forgotten meanwhile is left out and the choice made again (``taken``: rows with
    the memory fields read already, by row id). Public for ``bench/scale.py``'s step
    breakdown."""
    ranked = _with_vectors(store, vector, ranked)
    while ranked:
        chosen = [ranked[i] for i in _cover(ranked, scores, limit)]
        answer = _with_memory_fields(store, chosen, taken)
        if len(answer) == len(chosen):
            return answer
        kept = {row["memory_id"] for row, _ in answer}
        gone = {c.row["memory_id"] for c in chosen} - kept
        ranked = [c for c in ranked if c.row["memory_id"] not in gone]
    return []


def _with_vectors(store: Store, vector: Any, ranked: list[Candidate]) -> list[Candidate]:
    """``ranked`` with a vector on every row: those without one read by row id (all of a
    memory's chunks if it moved, the closest to the query kept; one that went since is
    left out)."""
    bare = {c.row["memory_id"]: [c.row["_rowid"]] for c in ranked if c.row.get("vector") is None}
    if not bare:
        return ranked
    rows = fetch_by_row_ids(store, ranked[0].row["user_id"], bare, ("vector",))
    kept = []
    for c in ranked:
        mid = c.row["memory_id"]
        if mid in bare:
            if mid not in rows:
                continue
            c.row["vector"] = _by_best_chunk(vector, rows[mid]).row["vector"]
        kept.append(c)
    return kept


def _cover(ranked: list[Candidate], scores: dict[str, float], limit: int) -> list[int]:
    """The places in ``ranked`` of ``covering``'s choice, in the order chosen."""
    vectors = np.array([c.row["vector"] for c in ranked], dtype=np.float32).reshape(len(ranked), -1)
    left = list(range(len(ranked)))
    closest = np.full(len(ranked), -np.inf)
    chosen: list[int] = []
    while left and len(chosen) < limit:
        if chosen:
            closest = np.maximum(closest, vectors @ vectors[chosen[-1]])
            near = dict(zip(left, _standardised(closest[left])))
        else:
            near = dict.fromkeys(left, 0.0)

        def value(i: int, near: dict[int, float] = near) -> tuple[float, float, int]:
            c = ranked[i]
            return scores[c.row["memory_id"]] - COVERAGE * near[i], c.dense, c.row["seq"]

        pick = max(left, key=value)
        chosen.append(pick)
        left.remove(pick)
    return chosen


def _with_memory_fields(
    store: Store, ranked: list[Candidate], taken: Mapping[int, ChunkRow] | None = None
) -> list[tuple[ChunkRow, float]]:
    """The winners' memory rows, best first, with their cosine similarity (``taken``: as
    for ``fetch_by_row_ids``)."""
    if not ranked:
        return []
    wanted = {c.row["memory_id"]: [c.row["_rowid"]] for c in ranked}
    rows = fetch_by_row_ids(store, ranked[0].row["user_id"], wanted, RECORD_FIELDS, taken)
    return [(rows[c.row["memory_id"]][0], c.dense) for c in ranked if c.row["memory_id"] in rows]


def fetch_by_row_ids(
    store: Store, store_key: str, wanted: dict[str, list[int]], columns: tuple[str, ...],
    taken: Mapping[int, ChunkRow] | None = None,
) -> dict[str, list[ChunkRow]]:  # fmt: skip
    """Chunk rows of these memories (memory id -> row ids of its chunks, as a query gave
    them a moment ago) read by row id, ~5x faster than by a filter at 1M rows. Each row
    is checked; a memory any of whose rows moved (compaction) or went (a delete) since
    is looked up by its id instead (all its chunks). ``taken``: rows with ``columns``
    read already (a take of this search's), by row id: only the others are read.

    Public because its promise, right rows from stale row ids, is its own: a test keeps
    row ids across a compaction it forces and hands them here, which no search can do."""
    columns = columns if "memory_id" in columns else (*columns, "memory_id")
    held = taken or {}
    unread = [rid for rids in wanted.values() for rid in rids if rid not in held]
    by_row_id = {**held, **store.chunks.take(unread, columns)}
    found: dict[str, list[ChunkRow]] = {}
    for mid, rids in wanted.items():
        rows = [by_row_id.get(rid) for rid in rids]
        if all(row is not None and row["memory_id"] == mid for row in rows):
            found[mid] = [{**row, "_rowid": rid} for row, rid in zip(rows, rids) if row is not None]
    missing = [mid for mid in wanted if mid not in found]
    if missing:
        for row in store.chunks.rows(memories_in(store_key, missing), columns=columns, row_ids=True):
            found.setdefault(row["memory_id"], []).append(row)
    return found


def dense_candidates(
    store: Store,
    vector: Any,
    where: str,
    wanted: int,
    scope_rows: int,
    *,
    first: list[ChunkRow] | None = None,
    keys: tuple[str, ...] = CANDIDATE_KEYS,
) -> dict[str, Candidate]:
    """At least ``wanted`` distinct in-scope memories by cosine (more chunks until then),
    or all of them when the scope holds fewer: the search stops asking once it has
    every chunk row of the scope. ``first``: the rows of a first search already made."""
    k = max(wanted * 4, _CANDIDATE_FLOOR)
    while True:
        rows = first if first is not None else store.chunks.vector_search(vector, where, k, keys, scope_rows=scope_rows)
        first = None
        found: dict[str, Candidate] = {}
        for row in rows:
            similarity = 1.0 - float(row.pop("_distance"))
            held = found.get(row["memory_id"])
            if held is None or similarity > held.dense:
                found[row["memory_id"]] = Candidate(row, similarity)
        if len(found) >= wanted or len(rows) < k:
            return found
        k *= 4


def add_bm25(vector: Any, matches: list[ChunkRow], candidates: dict[str, Candidate]) -> None:
    """BM25 scores for the candidates, and BM25-only hits added with their cosine."""
    for row in matches:
        score = float(row.pop("_score"))
        chunk_vector = row["vector"]
        held = candidates.get(row["memory_id"])
        if held is None:
            held = candidates[row["memory_id"]] = Candidate(row, float(np.dot(vector, chunk_vector)))
        held.bm25 = max(held.bm25, score)


def reply_seeds(matches: list[ChunkRow], candidates: Collection[str]) -> list[ChunkRow]:
    """The first ``REPLY_SEEDS`` of ``matches`` (chunk rows, best first) that are not candidates."""
    return [row for row in matches if row["memory_id"] not in candidates][:REPLY_SEEDS]


def replies(
    store: Store, vector: Any, matches: list[ChunkRow], where: str, candidates: dict[str, Candidate],
    keys: tuple[str, ...] = CANDIDATE_KEYS, base: str | None = None, *, whole_rows: int | None = None,
    lines: Lines | None = None,
) -> dict[str, Candidate]:  # fmt: skip
    """Seeds: ``reply_seeds`` of ``matches``. The memories said next to them
    (``REPLY_OFFSETS``, as ``Lines`` finds them) that are in scope (``where``) and not
    candidates yet become candidates, scored by their best chunk's cosine. Two small
    reads, as for ``neighbours``; ``lines``: the first one, made already with ``scope``
    ``where`` (it must reach ``REPLY_OFFSETS`` from every seed, as
    ``Lines.around_replies`` does)."""
    seeds = reply_seeds(matches, candidates)
    if not seeds:
        return {}
    if lines is None:
        back = NEIGHBOUR_SPAN if min(REPLY_OFFSETS) < 0 else 0  # replies only: no need to read what came before
        lines = Lines(store, seeds[0]["user_id"], seeds, back=back, base=base, whole_rows=whole_rows, scope=where)
    if lines.scope != where:
        raise ValueError("replies need the lines read with their scope")
    wanted = lines.replies_to(seeds, candidates)
    return {mid: _by_best_chunk(vector, chunks) for mid, chunks in lines.chunks(store, wanted, keys).items()}


def _best_bm25(rows: list[ChunkRow]) -> dict[str, float]:
    """Each memory's best full-text score among these rows."""
    best: dict[str, float] = {}
    for row in rows:
        score = float(row["_score"])
        best[row["memory_id"]] = max(best.get(row["memory_id"], score), score)
    return best


def _standardised(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 1e-9 else np.zeros_like(values)


def _fuse(candidates: dict[str, Candidate]) -> None:
    items = list(candidates.values())
    dense = _standardised(np.array([c.dense for c in items]))
    bm25 = _standardised(np.array([c.bm25 for c in items]))
    for c, d, b in zip(items, dense, bm25):
        c.fused = float(DENSE_WEIGHT * d + BM25_WEIGHT * b)


def _propagate(
    store: Store, vector: Any, candidates: dict[str, Candidate], context_bm25: dict[str, float],
    keys: tuple[str, ...] = CANDIDATE_KEYS, *, base: str | None = None, neighbours_in_scope: bool = False,
    lines: Lines | None = None,
) -> dict[str, float]:  # fmt: skip
    """Each candidate's fused score plus shares of its neighbours' fused scores (same
    conversation only) and of its conversation's best.
    ``neighbours_in_scope``: the neighbours that join are in scope too (and get the same
    from the candidates they neighbour), else they only lend score. ``lines``: as for
    ``neighbours``."""
    around_each, newcomers = neighbours(store, vector, candidates, context_bm25, keys, base, lines=lines)
    if neighbours_in_scope:
        for mid, around in list(around_each.items()):
            for offset, other in around:
                if other in newcomers and -offset in NEIGHBOUR_WEIGHTS:
                    newcomers[other].in_scope = True
                    around_each.setdefault(other, []).append((-offset, mid))
    _fuse(candidates)
    _score_newcomers(candidates, newcomers)
    scores = {mid: c.fused for mid, c in candidates.items()}
    for mid, around in around_each.items():
        for offset, other in around:
            scores[mid] += NEIGHBOUR_WEIGHTS[offset] * candidates[other].fused
    group = {mid: _conversation_of(mid, c) for mid, c in candidates.items()}
    best: dict[str, float] = {}
    for mid, c in candidates.items():
        best[group[mid]] = max(best.get(group[mid], c.fused), c.fused)
    for mid in candidates:
        scores[mid] += SESSION_LIFT * best[group[mid]]
    return scores


def _conversation_of(memory_id: str, candidate: Candidate) -> str:
    """The group a memory's session lift comes from: its conversation, or the memory
    alone when it has none (a note stored on its own is a conversation of one: it lifts
    itself as a conversation's best turn does, and nothing else)."""
    conversation = candidate.row["conversation_id"]
    return "m:" + memory_id if conversation is None else "c:" + conversation


def neighbours(
    store: Store, vector: Any, candidates: dict[str, Candidate], context_bm25: dict[str, float],
    keys: tuple[str, ...] = CANDIDATE_KEYS, base: str | None = None, *, whole_rows: int | None = None,
    lines: Lines | None = None,
) -> tuple[dict[str, list[tuple[int, str]]], dict[str, Candidate]]:  # fmt: skip
    """(offset, memory id) of each in-scope candidate's neighbours: the memories just
    before and after it in write order, in its own conversation (``None`` = no
    conversation: store order), at most ``NEIGHBOUR_SPAN`` apart; and the neighbours
    that are not candidates, as out-of-scope candidates with their cosine and their
    full-text score in ``context_bm25`` (none when absent), not yet fused.

    Two small reads: the ids, order and row ids of the chunks around the candidates in
    their conversations (``Lines``, no vectors; ``whole_rows`` is its bound), then, by
    row id, the vectors of the few neighbours used. ``lines``: the first read, made already
    around every in-scope candidate (``Lines.around_replies``: the candidates then, the
    replies since).
    """
    in_scope = [c for c in candidates.values() if c.in_scope]
    if not in_scope:
        return {}, {}
    store_key = in_scope[0].row["user_id"]
    if lines is None:
        lines = Lines(store, store_key, [c.row for c in in_scope], base=base, whole_rows=whole_rows)
    found = {c.row["memory_id"]: lines.around(c.row, NEIGHBOUR_WEIGHTS) for c in in_scope}
    wanted = {mid for around in found.values() for _, mid in around} - set(candidates)
    if not wanted:
        return found, {}
    newcomers = _neighbour_candidates(store, vector, lines, wanted, keys)
    for mid, c in newcomers.items():
        c.bm25 = context_bm25.get(mid, 0.0)
    return found, newcomers


class Lines:
    """The memories of ``base`` (default: the store's current ones) around some memories
    (chunk rows with ``seq`` and ``conversation_id``), in write order, per conversation:
    every memory said from ``back`` before to ``NEIGHBOUR_SPAN`` after each, in its
    conversation (a memory without one has no line), and the row ids of their chunks.
    One read of ids, order and row ids (no vectors), in one of two forms:

    - the whole conversations of those memories (``in_conversations``): one B-tree
      look-up per conversation, ~2.5x faster than the windows at 100k rows; it is used
      while it holds at most ``whole_rows`` rows (default: as many as the windows can, one
      memory per ``seq``), a bound the read carries as its limit;
    - else (conversations too long: an agent that gives every memory the same one) the
      stretches of write order themselves (``seq_windows``), as before the whole form.

    Both give the same lines: the window of each memory lies inside its conversation's
    read, so its neighbours at most ``NEIGHBOUR_SPAN`` apart are there in both, and a line
    memory farther away is never a neighbour (``around``)."""

    _COLUMNS = ("memory_id", "conversation_id", "seq", "chunk_idx")

    def __init__(
        self, store: Store, key: str, rows: Collection[ChunkRow], *, back: int = NEIGHBOUR_SPAN,
        ahead: int = NEIGHBOUR_SPAN, base: str | None = None, whole_rows: int | None = None,
        scope: str | None = None,
    ) -> None:  # fmt: skip
        self.key = key
        self.scope = scope  # a narrower filter inside ``base``: which line memories it holds is read too
        self._out_of_scope: set[str] = set()
        self._taken: dict[str, list[ChunkRow]] = {}  # memory id -> its chunks with vectors (``chunks``)
        self.lines: dict[str, list[str]] = {}  # conversation -> its memories' ids in write order
        self.seqs: dict[str, int] = {}  # memory id -> its seq and conversation (those in a line)
        self.conversations: dict[str, str] = {}
        self.at: dict[str, int] = {}  # memory id -> its place in its conversation's line
        self.row_ids: dict[str, list[int]] = {}  # every chunk: a neighbour scores by its best one
        self.whole = False  # which form was read (see the class)
        said = {row["seq"]: row["conversation_id"] for row in rows if row["conversation_id"] is not None}
        if not said:  # the others have no neighbours
            return
        base = search_scope(key, None, False, []) if base is None else base
        spans = _merged_spans(sorted(said), back, ahead)
        bound = sum(high - low + 1 for low, high in spans) if whole_rows is None else whole_rows
        # Whether each row is in ``scope`` too, computed by the same read (NULL: not).
        computed = {"in_scope": f"({scope})"} if scope is not None and scope != base else None
        read: list[ChunkRow] = []
        if bound > 0:
            whole = in_conversations(base, sorted(set(said.values())))
            read = store.chunks.rows(whole, columns=self._COLUMNS, limit=bound + 1, row_ids=True, computed=computed)
            self.whole = len(read) <= bound
        if not self.whole:
            read = store.chunks.rows(seq_windows(base, spans), columns=self._COLUMNS, row_ids=True, computed=computed)
        firsts: dict[str, list[tuple[int, str]]] = {}
        for row in read:
            if computed is not None and not row["in_scope"]:
                self._out_of_scope.add(row["memory_id"])
            self.row_ids.setdefault(row["memory_id"], []).append(row["_rowid"])
            if row["chunk_idx"] == 0 and row["conversation_id"] is not None:
                firsts.setdefault(row["conversation_id"], []).append((row["seq"], row["memory_id"]))
                self.seqs[row["memory_id"]] = row["seq"]
                self.conversations[row["memory_id"]] = row["conversation_id"]
        for conversation, line in firsts.items():
            ids = self.lines[conversation] = [mid for _, mid in sorted(line)]
            self.at.update((mid, at) for at, mid in enumerate(ids))
        for rids in self.row_ids.values():
            rids.sort()

    @classmethod
    def around_replies(
        cls, store: Store, candidates: Collection[ChunkRow], seeds: Collection[ChunkRow], base: str | None = None,
        *, whole_rows: int | None = None, scope: str | None = None,
    ) -> Lines:  # fmt: skip
        """One read for both uses of a search: the lines around the candidates and the
        reply seeds, reaching far enough after each that a reply found later (at most
        ``NEIGHBOUR_SPAN`` after its seed) has its own neighbours in it too. A read that
        holds more of a conversation gives the same ``around``: a memory's neighbours within
        ``NEIGHBOUR_SPAN`` are in both, and any other is never one. ``scope``: the search's
        filter, which replies must pass."""
        rows = [*candidates, *seeds]
        key = next(iter(rows))["user_id"] if rows else ""
        return cls(store, key, rows, ahead=2 * NEIGHBOUR_SPAN, base=base, whole_rows=whole_rows, scope=scope)

    def replies_to(self, seeds: Collection[ChunkRow], candidates: Collection[str]) -> set[str]:
        """The memories said next to ``seeds`` (``REPLY_OFFSETS``) that are in ``scope``
        and not ``candidates``: ``replies``' newcomers."""
        said_next = {mid for row in seeds for _, mid in self.around(row, REPLY_OFFSETS) if self.in_scope(mid)}
        return said_next - set(candidates)

    def in_scope(self, memory_id: str) -> bool:
        """Whether this line memory is in ``scope`` (every one is when none was given)."""
        return memory_id in self.row_ids and memory_id not in self._out_of_scope

    def chunks(self, store: Store, wanted: Collection[str], keys: tuple[str, ...]) -> dict[str, list[ChunkRow]]:
        """The chunk rows, with ``keys`` and vectors, of these line memories: read by row
        id once (``fetch_by_row_ids``; one that went since is left out), then kept, so
        replies and neighbours cost one read between them (``take_ahead``)."""
        missing = {mid: self.row_ids[mid] for mid in wanted if mid not in self._taken and mid in self.seqs}
        if missing:
            for mid, rows in fetch_by_row_ids(store, self.key, missing, _unknown(keys)).items():
                self._taken[mid] = [{**self.known(mid), **row} for row in rows]
        return {mid: self._taken[mid] for mid in wanted if mid in self._taken}

    def take_ahead(
        self, store: Store, candidates: dict[str, Candidate], seeds: Collection[ChunkRow], keys: tuple[str, ...]
    ) -> None:
        """Read at once the chunks ``replies`` and ``neighbours`` will ask for: the in-scope
        replies to ``seeds`` and the neighbours of the in-scope candidates and of those
        replies (a superset: a reply the ranking drops costs a row, not a read)."""
        replies = self.replies_to(seeds, candidates)
        rows = [c.row for c in candidates.values() if c.in_scope]
        rows += [{"memory_id": mid, **self.known(mid)} for mid in replies if mid in self.seqs]
        around = {mid for row in rows for _, mid in self.around(row, NEIGHBOUR_WEIGHTS)}
        self.chunks(store, (replies | around) - set(candidates), keys)

    def around(self, row: ChunkRow, offsets: Collection[int]) -> list[tuple[int, str]]:
        """(offset, memory id) of the memories at these offsets from ``row``'s memory in
        its conversation, at most ``NEIGHBOUR_SPAN`` apart in write order."""
        at = self.at.get(row["memory_id"])  # None: not read (a note on its own has no neighbours)
        if at is None or self.conversations[row["memory_id"]] != row["conversation_id"]:
            return []
        line = self.lines[self.conversations[row["memory_id"]]]
        return [
            (offset, line[at + offset])
            for offset in offsets
            if 0 <= at + offset < len(line) and abs(self.seqs[line[at + offset]] - row["seq"]) <= NEIGHBOUR_SPAN
        ]

    def known(self, memory_id: str) -> ChunkRow:
        """What the read told of a memory's chunks (they share it): store, conversation, order."""
        return {"user_id": self.key, "conversation_id": self.conversations[memory_id], "seq": self.seqs[memory_id]}


def _merged_spans(seqs: list[int], back: int = NEIGHBOUR_SPAN, ahead: int = NEIGHBOUR_SPAN) -> list[tuple[int, int]]:
    """The stretches of write order from ``back`` before to ``ahead`` after each sorted
    ``seq``, overlapping ones merged."""
    spans: list[tuple[int, int]] = []
    for seq in seqs:
        low, high = seq - back, seq + ahead
        if spans and low <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], high))
        else:
            spans.append((low, high))
    return spans


def _neighbour_candidates(
    store: Store, vector: Any, lines: Lines, wanted: Collection[str], keys: tuple[str, ...] = CANDIDATE_KEYS
) -> dict[str, Candidate]:
    """Neighbours as out-of-scope candidates, scored by their best chunk's cosine."""
    rows = lines.chunks(store, wanted, keys)
    return {mid: _by_best_chunk(vector, chunks, in_scope=False) for mid, chunks in rows.items()}


# What ``Lines`` already read of a memory: the vector reads leave these columns out (at
# 100k rows, taking 100 neighbours' vectors took 9 ms with the keys, 5 ms without).
_KNOWN = ("user_id", "conversation_id", "seq")


def _unknown(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The columns of ``keys`` (and the vector) a read of memories ``Lines`` holds needs."""
    return (*(key for key in keys if key not in _KNOWN), "vector")


def _by_best_chunk(vector: Any, chunks: list[ChunkRow], *, in_scope: bool = True) -> Candidate:
    """A memory as a candidate from its chunk rows (with vectors): its best chunk's row
    and cosine."""
    closeness = [float(np.dot(vector, row["vector"])) for row in chunks]
    at = max(range(len(chunks)), key=closeness.__getitem__)  # the first of equals, as max() over rows
    return Candidate(chunks[at], closeness[at], in_scope=in_scope)


def _score_newcomers(candidates: dict[str, Candidate], new: dict[str, Candidate]) -> None:
    """Fused scores for neighbours on the candidates' scale (same mean and spread)."""
    known = list(candidates.values())
    dense = np.array([c.dense for c in known])
    bm25 = np.array([c.bm25 for c in known])
    d_mean, d_std = dense.mean(), dense.std() or 1.0
    b_mean, b_std = bm25.mean(), bm25.std() or 1.0
    for mid, c in new.items():
        c.fused = float(DENSE_WEIGHT * (c.dense - d_mean) / d_std + BM25_WEIGHT * (c.bm25 - b_mean) / b_std)
        candidates[mid] = c

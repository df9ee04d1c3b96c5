"""The restatement decision on the multilingual sets: a one-detail change is never
taken for a duplicate (no fact lost), and near-verbatim restatements are caught.

The rates through the whole service (restatement-key lookup + this decision) are printed
by ``bench/duplicates.py``; ``test_restatement_key`` proves the key and this decision
agree; it and ``test_service`` cover the service end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wontopos_mcp.duplicates import is_restatement

DATA = Path(__file__).parent / "data"


def _pairs(name: str, kind: str) -> list[tuple[str, str, str]]:
    raw = json.loads((DATA / name).read_text(encoding="utf-8"))
    return [(lang, a, b) for lang, sets in raw.items() if not lang.startswith("_") for a, b in sets[kind]]


@pytest.mark.parametrize("name", ["duplicates.json", "duplicates_heldout.json"])
def test_a_one_detail_change_is_never_a_restatement(name):
    lost = [(lang, a, b) for lang, a, b in _pairs(name, "changes") if is_restatement(b, a)]
    assert lost == []


@pytest.mark.parametrize("name, floor", [("duplicates.json", 1.0), ("duplicates_heldout.json", 0.75)])
def test_near_verbatim_restatements_are_caught(name, floor):
    pairs = _pairs(name, "restatements")
    caught = sum(is_restatement(b, a) for _, a, b in pairs)
    assert caught / len(pairs) >= floor, f"{caught}/{len(pairs)}"


@pytest.mark.parametrize(
    "stored, new",
    [
        ("Bob paid Alice.", "Alice paid Bob."),
        ("Meet at 8 pm.", "Meet at 10 pm."),
        ("Meet at 8 pm.", "Meet at 8 am."),
        ("The code is 4711.", "The code is 4712."),
        ("I like it.", "I don't like it."),
        ("小明给了小红一本书。", "小红给了小明一本书。"),
    ],
)
def test_restatement_is_symmetric_in_refusing_detail_changes(stored, new):
    assert not is_restatement(new, stored)
    assert not is_restatement(stored, new)


def test_case_punctuation_spacing_and_width_alone_never_make_a_new_memory():
    assert is_restatement("  BOB   is allergic to peanuts!!", "Bob is allergic to peanuts.")
    assert is_restatement("締め切りは３月１２日です", "締め切りは3月12日です。")


@pytest.mark.parametrize(
    "stored, new",
    [("OK.", "Yes."), ("Yes.", "No."), ("It is.", "It was."), ("Sure.", "Okay then."), ("はい。", "いいえ。")],
)
def test_replies_without_any_detail_restate_only_the_same_words(stored, new):
    """"OK." and "Yes." carry no content word, number or symbol: without their words
    as content they would all restate each other and a later "Yes." would be dropped."""
    assert not is_restatement(new, stored)
    assert is_restatement(stored.upper(), stored)

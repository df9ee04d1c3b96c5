"""The restatement decision on the multilingual sets: a one-detail change is never
taken for a duplicate (no fact lost), and restatements (the same words in the same
order, fillers aside) are caught.

The rates through the whole service (restatement-key lookup + this decision) are printed
by ``bench/duplicates.py``; ``test_restatement_key`` proves the key and this decision
agree; it and ``test_service`` cover the service end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wontopos_mcp.rules.restatement import is_restatement

DATA = Path(__file__).resolve().parent.parent / "data"  # tests/data


def _pairs(name: str, kind: str) -> list[tuple[str, str, str]]:
    raw = json.loads((DATA / name).read_text(encoding="utf-8"))
    return [(lang, a, b) for lang, sets in raw.items() if not lang.startswith("_") for a, b in sets.get(kind, [])]


@pytest.mark.parametrize("name", ["duplicates.json", "duplicates_heldout.json"])
def test_a_one_detail_change_is_never_a_restatement(name):
    lost = [(lang, a, b) for lang, a, b in _pairs(name, "changes") if is_restatement(b, a)]
    assert lost == []
    assert len(_pairs(name, "changes")) >= 39  # not vacuous


def test_the_pairs_that_differ_in_a_word_that_is_no_filler_are_stored():
    """The development set's former restatements that differ in an intensifier, a particle,
    "yes"/"okay" or a polite ending: every word but a filler counts, so both texts are kept."""
    rewordings = _pairs("duplicates.json", "rewordings")
    assert len(rewordings) == 12
    assert [(lang, a, b) for lang, a, b in rewordings if is_restatement(b, a) or is_restatement(a, b)] == []


def test_every_restatement_of_the_development_set_is_caught_but_a_german_also():
    """German "Also, …" opens a sentence as "well" does, but the text cannot tell it from
    English "Also, Bob likes tea." (= "Bob likes tea too"): "also" is no filler, so that
    pair is stored twice (when in doubt, store)."""
    missed = [(lang, a, b) for lang, a, b in _pairs("duplicates.json", "restatements") if not is_restatement(b, a)]
    assert missed == [("de", "Ich wohne in Berlin.", "Also, ich wohne in Berlin.")]
    assert len(_pairs("duplicates.json", "restatements")) == 29


# The held-out set was written before the stricter rule (every word but a filler counts)
# and counts articles, particles, sentence-final and polite endings and unpunctuated
# discourse words ("Pues mi hermana…", "其实我…") as restatements; the rule stores them.
# 52/80 measured with issue 9's rule (64/80 before, when function words and light stems
# were set aside): the floor is that value.
def test_restatements_of_the_held_out_set_are_caught():
    pairs = _pairs("duplicates_heldout.json", "restatements")
    caught = sum(is_restatement(b, a) for _, a, b in pairs)
    assert caught / len(pairs) >= 52 / 80, f"{caught}/{len(pairs)}"


@pytest.mark.parametrize(
    ("stored", "new"),
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
    assert is_restatement("星期一  我和李明见面", "星期一我和李明见面。")  # no spaces in Han
    assert is_restatement("Cafe\u0301 at 9:40", "Café at 9:40")  # NFD and NFC
    assert is_restatement("my daughter’s birthday", "My daughter's birthday.")  # curly apostrophe


@pytest.mark.parametrize(
    ("stored", "new"),
    [
        # the seven kinds of issue 9 (PAWS-X): an article, a preposition, a function word, word order
        ("The Church on Prince Consort Road.", "The Church on the Prince Consort Road."),
        ("He moved to Switzerland and later Italy.", "He moved to Switzerland and later to Italy."),
        ("His papers were still in a uniformly rough state.", "His papers were uniformly in a still rough state."),
        ("I have his paper.", "I have his papers."),  # no stemming
        ("Bob is allergic to peanuts.", "Bob is really allergic to peanuts."),
        ("Hans trinkt keinen Kaffee.", "Hans trinkt auch keinen Kaffee."),
        ("会議は金曜日です。", "会議は金曜日ですよ。"),
        ("저는 커피를 좋아해요.", "저는 커피를 좋아합니다."),
        ("I'm allergic to peanuts.", "Yes, I'm allergic to peanuts."),  # an answer is no filler
    ],
)
def test_any_other_word_or_another_order_makes_a_different_text(stored, new):
    assert not is_restatement(new, stored)
    assert not is_restatement(stored, new)


@pytest.mark.parametrize(
    ("stored", "new"),
    [
        ("My dog is called Toby.", "Well, my dog is called Toby."),
        ("My dog is called Toby.", "My dog is called Toby, actually."),
        ("Bob is allergic to peanuts.", "Bob is, um, allergic to peanuts... well."),
        ("Bob is allergic to peanuts.", "Bob is uhm allergic to peanuts."),  # a hesitation sound anywhere
        ("Bob paid.", "In fact, Bob paid."),
        ("Ich wohne in Köln.", "Naja, äh, ich wohne in Köln."),
        ("Je ne mange pas de porc.", "Euh, en fait, je ne mange pas de porc."),
        ("Mi perro se llama Toby.", "Bueno, mi perro se llama Toby."),
        ("Ольга заплатила за ужин.", "Ну, Ольга заплатила за ужин."),
        ("会議は金曜日です。", "えーと、会議は金曜日です。"),
        ("会議は金曜日です。", "えっと会議は金曜日です。"),  # a hesitation sound opening the clause
        ("我去北京。", "嗯，我去北京。"),
        ("회의는 금요일이에요.", "음, 회의는 금요일이에요."),
        ("I don't eat pork.", "I do not eat pork."),  # a contraction is the same words
        ("I can't come.", "I cannot come."),
        ("We'll meet at 5.", "We will meet at 5."),
    ],
)
def test_discourse_fillers_and_contractions_alone_never_make_a_new_memory(stored, new):
    assert is_restatement(new, stored)
    assert is_restatement(stored, new)


@pytest.mark.parametrize(
    ("stored", "new"),
    [
        ("Bob sings.", "Bob sings well."),  # a filler word that is no filler where it stands
        ("Done.", "Well done."),
        ("Bob is a known author.", "Bob is a well-known author."),
        ("Der Termin ist 15 Uhr.", "Der Termin ist um 15 Uhr."),  # German "um" is a preposition
        ("Alice und Claire kamen.", "Ben, Alice und Claire kamen."),  # "ben" is a name, never a filler
        ("人は医者です。", "あの人は医者です。"),
        ("사람은 의사예요.", "그 사람은 의사예요."),
        ("Room 5.", "Room 5 😀."),  # symbols are words: emoji, currency, signs
        ("It costs 5 €.", "It costs 5 $."),
        ("It is 5 °C.", "It is -5 °C."),
        ("He's gone.", "He is gone."),  # 's is "is", "has" or a possessive: not spelled out
    ],
)
def test_a_filler_look_alike_a_symbol_or_an_ambiguous_contraction_is_a_difference(stored, new):
    assert not is_restatement(new, stored)
    assert not is_restatement(stored, new)


def test_commas_around_a_filler_word_decide_whether_it_is_a_filler():
    """The one place stricter than plain normalisation (when in doubt, store): "Well done"
    and "Well, done" normalise alike but only the second opens with a set-off filler."""
    assert not is_restatement("Well, done.", "Well done.")
    assert is_restatement("Well, done.", "Done.")


@pytest.mark.parametrize(
    ("stored", "new"),
    [
        ("OK.", "Yes."),
        ("Yes.", "No."),
        ("It is.", "It was."),
        ("Sure.", "Okay then."),
        ("はい。", "いいえ。"),
        ("Um.", "Well."),
        ("Well.", "Well, well."),
    ],  # fmt: skip
)
def test_replies_without_any_detail_restate_only_the_same_words(stored, new):
    """Every word counts, so "OK." and "Yes." differ; and a text made only of fillers keeps
    them ("Um." and "Well." differ), or every such reply would restate every other one."""
    assert not is_restatement(new, stored)
    assert is_restatement(stored.upper(), stored)

"""One detail that plain normalisation used to erase makes a new text (a new fact that
differs from a stored one in one detail is stored; when in doubt, store): a word that
looks like a filler but is none where it stands, a non-prose punctuation character, a
number's separator, a superscript, "ß". And the forms that are still only forms.

The pairs come from an audit that found each second write answered "duplicate" and was
not stored; the end-to-end test writes them through a service on disk.
"""

from __future__ import annotations

import pytest

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules.restatement import is_restatement, restatement_key

DIFFERENT = [
    ("Bob, also, likes tea.", "Bob likes tea."),  # "also" = "too": no filler
    ("Also, Bob likes tea.", "Bob likes tea."),
    ("El hotel es barato, bueno, y cercano.", "El hotel es barato y cercano."),  # "bueno" = good, mid-sentence
    ("Bob cooks quickly, well, and cheaply.", "Bob cooks quickly and cheaply."),  # "well" as a list item
    ("Bob codes in C#.", "Bob codes in C."),  # non-prose punctuation is a word
    ("Bob ranked #1.", "Bob ranked 1."),
    ("Growth was 5%.", "Growth was 5."),
    ("Bob likes R&D.", "Bob likes R D."),
    ("Add 1/2 cup of sugar.", "Add 1.2 cup of sugar."),  # a separator between digits is part of the number
    ("Bob rated it 3-5.", "Bob rated it 3.5."),
    ("The price is 1,2 euros.", "The price is 1.2 euros."),
    ("Add 1/2 cup of sugar.", "Add 1 2 cup of sugar."),
    ("The train leaves at 10:30.", "The train leaves at 10 30."),
    ("It costs 1,000 euros.", "It costs 1000 euros."),  # in doubt, store
    ("The budget is 10⁶ dollars.", "The budget is 106 dollars."),  # superscripts, subscripts, fractions kept
    ("Bob drinks H₂O.", "Bob drinks H2O."),
    ("Add ½ cup of sugar.", "Add 12 cup of sugar."),
    ("Bob trinkt in Maßen.", "Bob trinkt in Massen."),  # lower-cased, not case-folded
]

SAME = [
    ("Ｂｏｂ　ｌｉｋｅｓ　ｔｅａ", "Bob likes tea"),  # full-width forms are still folded
    ("ﬁne print", "fine print"),  # and ligatures
    ("日本 に 行く", "日本に行く"),
    ("Bob can't swim.", "Bob cannot swim."),
    ("Bob doesn’t swim.", "Bob does not swim."),
    ("Bob is, well, sick.", "Bob is sick."),  # "well" set off mid-sentence is a filler
    ("Well, Bob likes tea.", "Bob likes tea."),
    ("Bob likes tea, actually.", "Bob likes tea."),
    ("Um, Bob, um, likes tea.", "Bob likes tea."),
    ("bob likes TEA!", "Bob likes tea."),
    ("Bob likes tea ❤️", "Bob likes tea ❤"),
    ("Bueno, el hotel es barato.", "El hotel es barato."),  # a content-word filler opening the text
    ("Es caro. Pues, el hotel es barato.", "Es caro. El hotel es barato."),  # or a sentence
    ("Nota:\nBueno, pues, el hotel es barato.", "Nota: el hotel es barato."),  # or a line
    ("El hotel es barato, bueno.", "El hotel es barato."),  # or closing one
    ("Growth was 5.", "Growth was 5"),  # a period after a number ends the sentence
    ("Bob rated it 3–5.", "Bob rated it 3-5."),  # a dash between digits is a hyphen
    ("ΟΔΟΣ", "οδος"),  # lower() knows the final sigma
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_one_detail_that_normalisation_used_to_erase_makes_a_different_text(a: str, b: str) -> None:
    assert not is_restatement(a, b)
    assert not is_restatement(b, a)
    assert restatement_key(a) != restatement_key(b)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_case_width_spacing_contractions_and_fillers_in_their_place_still_restate(a: str, b: str) -> None:
    assert is_restatement(a, b)
    assert is_restatement(b, a)
    assert restatement_key(a) == restatement_key(b)


@pytest.mark.slow
def test_a_one_detail_pair_is_stored_twice_and_a_restatement_once_through_the_service(
    service: MemoryService,
) -> None:
    pairs = [
        ("Bob codes in C#.", "Bob codes in C."),
        ("Also, Bob likes tea.", "Bob likes tea."),
        ("El hotel es barato, bueno, y cercano.", "El hotel es barato y cercano."),
        ("Add 1/2 cup of sugar.", "Add 1.2 cup of sugar."),
        ("The budget is 10⁶ dollars.", "The budget is 106 dollars."),
        ("Bob trinkt in Maßen.", "Bob trinkt in Massen."),
    ]
    answers = {text: service.memory_add(text) for pair in pairs for text in pair}
    assert {text: answer["status"] for text, answer in answers.items()} == {
        text: "stored" for pair in pairs for text in pair
    }

    again = service.memory_add("Bob likes tea, actually.")
    batch = service.memory_add_batch([{"content": "Growth was 5%."}, {"content": "bob codes in c#!"}])

    assert (again["status"], again["duplicate_of"]) == ("duplicate", answers["Bob likes tea."]["id"])
    assert (batch["count"], batch["duplicates"]) == (1, 1)
    contents = sorted(m["content"] for m in service.memory_list(limit=50)["memories"])
    assert contents == sorted([text for pair in pairs for text in pair] + ["Growth was 5%."])

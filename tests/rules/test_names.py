"""The rules of speaker names (NFC, trimmed, no control or invisible character, 1-80 code
points, ``me`` reserved), store ids (1-64 of ``[A-Za-z0-9._-]``, looked up ignoring case)
and dates (RFC 3339 with an offset, or a plain ``YYYY-MM-DD``).

Unit examples and hypothesis properties of ``names`` and ``dates``, and the same rules
seen through a real service: a name that passes the checks is the same person from
registration to search, byte for byte.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import regex
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support import mcp_session, refused, refused_by_every_store_call

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.library import Memory
from wontopos_mcp.rules.dates import format_us, parse_moment, to_us
from wontopos_mcp.rules.names import DEFAULT_IGNORABLE, check_person, check_speaker, check_store_id, similar_names

# -- strategies --------------------------------------------------------------------------------

# The Hangul fillers are letters (Lo) that display as nothing: invisible, refused.
HANGUL_FILLERS = "\u115f\u1160\u3164\uffa0"
# Characters of a name: any letter, mark, digit, punctuation or symbol but those that show
# as nothing (Default_Ignorable_Code_Point) or as a blank (U+2800), and U+0020 for spaces.
NAME_CHARACTERS = st.characters(
    categories=("L", "M", "N", "P", "S"),
    include_characters=" ",
    exclude_characters=[chr(c) for a, b in DEFAULT_IGNORABLE for c in range(a, b + 1)] + ["\u2800"],
)
# Unicode white space at the ends of a name: trimmed, whatever it is.
EDGE_SPACE = st.sampled_from([" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\u2003"])
# Control characters that must never survive inside a name.
CONTROLS = [
    "\n",
    "\t",
    "\r",
    "\x00",
    "\x7f",
    "\u202e",
    "\u202d",
    "\u200e",
    "\u2066",
    "\u2028",
    "\u2029",
    "\ud800",
    "\ue000",
]

# Invisible characters (Default_Ignorable_Code_Point: category Cf, the Hangul fillers and
# the rest below): refused anywhere in a name.
INVISIBLES = {
    "zero-width-space": "\u200b",
    "zwnj": "\u200c",
    "zwj": "\u200d",
    "word-joiner": "\u2060",
    "bom": "\ufeff",
    "soft-hyphen": "\u00ad",
    "mongolian-vowel-separator": "\u180e",
    "invisible-times": "\u2062",
    "tag-a": "\U000e0041",
    "cancel-tag": "\U000e007f",
    **{f"hangul-filler-{ord(ch):04X}": ch for ch in HANGUL_FILLERS},
    # Default_Ignorable_Code_Point outside Cf (issue 30: each registered as a new "Bob").
    "combining-grapheme-joiner": "\u034f",
    "variation-selector-16": "\ufe0f",
    "variation-selector-17": "\U000e0100",
    "variation-selector-256": "\U000e01ef",
    **{f"mongolian-fvs-{c:04X}": chr(c) for c in range(0x180B, 0x1810)},
    "khmer-vowel-inherent-aq": "\u17b4",
    "khmer-vowel-inherent-aa": "\u17b5",
}
# Blanks that are not U+0020: trimmed at either end (white space) or refused there (the
# braille blank is not white space), refused inside a name.
BLANKS = {f"U+{ord(ch):04X}": ch for ch in "\u00a0\u1680\u202f\u205f\u3000\u2800"} | {
    f"U+{c:04X}": chr(c) for c in range(0x2000, 0x200B)
}


def canonical(raw: str) -> str:
    return unicodedata.normalize("NFC", raw).strip()


@st.composite
def valid_names(draw: Any) -> str:
    """Raw names the checks accept: 1-80 code points once NFC'd and trimmed, never a spelling of "me"."""
    raw = draw(st.text(NAME_CHARACTERS, min_size=1, max_size=80))
    name = canonical(raw)
    assume(1 <= len(name) <= 80 and name.casefold() != "me")
    return raw


STORE_NUMBERS = itertools.count()
STORE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
store_ids = st.from_regex(STORE_ID, fullmatch=True)


# -- speaker names: properties -------------------------------------------------------------------


@pytest.mark.slow
@given(valid_names())
def test_any_valid_name_comes_back_from_check_speaker_as_its_nfc_trimmed_self(raw: str) -> None:
    assert check_speaker(raw) == canonical(raw)
    assert check_person(raw) == canonical(raw)


@given(valid_names(), EDGE_SPACE, EDGE_SPACE)
def test_white_space_at_either_end_of_any_name_is_trimmed(raw: str, left: str, right: str) -> None:
    assert check_speaker(left + raw + right) == canonical(raw)


@given(valid_names(), st.sampled_from(CONTROLS), st.data())
def test_a_control_character_inside_any_name_is_refused_naming_the_speaker_field(
    raw: str, control: str, data: Any
) -> None:
    name = canonical(raw)
    assume(len(name) >= 2)
    at = data.draw(st.integers(min_value=1, max_value=len(name) - 1))
    with refused(400, field="speaker"):
        check_speaker(name[:at] + control + name[at:])


@given(valid_names(), st.sampled_from(sorted(INVISIBLES.values())), st.data())
def test_an_invisible_character_anywhere_in_any_name_is_refused_naming_the_speaker_field(
    raw: str, invisible: str, data: Any
) -> None:
    """At either end too: an invisible character is not white space, so it is never trimmed."""
    name = canonical(raw)
    at = data.draw(st.integers(min_value=0, max_value=len(name)))
    with refused(400, field="speaker"):
        check_speaker(name[:at] + invisible + name[at:])
    with refused(400, field="new_name"):
        check_person(name[:at] + invisible + name[at:], field="new_name")


@pytest.mark.slow
@settings(max_examples=15)  # each example is a real register, write, read and search
@given(valid_names())
def test_any_valid_name_is_the_same_person_from_registration_to_search(service: Any, raw: str) -> None:
    """register -> speakers_list -> memory_add -> by_speaker -> search, exactly as written."""
    name = canonical(raw)
    store = f"names-{next(STORE_NUMBERS)}"
    service.store_create(store)
    try:
        registered = service.speaker_register(raw, user_id=store)
        assert (registered["speaker"], registered["status"]) == (name, "registered")
        assert [s["speaker"] for s in service.speakers_list(user_id=store)["speakers"]] == [name]

        added = service.memory_add("The parcel arrives on Monday at 9.", speaker=raw, user_id=store)
        assert added["status"] == "stored"
        assert added["speaker"] == name

        said = service.by_speaker(name, user_id=store)
        assert [(m["id"], m["speaker"]) for m in said["memories"]] == [(added["id"], name)]
        hits = service.memory_search("when does the parcel arrive?", speaker=name, limit=5, user_id=store)
        assert [(m["id"], m["speaker"]) for m in hits["memories"]] == [(added["id"], name)]
        assert service.speakers_list(user_id=store)["speakers"][0]["memories"] == 1
    finally:
        service.store_delete(store)


# -- speaker names: examples ---------------------------------------------------------------------


def test_a_decomposed_name_is_stored_in_its_composed_nfc_form(service: Any) -> None:
    decomposed, composed = "Zoe\u0301", "Zo\u00e9"
    assert check_speaker(decomposed) == composed
    assert service.speaker_register(decomposed)["speaker"] == composed
    assert service.speaker_register(composed)["status"] == "exists"
    assert service.speakers_list()["count"] == 1


def test_eighty_composed_characters_fit_even_when_written_decomposed() -> None:
    assert check_speaker("e\u0301" * 80) == "\u00e9" * 80


@pytest.mark.slow
@pytest.mark.parametrize("raw", ["  Bob", "Bob  ", "\tBob\n", "\u3000Bob\u00a0", "\r\nBob\r\n", " Bob "])
def test_white_space_around_a_name_is_trimmed_so_it_is_the_same_person(service: Any, raw: str) -> None:
    service.speaker_register("Bob")
    again = service.speaker_register(raw)
    assert (again["speaker"], again["status"], again["count"]) == ("Bob", "exists", 1)
    added = service.memory_add("I moved to Lisbon.", speaker=raw)
    assert added["speaker"] == "Bob"
    assert [m["id"] for m in service.by_speaker(raw)["memories"]] == [added["id"]]


@pytest.mark.parametrize(
    "bad",
    ["Bo\nb", "Bo\tb", "Bob\u202eevil", "Bo\u2028b", "Bo\x00b", "Bo\ud800b", "Bo\x7fb", "Bo\u2066b", "Bo\ue000b"],
    ids=[
        "newline",
        "tab",
        "rtl-override",
        "line-separator",
        "nul",
        "lone-surrogate",
        "del",
        "bidi-isolate",
        "private-use",
    ],
)
def test_a_control_character_inside_a_name_is_refused_everywhere(service: Any, bad: str) -> None:
    with refused(400, field="speaker"):
        check_speaker(bad)
    with refused(400, field="speaker"):
        service.speaker_register(bad)
    with refused(400, field="speaker"):
        service.memory_add("hello there", speaker=bad)
    with refused(400, field="speaker"):
        service.memory_search("hello", speaker=bad)
    with refused(400, field="speaker"):
        service.by_speaker(bad)
    assert service.speakers_list()["count"] == 0


@pytest.mark.parametrize("invisible", list(INVISIBLES.values()), ids=list(INVISIBLES))
def test_an_invisible_character_in_a_name_is_refused_on_every_path_a_name_enters(service: Any, invisible: str) -> None:
    """register, rename's new_name, merge's into, a message's name, the speaker of a write,
    a search, by_speaker, a listing, a removal: 400 naming the field, nothing changed."""
    service.speaker_register("Bob")
    service.speaker_register("Ann")
    bad = f"Bo{invisible}b"
    for field, call in (
        ("speaker", lambda: service.speaker_register(bad)),
        ("speaker", lambda: service.speaker_register(invisible + "Bob")),
        ("new_name", lambda: service.speaker_rename("Bob", bad)),
        ("into", lambda: service.speaker_merge("Ann", bad, confirm_records=0)),
        ("speaker", lambda: service.speaker_merge(bad, "Bob", confirm_records=0)),
        ("messages[0].name", lambda: service.memory_add_messages([{"role": "user", "name": bad, "content": "hi"}])),
        ("speaker", lambda: service.memory_add("hello there", speaker=bad)),
        ("speaker", lambda: service.memory_search("hello", speaker=bad)),
        ("speaker", lambda: service.by_speaker(bad)),
        ("speaker", lambda: service.memory_list(speaker=bad)),
        ("speaker", lambda: service.speaker_remove(bad)),
    ):
        with refused(400, field=field) as info:
            call()
        assert f"invisible character (U+{ord(invisible):04X})" in info.value.message, field
    assert [s["speaker"] for s in service.speakers_list()["speakers"]] == ["Bob", "Ann"]
    assert service.memory_list()["count"] == 0


def test_the_checks_run_in_specs_order_control_then_invisible_then_length_then_reserved() -> None:
    for raw, says in (
        ("Bo\u200bb\n!", "control character (U+000A)"),  # control before invisible
        ("\u200b" + "x" * 90, "invisible character (U+200B)"),  # invisible before length
        ("\u200bme", "invisible character (U+200B)"),  # invisible before reserved
        (" \u200b ", "invisible character (U+200B)"),  # not white space: nothing is trimmed to empty
    ):
        with refused(400, field="speaker") as info:
            check_speaker(raw)
        assert says in info.value.message, raw


def test_the_default_ignorable_table_is_unicodes_property_as_the_regex_module_has_it() -> None:
    """``DEFAULT_IGNORABLE`` is DerivedCoreProperties' Default_Ignorable_Code_Point: the
    same code points as ``regex``'s ``\\p{Default_Ignorable_Code_Point}``, in sorted,
    disjoint, non-adjacent ranges."""
    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    expected = [c for c in range(0x110000) if prop.match(chr(c))]
    assert [c for a, b in DEFAULT_IGNORABLE for c in range(a, b + 1)] == expected
    assert all(b + 1 < c for (_, b), (c, _) in itertools.pairwise(DEFAULT_IGNORABLE))


@pytest.mark.parametrize("blank", list(BLANKS.values()), ids=list(BLANKS))
def test_a_blank_other_than_a_space_inside_a_name_is_refused_naming_its_code_point(service: Any, blank: str) -> None:
    """U+00A0, U+1680, U+2000-U+200A, U+202F, U+205F, U+3000 and the braille blank U+2800
    inside a name: 400 on every path a name enters, nothing changed. The code point named
    is the one NFC leaves (U+2000 and U+2001 are U+2002 and U+2003 in NFC)."""
    named = ord(unicodedata.normalize("NFC", blank))
    service.speaker_register("Bob")
    service.speaker_register("Ann")
    bad = f"Bo{blank}b"
    for field, call in (
        ("speaker", lambda: service.speaker_register(bad)),
        ("speaker", lambda: service.speaker_register(f"Ann{blank}Lee")),
        ("new_name", lambda: service.speaker_rename("Bob", bad)),
        ("into", lambda: service.speaker_merge("Ann", bad, confirm_records=0)),
        ("messages[0].name", lambda: service.memory_add_messages([{"role": "user", "name": bad, "content": "hi"}])),
        ("speaker", lambda: service.memory_add("hello there", speaker=bad)),
    ):
        with refused(400, field=field) as info:
            call()
        assert f"blank other than a space (U+{named:04X})" in info.value.message, field
    assert [s["speaker"] for s in service.speakers_list()["speakers"]] == ["Bob", "Ann"]
    assert service.speaker_register("Ann Lee")["status"] == "registered"  # U+0020 is the space of names


def test_white_space_at_the_ends_is_trimmed_before_blanks_are_refused_and_the_braille_blank_is_not_trimmed() -> None:
    assert check_speaker("\u00a0\u3000Bob\u2009\u1680") == "Bob"
    with refused(400, field="speaker") as info:
        check_speaker("\u2800Bob")
    assert "U+2800" in info.value.message
    for raw, says in (
        ("Bo\u00a0b\n!", "control character (U+000A)"),  # control before blank
        ("Bo\u00a0b" + "x" * 90, "blank other than a space (U+00A0)"),  # blank before length
        ("m\u00a0e", "blank other than a space (U+00A0)"),  # blank before reserved
    ):
        with refused(400, field="speaker") as info:
            check_speaker(raw)
        assert says in info.value.message, raw


def test_similar_to_compares_names_without_their_invisible_and_blank_characters() -> None:
    """A name registered before the rule refused them (``Bo\u034fb``, ``Bo\u200ab``) is
    named as a look-alike of ``Bob``, and ``Bob`` of it."""
    older = ["Bo\u034fb", "Bo\u200ab", "B\ufe0fob", "\u2800Bob", "Ann"]
    assert similar_names("Bob", older) == older[:4]
    assert similar_names("Bo\u180bb", ["Bob", "Rob"]) == ["Bob"]


@pytest.mark.parametrize("separator", ["\x1c", "\x1d", "\x1e", "\x1f"])
def test_an_information_separator_at_the_end_is_a_control_character_not_white_space(separator: str) -> None:
    """U+001C..U+001F are Cc and not Unicode White_Space, so they are refused as control
    characters, not trimmed (Python's ``str.strip`` would trim them as if they were spaces)."""
    with refused(400, field="speaker"):
        check_speaker("Bob" + separator)


def test_eighty_characters_are_a_name_and_eighty_one_are_refused(service: Any) -> None:
    assert check_speaker("x" * 80) == "x" * 80
    assert check_speaker("😀" * 80) == "😀" * 80
    for too_long in ("x" * 81, "😀" * 81, "さ" * 81):
        with refused(400, field="speaker", max_chars=80):
            check_speaker(too_long)
    assert service.speaker_register("y" * 80)["status"] == "registered"
    with refused(400, field="speaker"):
        service.speaker_register("y" * 81)


@pytest.mark.parametrize("empty", ["", "   ", "\t\n", "\u3000"])
def test_an_empty_name_is_refused(empty: str) -> None:
    with refused(400, field="speaker"):
        check_speaker(empty)


@pytest.mark.parametrize("not_text", [5, None, ["Bob"], b"Bob"])
def test_a_name_that_is_not_text_is_refused(not_text: Any) -> None:
    with refused(400, field="speaker"):
        check_speaker(not_text)


@pytest.mark.parametrize("spelling", ["Me", "ME", "mE", " Me ", "ME\t"])
def test_any_other_spelling_of_me_is_refused_never_reinterpreted(service: Any, spelling: str) -> None:
    for call in (
        lambda: service.memory_add("I will send the summary.", speaker=spelling),
        lambda: service.memory_search("summary", speaker=spelling),
        lambda: service.by_speaker(spelling),
        lambda: service.speaker_register(spelling),
        lambda: service.speaker_remove(spelling),
    ):
        with refused(400, field="speaker"):
            call()
    assert service.memory_list()["count"] == 0


@pytest.mark.slow
def test_full_width_me_is_an_ordinary_name_that_must_be_registered(service: Any) -> None:
    with refused(400, field="speaker", speaker="ｍｅ"):
        service.memory_add("full width hello", speaker="ｍｅ")
    assert service.speaker_register("ｍｅ")["status"] == "registered"
    assert service.memory_add("full width hello", speaker="ｍｅ")["speaker"] == "ｍｅ"
    assert [s["speaker"] for s in service.speakers_list()["speakers"]] == ["ｍｅ"]
    assert service.by_speaker("me")["memories"] == []


@pytest.mark.slow
def test_me_needs_no_registration_and_registering_or_removing_it_is_refused(service: Any) -> None:
    assert service.memory_add("I promised the summary by Friday.", speaker="me")["speaker"] == "me"
    for call in (service.speaker_register, service.speaker_remove):
        with refused(400, field="speaker"):
            call("me")
        with refused(400, field="speaker"):
            call(" me ")
    assert service.speakers_list()["speakers"] == []
    assert service.by_speaker("me")["returned"] == 1


@pytest.mark.slow
def test_bob_and_bob_in_lower_case_are_two_people(service: Any) -> None:
    service.speaker_register("Bob")
    with refused(400, field="speaker", speaker="bob"):
        service.memory_add("lower-case bob speaking", speaker="bob")
    assert service.speaker_register("bob")["status"] == "registered"
    upper = service.memory_add("I like tea.", speaker="Bob")["id"]
    lower = service.memory_add("I like tea.", speaker="bob")["id"]
    assert upper != lower
    assert [m["id"] for m in service.by_speaker("Bob")["memories"]] == [upper]
    assert [m["id"] for m in service.by_speaker("bob")["memories"]] == [lower]
    assert service.speakers_list()["count"] == 2


# Cyrillic В (U+0412) and о (U+043E) in "Воb"; Greek Β (U+0392) and ο (U+03BF) in "Βοb".
CYRILLIC_BOB, GREEK_BOB = "\u0412\u043eb", "\u0392\u03bfb"


@pytest.mark.slow
def test_a_name_like_a_registered_one_is_another_person_and_the_answer_says_which(service: Any) -> None:
    """Through the library: equal after case-folding or after mapping look-alike letters
    to one skeleton is registered (two people) with ``similar_to``; a digit for a letter
    (``B0b``) or another name is no look-alike; ``similar_to`` is absent when none."""
    mem = Memory(service=service)
    first = mem.add_speaker("Bob")
    assert first["status"] == "registered"
    assert "similar_to" not in first
    for name, similar in (
        ("bob", ["Bob"]),
        (CYRILLIC_BOB, ["Bob", "bob"]),
        ("BOB", ["Bob", "bob", CYRILLIC_BOB]),
        (GREEK_BOB, ["Bob", "bob", CYRILLIC_BOB, "BOB"]),
    ):
        answer = mem.add_speaker(name)
        assert (answer["speaker"], answer["status"], answer["similar_to"]) == (name, "registered", similar)
    for unlike in ("B0b", "Rob", "Bobby", "Иван"):
        answer = mem.add_speaker(unlike)
        assert answer["status"] == "registered", unlike
        assert "similar_to" not in answer, unlike
    assert mem.list_speakers()["count"] == 9
    said = mem.add("I booked the room.", speaker=CYRILLIC_BOB)
    assert said["speaker"] == CYRILLIC_BOB
    assert mem.by_speaker("Bob")["memories"] == []  # look-alikes are never the same person


@pytest.mark.slow
@pytest.mark.anyio
async def test_similar_to_reaches_mcp_clients_and_validates_against_the_declared_schema(service: Any) -> None:
    async with mcp_session(service) as mcp:
        schema = mcp.tools["speaker_register"].output_schema["$defs"]["SpeakerRegisterAnswer"]
        assert "similar_to" in schema["properties"]
        assert "similar_to" not in schema["required"]
        plain = await mcp.ok("speaker_register", speaker="Ann")
        assert "similar_to" not in plain
        look_alike = await mcp.ok("speaker_register", speaker="\u0410nn")  # Cyrillic А
        assert (look_alike["status"], look_alike["similar_to"]) == ("registered", ["Ann"])
        again = await mcp.ok("speaker_register", speaker="Ann")
        assert (again["status"], again["similar_to"]) == ("exists", ["\u0410nn"])
        error = await mcp.refused(
            "speaker_register", {"speaker": "An\u200bn"}, status=400, type="invalid_request_error", field="speaker"
        )
        assert "invisible" in error["message"]
        await mcp.refused(
            "speaker_rename", {"speaker": "Ann", "new_name": "\ufeffAnn"}, status=400,
            type="invalid_request_error", field="new_name",
        )  # fmt: skip
        listed = await mcp.ok("speakers_list")
        assert [s["speaker"] for s in listed["speakers"]] == ["Ann", "\u0410nn"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["さくら", "Иван", "하늘", "Bob", "Zoë"])
def test_names_in_any_script_behave_identically(service: Any, name: str) -> None:
    assert service.speaker_register(name)["status"] == "registered"
    assert service.speaker_register(name)["status"] == "exists"
    added = service.memory_add("The train leaves at seven.", speaker=name)
    service.memory_add("Someone else entirely.")
    assert [m["id"] for m in service.by_speaker(name)["memories"]] == [added["id"]]
    hits = service.memory_search("when does the train leave?", speaker=name, limit=5)["memories"]
    assert [m["id"] for m in hits] == [added["id"]]
    removed = service.speaker_remove(name)
    assert removed["memories_untagged"] == 1
    with refused(404, speaker=name):
        service.by_speaker(name)


# -- store ids -------------------------------------------------------------------------------------


@given(store_ids)
def test_any_id_of_the_grammar_is_accepted_as_given(store_id: str) -> None:
    assert check_store_id(store_id) == store_id


@given(st.text(max_size=70).filter(lambda s: not STORE_ID.fullmatch(s)))
def test_any_id_outside_the_grammar_is_refused_naming_user_id(bad: str) -> None:
    with refused(400, field="user_id"):
        check_store_id(bad)


@pytest.mark.parametrize(
    "bad", ["", "-alice", ".alice", "_alice", "al ice", "al/ice", "ålice", "alice\n", "a" * 65, "x' OR '1'='1", "a:b"]
)
def test_a_bad_store_id_is_refused_by_every_call(service: Any, bad: str) -> None:
    refused_by_every_store_call(service, bad)
    assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default"]


def test_sixty_four_characters_are_a_store_id_and_sixty_five_are_not(service: Any) -> None:
    assert service.store_create("a" * 64) == {"user_id": "a" * 64, "status": "created"}
    with refused(400, field="user_id"):
        service.store_create("b" * 65)


@pytest.mark.slow
def test_store_lookup_ignores_case_and_answers_echo_the_id_as_created(service: Any) -> None:
    assert service.store_create("Alice") == {"user_id": "Alice", "status": "created"}
    assert service.store_create("ALICE") == {"user_id": "Alice", "status": "exists"}
    assert service.speaker_register("Bob", user_id="alice")["user_id"] == "Alice"
    assert service.memory_add("hello from alice's store", user_id="aLiCe")["user_id"] == "Alice"
    assert service.speakers_list(user_id="ALICE")["speakers"][0]["speaker"] == "Bob"
    assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default", "Alice"]


def test_ids_differing_only_in_dot_dash_or_underscore_cannot_both_exist(service: Any) -> None:
    assert service.store_create("alice-smith")["status"] == "created"
    for twin in ("alice.smith", "alice_smith", "Alice.Smith"):
        with refused(409, field="user_id", conflicts_with="alice-smith"):
            service.store_create(twin)
        with refused(404, user_id=twin):
            service.speakers_list(user_id=twin)
    assert service.store_create("ALICE-SMITH") == {"user_id": "alice-smith", "status": "exists"}
    assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default", "alice-smith"]


def test_creating_an_existing_store_answers_exists(service: Any) -> None:
    assert service.store_create("team")["status"] == "created"
    assert service.store_create("team")["status"] == "exists"
    assert service.store_create("default") == {"user_id": "default", "status": "exists"}


# -- dates -------------------------------------------------------------------------------------------

offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))


@given(st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 12, 30), timezones=offsets))
def test_any_rfc3339_moment_with_an_offset_parses_to_the_same_instant(moment: datetime) -> None:
    us, text = parse_moment(moment.isoformat(), field="event_date")
    assert us == to_us(moment)
    assert text == format_us(us)
    assert datetime.fromisoformat(text.replace("Z", "+00:00")) == moment


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-07-10T04:20:39Z", "2026-07-10T04:20:39.000000Z"),
        ("2026-07-10T04:20:39z", "2026-07-10T04:20:39.000000Z"),
        ("2026-07-10t04:20:39Z", "2026-07-10T04:20:39.000000Z"),
        ("2026-07-10T06:20:39+02:00", "2026-07-10T04:20:39.000000Z"),
        ("2026-07-09T23:50:39-04:30", "2026-07-10T04:20:39.000000Z"),
        ("2026-07-10T04:20:39.123456Z", "2026-07-10T04:20:39.123456Z"),
        ("2026-07-10T04:20:39.1Z", "2026-07-10T04:20:39.100000Z"),
        ("2026-07-10T04:20:39.123456789+00:00", "2026-07-10T04:20:39.123456Z"),
    ],
)
def test_rfc3339_with_an_offset_or_z_is_one_utc_instant(raw: str, expected: str) -> None:
    assert parse_moment(raw, field="event_date")[1] == expected


def test_a_plain_day_means_that_utc_day_and_as_an_end_bound_the_whole_day() -> None:
    start, text = parse_moment("2026-07-10", field="event_from")
    end, _ = parse_moment("2026-07-10", field="event_to", end_of_day=True)
    assert text == "2026-07-10"
    assert start == to_us(datetime(2026, 7, 10, tzinfo=timezone.utc))
    assert end == to_us(datetime(2026, 7, 11, tzinfo=timezone.utc)) - 1


@pytest.mark.parametrize(
    "bad",
    [
        "2026-07-10T04:20:39",
        "2026-07-10 04:20",
        "yesterday",
        "2026-13-01",
        "2026-02-30",
        "2026-07-10T25:00:00Z",
        "2026-07-10T04:20:39+24:00",
        "10/07/2026",
        "",
        "20260710",
        "2026-07-10T04:20:39Z'; DROP TABLE chunks;--",
    ],
)
def test_a_date_without_an_offset_or_garbage_is_refused_naming_the_field(bad: str) -> None:
    with refused(400, field="event_date"):
        parse_moment(bad, field="event_date")


@pytest.mark.parametrize("not_text", [20260710, None, 1.5, ["2026-07-10"]])
def test_a_date_that_is_not_text_is_refused(not_text: Any) -> None:
    with refused(400, field="filters.time_from"):
        parse_moment(not_text, field="filters.time_from")


@pytest.mark.parametrize("edge", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_a_moment_at_the_edge_of_the_calendar_is_refused_or_kept_never_a_crash(service: Any, edge: str) -> None:
    """RFC 3339 syntax whose UTC instant falls outside years 1-9999: a 400 or a stored
    date, never an unexpected exception (a 500)."""
    refused: InvalidRequestError | None = None
    try:
        added = service.memory_add("An event at the edge of time.", event_date=edge)
    except InvalidRequestError as error:
        refused = error
    if refused is not None:
        assert refused.field == "event_date"
        assert service.memory_list()["count"] == 0
    else:
        assert service.memory_get(added["id"])["memory"]["event_date"]


def test_an_early_year_is_written_with_four_digits() -> None:
    """RFC 3339 years have four digits: year 999 is ``0999``."""
    _, text = parse_moment("0999-05-01T00:00:00Z", field="event_date")
    assert text == "0999-05-01T00:00:00.000000Z"


@pytest.mark.slow
def test_the_service_keeps_event_date_and_buckets_by_it(service: Any) -> None:
    added = service.memory_add("The launch happened.", event_date="2026-03-05T23:30:00-02:00")
    memory = service.memory_get(added["id"])["memory"]
    assert datetime.fromisoformat(memory["event_date"].replace("Z", "+00:00")) == datetime(
        2026, 3, 6, 1, 30, tzinfo=timezone.utc
    )
    assert memory["time_bucket"] == "2026-03"
    day = service.memory_get(service.memory_add("The party was fun.", event_date="2025-12-24")["id"])["memory"]
    assert (day["event_date"], day["time_bucket"]) == ("2025-12-24", "2025-12")


@pytest.mark.parametrize("bad", ["2026-07-10T04:20:39", "soon", "2026-02-30"])
def test_the_service_refuses_a_bad_event_date_and_stores_nothing(service: Any, bad: str) -> None:
    with refused(400, field="event_date"):
        service.memory_add("Something happened.", event_date=bad)
    assert service.memory_list()["count"] == 0

"""The pure rules of a conversation import: its options checked, a long message cut, its keys."""

from __future__ import annotations

import pytest
from support import refused

from wontopos_mcp.rules.import_options import conversation_label, cut_message, import_key, import_options


def test_a_message_longer_than_a_memory_is_cut_at_sentence_ends_into_consecutive_pieces() -> None:
    sentence = "Это длинное предложение о поездке в горы и обратно. "
    text = sentence * 1000  # about 52,000 characters
    pieces = cut_message(text, 32_000)
    assert len(pieces) == 2
    assert all(len(piece) <= 32_000 for piece in pieces)
    assert all(piece.endswith("обратно.") for piece in pieces)
    assert " ".join(pieces) == text.strip()


def test_a_sentence_longer_than_a_memory_is_cut_at_the_limit() -> None:
    pieces = cut_message("x" * 70_000, 32_000)
    assert [len(p) for p in pieces] == [32_000, 32_000, 6_000]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"format": "excel"}, "format"),
        ({"as_": ["no equals sign"]}, "as"),
        ({"as_": ["Ana=Bob\u0007"]}, "as"),
        ({"as_": {"Ana": 3}}, "as"),
        ({"register": "yes"}, "register"),
        ({"dry_run": 1}, "dry_run"),
        ({"user_name": "me"}, "user_name"),
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"tz": "../../etc/passwd"}, "tz"),
        ({"start": "yesterday"}, "start"),
        ({"skip": [3]}, "skip"),
    ],
)
def test_a_bad_option_is_a_400_naming_it(options: dict[str, object], field: str) -> None:
    with refused(400, field=field):
        import_options(**options)


def test_as_splits_on_the_last_equals_and_matches_names_in_their_normal_form() -> None:
    options = import_options(as_=[" a=b = Bob ", "Ana=me", "Old=-"], skip=["  Zoë "])
    assert options.as_ == {"a=b": "Bob", "Ana": "me", "Old": "-"}
    assert options.skip == frozenset({"Zoë"})


def test_keys_differ_by_format_conversation_and_identity_and_fit_an_idempotency_key() -> None:
    keys = {
        import_key("whatsapp", "chat.txt", ["id", "1"]),
        import_key("telegram", "chat.txt", ["id", "1"]),
        import_key("whatsapp", "other.txt", ["id", "1"]),
        import_key("whatsapp", "chat.txt", ["id", "2"]),
    }
    assert len(keys) == 4
    assert all(len(key) <= 128 and key.startswith("import:c-") for key in keys)


def test_a_conversation_id_too_long_for_a_label_is_shortened_by_a_digest() -> None:
    long_one, other = "C" * 300, "C" * 299 + "D"
    assert len(conversation_label("slack", long_one)) <= 128
    assert conversation_label("slack", long_one) != conversation_label("slack", other)
    assert conversation_label("slack", "C1") == "slack:C1"

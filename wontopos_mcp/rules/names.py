"""Speaker names and store ids: every check, in the order it applies, in one place.

Speaker names: NFC, trim Unicode white space at both ends, refuse remaining control
characters, then invisible ones (every Default_Ignorable_Code_Point) and blanks other
than U+0020 inside the name, 1-80 code points, then the reserved-name check. After
that, matching is exact (``Bob`` and ``bob`` are two people) so a typo never merges two
persons; ``similar_names`` only tells a registration which names it could be mistaken for
(the same after case-folding, or after mapping look-alike letters to one skeleton).

Store ids: 1-64 of ``[A-Za-z0-9._-]`` starting with a letter or digit. Lookup ignores
case only; ids that differ only in ``.``/``_``/``-`` share a *skeleton* and cannot both
exist (``alice-smith`` blocks ``alice.smith``).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from wontopos_mcp.errors import InvalidRequestError

from .validation import bounded

ME = "me"
MAX_SPEAKER_CHARS = 80
DEFAULT_STORE = "default"
# How many people a store registers unless configured otherwise (``me`` never counts).
DEFAULT_SPEAKER_LIMIT = 50

# Bidi embedding/override/isolate controls and marks: invisible, and able to make a
# name display as another one.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_SEPARATORS = frozenset("\u2028\u2029")
# Unicode White_Space (not Python's isspace, which also counts U+001C-U+001F, the
# information separators: those are control characters, refused, never trimmed).
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
# Characters that show as nothing: a name holding one displays as another name (``Bob``
# and ``Bo\u200bb``) or as nothing. Unicode's Default_Ignorable_Code_Point, as
# DerivedCoreProperties.txt lists it: format characters (Cf: zero-width
# space and joiners, word joiner, BOM, soft hyphen, tag characters), the variation
# selectors, the combining grapheme joiner, the Mongolian free variation selectors,
# Khmer's inherent vowels, the Hangul fillers (letters that render blank) and the
# reserved stretches around them. Python's ``unicodedata`` lacks the property, so the
# ranges are written out here, and tests/rules/test_names.py checks them against the
# ``regex`` module's copy of the same data. Every other Cf character is refused too.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE_STARTS = [start for start, _ in DEFAULT_IGNORABLE]
# Characters that show as a blank: inside a name only U+0020 separates words (a name with
# U+00A0 or U+200A displays as another name), and the braille blank U+2800 is no space but
# looks like one.
_BLANKS = frozenset(_WHITE_SPACE.replace(" ", "") + "\u2800")
# Marks the confusables data puts around right-to-left characters so that they display.
_DIRECTION_MARKS = "\u200e\u200f"
_STORE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _is_forbidden(ch: str) -> bool:
    return ch in _BIDI or ch in _LINE_SEPARATORS or unicodedata.category(ch) in ("Cc", "Cs", "Co")


def is_default_ignorable(ch: str) -> bool:
    """Whether ``ch`` is a Default_Ignorable_Code_Point (``DEFAULT_IGNORABLE``)."""
    at = bisect.bisect_right(_IGNORABLE_STARTS, ord(ch)) - 1
    return at >= 0 and ord(ch) <= DEFAULT_IGNORABLE[at][1]


def _is_invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cf" or is_default_ignorable(ch)


def _is_blank(ch: str) -> bool:
    return ch in _BLANKS


def check_speaker(raw: object, *, field: str = "speaker") -> str:
    """Return the canonical form of a speaker name, or raise a 400 naming ``field``."""
    if not isinstance(raw, str):
        raise InvalidRequestError(f"{field} must be a string", field=field)
    name = unicodedata.normalize("NFC", raw).strip(_WHITE_SPACE)
    for is_bad, what, kind in (
        (_is_forbidden, "a control character", "plain text"),
        (_is_invisible, "an invisible character", "visible text"),
        (_is_blank, "a blank other than a space", "words separated by plain spaces (U+0020)"),
    ):
        bad = next((ch for ch in name if is_bad(ch)), None)
        if bad is not None:
            raise InvalidRequestError(
                f"{field} contains {what} (U+{ord(bad):04X}); names are {kind}", field=field, speaker=name
            )
    if not name:
        raise InvalidRequestError(f"{field} must not be empty", field=field)
    bounded(name, field=field, max_chars=MAX_SPEAKER_CHARS)
    if name != ME and name.casefold() == ME:
        raise InvalidRequestError(
            f"'{name}' is reserved: write exactly 'me' for the assistant itself",
            field=field,
            speaker=name,
        )
    return name


def check_person(raw: object, *, field: str = "speaker") -> str:
    """A speaker that must be a registered person: ``me`` is refused (register/remove)."""
    name = check_speaker(raw, field=field)
    if name == ME:
        raise InvalidRequestError(
            "'me' is the assistant itself: it is never registered or removed", field=field, speaker=ME
        )
    return name


def similar_names(name: str, others: Iterable[str]) -> list[str]:
    """The ``others`` a person named ``name`` could be mistaken for: equal after
    case-folding, or after mapping look-alike letters to one skeleton (Cyrillic ``Воb``
    and Latin ``Bob``). They are other people all the same; registration only says so."""
    keys = _look_alike_keys(name)
    return [other for other in others if other != name and keys & _look_alike_keys(other)]


def _look_alike_keys(name: str) -> frozenset[str]:
    """Case-folded skeletons, folded before and after the mapping (``ВОВ`` folds to
    ``вов``, whose ``в`` looks like no Latin letter, while ``В`` is ``B``), of the name
    without the characters ``check_speaker`` refuses as invisible or blank: a name
    registered before that rule (``Bo\u034fb``) is then a look-alike of ``Bob``."""
    name = "".join(ch for ch in name if not (_is_invisible(ch) or _is_blank(ch)))
    folded = name.casefold()
    return frozenset((folded, _skeleton(name).casefold(), _skeleton(folded)))


def _skeleton(text: str) -> str:
    """UTS #39's skeleton (NFD, each character to its prototype, NFD), letters only:
    a digit or a sign is no letter's look-alike here (``B0b`` is not ``Bob``)."""
    prototypes = _letter_prototypes()
    mapped = "".join(prototypes.get(ch, ch) for ch in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


@cache
def _letter_prototypes() -> dict[str, str]:
    """Each letter with a look-alike, to the prototype Unicode's confusables data gives
    it, when the prototype is letters too (``В`` -> ``B``, ``ρ`` -> ``p``, ``m`` -> ``rn``).

    confusable_homoglyphs ships that data (UTS #39 confusables.txt) as a map of every
    character to its look-alikes both ways: a source lists its one prototype, a prototype
    its sources. A pair that lists only each other is one class either way; its smaller
    member stands for both. Loaded at the first registration (~50 ms), not at import.
    """
    from confusable_homoglyphs.confusables import confusables_data

    def letters(text: str) -> bool:
        return bool(text) and all(unicodedata.category(ch)[0] in "LM" for ch in text)

    def strip(text: str) -> str:
        return text.strip(_DIRECTION_MARKS)

    look_alikes = {strip(key): [strip(entry["c"]) for entry in entries] for key, entries in confusables_data.items()}
    prototypes = {}
    for char, entries in look_alikes.items():
        if len(char) != 1 or len(entries) != 1 or not letters(char):
            continue  # a prototype lists its several sources; a source lists one prototype
        (target,) = entries
        if look_alikes.get(target) == [char]:
            target = min(char, target)
        if letters(target) and target != char:
            prototypes[char] = target
    return prototypes


def check_store_id(raw: object, *, field: str = "user_id") -> str:
    """Return a valid store id as given, or raise a 400 naming ``field``."""
    if not isinstance(raw, str):
        raise InvalidRequestError(f"{field} must be a string", field=field)
    if not _STORE_ID.fullmatch(raw):
        raise InvalidRequestError(
            f"{field} must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
            field=field,
            user_id=raw[:100],
        )
    return raw


def named_store(raw: object) -> str:
    """The store a call names, checked: a ``user_id`` left out (``None``) is the built-in
    default store on every operation that names one (the one place this is decided)."""
    return check_store_id(DEFAULT_STORE if raw is None else raw)


def store_key(store_id: str) -> str:
    """The case-insensitive key a store is found by."""
    return store_id.lower()


def store_skeleton(store_id: str) -> str:
    """Ids with equal skeletons cannot both exist (they differ only in case or ``._-``)."""
    return re.sub(r"[._-]", "", store_id.lower())

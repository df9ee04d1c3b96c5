"""Speaker names and store ids: the checks SPEC applies, in its order, in one place.

Speaker names: NFC, trim Unicode white space at both ends, refuse remaining control
characters, 1-80 code points, then the reserved-name check. After that, matching is
exact (``Bob`` and ``bob`` are two people) so a typo never merges two persons.

Store ids: 1-64 of ``[A-Za-z0-9._-]`` starting with a letter or digit. Lookup ignores
case only; ids that differ only in ``.``/``_``/``-`` share a *skeleton* and cannot both
exist (``alice-smith`` blocks ``alice.smith``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .errors import InvalidRequestError
from .validation import bounded

ME = "me"
MAX_SPEAKER_CHARS = 80
DEFAULT_STORE = "default"

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
_STORE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _is_forbidden(ch: str) -> bool:
    return ch in _BIDI or ch in _LINE_SEPARATORS or unicodedata.category(ch) in ("Cc", "Cs", "Co")


def check_speaker(raw: Any, *, field: str = "speaker") -> str:
    """Return the canonical form of a speaker name, or raise a 400 naming ``field``."""
    if not isinstance(raw, str):
        raise InvalidRequestError(f"{field} must be a string", field=field)
    name = unicodedata.normalize("NFC", raw).strip(_WHITE_SPACE)
    bad = next((ch for ch in name if _is_forbidden(ch)), None)
    if bad is not None:
        raise InvalidRequestError(
            f"{field} contains a control character (U+{ord(bad):04X}); names are plain text",
            field=field,
            speaker=name,
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


def check_person(raw: Any, *, field: str = "speaker") -> str:
    """A speaker that must be a registered person: ``me`` is refused (register/remove)."""
    name = check_speaker(raw, field=field)
    if name == ME:
        raise InvalidRequestError(
            "'me' is the assistant itself: it is never registered or removed", field=field, speaker=ME
        )
    return name


def check_store_id(raw: Any, *, field: str = "user_id") -> str:
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


def store_key(store_id: str) -> str:
    """The case-insensitive key a store is found by."""
    return store_id.lower()


def store_skeleton(store_id: str) -> str:
    """Ids with equal skeletons cannot both exist (they differ only in case or ``._-``)."""
    return re.sub(r"[._-]", "", store_id.lower())

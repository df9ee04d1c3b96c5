"""The options of a conversation import, checked, and the pure rules an import follows.

``ImportOptions`` is what every face hands the engine (``engine.conversation_import``): the
CLI from its flags, the library from its arguments, REST from the query string. The rules
here need no store: how an export's name is matched against ``as``/``skip`` (the name rules'
own normal form, so ``' Ana '`` in a flag matches ``Ana`` in the file), the import key of a
message, and how a message longer than a memory is cut.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from wontopos_mcp.errors import InvalidRequestError

from . import validation as v
from .dates import parse_moment
from .names import check_speaker
from .text import split_sentences

UNTAGGED = "-"  # ``--as 'Name=-'``: that person's messages are stored without a speaker
ME = "me"
JSONL = "jsonl"  # this product's own export: read by the CLI's line importer, not a reader
FORMAT_NAMES = (
    "auto", "whatsapp", "telegram", "slack", "discord", "chatgpt", "claude", "claude-code",
    "vtt", "srt", "transcript", "jsonl",
)  # fmt: skip


@dataclass(frozen=True)
class ImportOptions:
    """A conversation import's options, checked (``import_options``)."""

    format: str = "auto"
    as_: Mapping[str, str] = field(default_factory=dict)  # export name (normal form) -> speaker, "me" or "-"
    skip: frozenset[str] = frozenset()  # export names (normal form) left out
    register: bool = False
    user_name: str | None = None
    tz: tzinfo = timezone.utc
    tz_name: str = "UTC"
    start: datetime | None = None
    dry_run: bool = False


def name_key(name: str) -> str:
    """How an export's name and a flag's name are compared: NFC, white space trimmed."""
    return unicodedata.normalize("NFC", name).strip()


def import_options(
    *,
    format: object = "auto",
    as_: object = None,
    skip: object = None,
    register: object = False,
    user_name: object = None,
    tz: object = None,
    start: object = None,
    dry_run: object = False,
    local_zone: str = "UTC",
) -> ImportOptions:
    """Options as a caller sent them, checked: a bad one is a 400 naming it.

    ``as_``: ``{"Export name": "Bob"}`` or ``["Export name=Bob", ...]`` (the last ``=``
    splits, so a name may hold one); a target is a registered name's spelling, ``me``
    or ``-``. ``tz``: an IANA zone (``local_zone``, the machine's, when none).
    ``start``: an RFC 3339 time or a plain day, when a recording began."""
    if not isinstance(format, str) or format not in FORMAT_NAMES:
        raise InvalidRequestError(f"format must be one of {', '.join(FORMAT_NAMES)}", field="format")
    pairs = _pairs(as_)
    mapping: dict[str, str] = {}
    for name, target in pairs:
        target = target.strip()
        if target not in (ME, UNTAGGED):
            target = check_speaker(target, field="as")
        mapping[name_key(name)] = target
    skipped = frozenset(name_key(n) for n in _strings(skip, field="skip"))
    if not isinstance(register, bool) or not isinstance(dry_run, bool):
        bad = "register" if not isinstance(register, bool) else "dry_run"
        raise InvalidRequestError(f"{bad} must be true or false", field=bad)
    user = None if user_name is None else check_speaker(user_name, field="user_name")
    if user == ME:
        raise InvalidRequestError("user_name cannot be me: me is the assistant", field="user_name")
    zone_name = local_zone if tz is None else tz
    if not isinstance(zone_name, str):
        raise InvalidRequestError("tz must be an IANA time zone name such as Europe/Paris", field="tz")
    try:
        zone: tzinfo = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRequestError(
            f"tz {zone_name[:60]!r} is not an IANA time zone name (such as Europe/Paris or UTC)", field="tz"
        ) from None
    began = None
    if start is not None:
        micros, _ = parse_moment(start, field="start")
        began = datetime.fromtimestamp(micros / 1e6, timezone.utc)
    return ImportOptions(format, mapping, skipped, register, user, zone, zone_name, began, dry_run)


def _strings(value: object, *, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    return v.string_list(value, field=field, max_items=10_000)


def _pairs(value: object) -> list[tuple[str, str]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        items = list(value.items())
        if not all(isinstance(k, str) and isinstance(t, str) for k, t in items):
            raise InvalidRequestError("as maps export names to speaker names (strings)", field="as")
        return items
    pairs = []
    for entry in _strings(value, field="as"):
        name, sep, target = entry.rpartition("=")
        if not sep or not name.strip() or not target.strip():
            raise InvalidRequestError(
                f"as {entry[:80]!r} must be 'Export name=Speaker' (=me for the assistant, =- for untagged)", field="as"
            )
        pairs.append((name, target))
    return pairs


def import_key(fmt: str, conversation: str, identity: Iterable[str]) -> str:
    """The idempotency key of one imported message: a digest of its format, conversation
    and identity (the export's message id, or its time, speaker, text and ordinal), so the
    same message of any later export of that chat has the same key."""
    digest = hashlib.sha256("\x1f".join([fmt, conversation, *identity]).encode("utf-8", "surrogatepass"))
    return "import:c-" + digest.hexdigest()[:40]


def conversation_label(fmt: str, conversation: str) -> str:
    """``<format>:<the export's own id>``; an id too long for a label is shortened by a digest."""
    label = f"{fmt}:{conversation}"
    if len(label) <= v.MAX_LABEL_CHARS:
        return label
    digest = hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{fmt}:{conversation[: v.MAX_LABEL_CHARS - len(fmt) - 18]}~{digest}"


def cut_message(text: str, max_chars: int = v.MAX_CONTENT_CHARS) -> list[str]:
    """A message as memories: itself, or when longer than a memory holds, consecutive
    pieces cut at sentence ends (a sentence longer than a memory is cut at ``max_chars``)."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in split_sentences(text):
        while len(sentence) > max_chars:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        if current and len(current) + 1 + len(sentence) > max_chars:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces

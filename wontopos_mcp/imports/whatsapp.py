"""WhatsApp's "Export chat": the ``.txt`` (Android) or ``_chat.txt`` (iOS) of one chat.

The format is a line a message, the message's text running on over the following lines::

    12/31/21, 9:41 PM - Alice: text            Android, US English
    31/12/2021, 21:41 - Alice: text            Android, most locales
    31.12.21, 21:41 - Alice: text              Android, German, Russian...
    2021. 12. 31. 오후 9:41 - 민준: text         Android, Korean (the marker before the time)
    [31/12/2021, 21:41:05] Alice: text         iOS
    [12/31/21, 9:41:05 PM] Alice: text         iOS, US English

What it handles: the Android and iOS layouts; the date written day, month or year first
(separators ``/``, ``.``, ``-``, with the spaces Korean puts after them), 2- or 4-digit
years, seconds or not, 12- or 24-hour times with the marker after the time or before it
(``PM``, ``pm``, ``p.m.``, ``p. m.``, ``午後``, ``下午``, ``오후``), separated by a space, a no-break
space or the narrow no-break space (U+202F) newer phones write, and Finnish ``klo``;
the invisible marks WhatsApp puts around names and at line starts (U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069), and the ``~`` + U+202F it puts before the profile name of
someone who is not in the exporter's contacts (the app's mark, not the name); a UTF-8
BOM. The text of a message is the first line's and every following line that does not
start a message. Skipped: ``<Media omitted>`` and iOS's ``image omitted`` (media), a
message that is only an attachment (``<attached: 00000012-PHOTO.jpg>``, Android's
``IMG-20211231-WA0001.jpg (file attached)``: media; with a caption it is kept, the
caption then a line ``[attachment: name]``), "This message was deleted" / "You deleted
this message" (deleted), call notices (call), and the chat's own lines: those with no
``Name:`` on Android (end-to-end encryption, "X created group", "X added Y", "X left",
security codes) and, on iOS, where the chat's name is the author and the text starts with
U+200E. ``<This message was edited>`` at the end of a text is dropped, the text kept.

Which of day and month comes first is decided from the whole file, so the reader reads
it twice: a first pass over the lines (counters only: the largest first and second date
fields, and how often the dates would go backwards either way) decides, a second streams
the messages. A first field over 12 proves day-first, a second one month-first; a file
where neither goes over 12 takes the order under which its dates do not go backwards,
and when both keep them in order (a chat of a few days), month-first only for ``/`` dates
with a 12-hour ``AM``/``PM`` clock (US English, the one common month-first locale) and
day-first otherwise. A file showing both proofs is refused.

Times are local, read in ``options.tz``. The conversation is the file's name; WhatsApp
gives messages no id (the engine keys them by time, speaker, text and ordinal).

Left out: Arabic-Indic digits and Arabic markers (their right-to-left marks inside the
date are not handled), localized media and deleted notices beyond the few listed below
(an iOS notice in another language is still skipped, as ``system``), polls and locations
(kept as the text WhatsApp wrote), and the export's media files themselves.

Sources relied on: the sample lines and date-order rule of Pustur/whatsapp-chat-parser
(``src/parser.ts``) and joweich/chat-miner (``chatminer/chatparsers.py``), read for the
format only; issues reporting the U+202F before AM/PM (Pustur/whatsapp-chat-parser#248,
langchain-ai/langchain#6654), ``p. m.`` and ``a.m.`` (Pustur#224, mtln/chat-export#19),
year-first dates (dimagi/open-chat-studio#221) and the CJK markers (ChatLab/ChatLab#281).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO

from wontopos_mcp.imports.cues import decode_head, text_lines
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, SkipKind, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "whatsapp"

_MARKS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
_LRM = "\u200e"
_SPACE = "[ \u00a0\u202f]"
_AM_PM = r"(?:[ap]\.?[ \u00a0\u202f]?m\.?|午前|午後|上午|下午|오전|오후)"
_HEADER = re.compile(
    r"^(?P<open>\[)?"
    rf"(?P<a>[0-9]{{1,4}})(?P<sep>[./-]){_SPACE}?(?P<b>[0-9]{{1,2}})(?P=sep){_SPACE}?(?P<c>[0-9]{{1,4}})\.?"
    rf",?{_SPACE}+"
    rf"(?:(?P<pre>{_AM_PM}){_SPACE}?|klo{_SPACE})?"
    r"(?P<h>[0-9]{1,2})[:.](?P<m>[0-9]{2})(?:[:.](?P<s>[0-9]{2}))?"
    rf"(?:{_SPACE}?(?P<post>{_AM_PM}))?"
    rf"(?(open)\]{_SPACE}?|{_SPACE}[-–]{_SPACE})"
    r"(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_AM_WORDS = ("午前", "上午", "오전")

# A line with a ``Name: `` that is not a message: the chat's own lines that quote what
# people wrote (a group name, a description may hold ": "). The actor holds no colon, so
# "Alice: I left" stays Alice's message.
_SYSTEM_REST = re.compile(
    r"^[^:]+ (?:created group |created this group|changed the (?:subject|group name|group description)"
    r"|changed this group's |deleted this group's |changed their phone number|changed to \+?[0-9])",
    re.IGNORECASE,
)
_NAME = re.compile(r"^(?P<name>[^:\n]+?):(?:[ \u00a0]?(?P<text>.*))?$", re.DOTALL)
_CALL = re.compile(
    r"^(?:(?:missed|silenced|declined) )?(?:group )?(?:voice|video) call(?:[,.].*)?$", re.IGNORECASE | re.DOTALL
)
_DELETED = re.compile(
    r"^(?:This message was deleted|You deleted this message|Este mensaje fue eliminado|Eliminaste este mensaje"
    r"|Diese Nachricht wurde gelöscht|Du hast diese Nachricht gelöscht|Ce message a été supprimé"
    r"|Vous avez supprimé ce message|Это сообщение удалено|Данное сообщение удалено|Вы удалили это сообщение"
    r"|Essa mensagem foi apagada|Esta mensagem foi apagada|Você apagou esta mensagem)\.?$",
    re.IGNORECASE,
)
_OMITTED = re.compile(
    r"^(?:<[^<>:]{1,40}>"  # <Media omitted>, <Medien ausgeschlossen>, <Multimedia omitido>...
    r"|(?:image|video|audio|sticker|GIF|document|Contact card|video note|view once (?:photo|video)) omitted"
    r"|.{1,200} document omitted)$",
    re.IGNORECASE,
)
_EDITED = re.compile(
    r"[ \u00a0\u200e]*<(?:This message was edited|Diese Nachricht wurde bearbeitet|Se editó este mensaje\.?"
    r"|Ce message a été modifié|Сообщение изменено|Esta mensagem foi editada|Essa mensagem foi editada)>$",
    re.IGNORECASE,
)
_ATTACHED = re.compile(r"\u200e?<[^<>:\n]{1,30}: ?(?P<file>[^<>\n]+?\.[A-Za-z0-9]{1,8})>")
_FILE_ATTACHED = re.compile(
    r"^\u200e?(?P<file>\S[^\n]*?\.[A-Za-z0-9]{1,8}) \((?:file attached|Datei angehängt|archivo adjunto"
    r"|fichier joint|arquivo anexado|файл прикреплен|file allegato)\)$",
    re.IGNORECASE,
)
_ENCRYPTED = re.compile(
    r"^(?:Messages and calls are end-to-end encrypted|Messages (?:you send )?to this (?:group|chat)"
    r"(?: are now| is now)? secured with end-to-end encryption)",
    re.IGNORECASE,
)


def sniff(head: bytes) -> bool:
    """The first non-blank line starts with a WhatsApp date, time and ``-`` or ``]``: no other
    format begins so (a UTF-16 export is claimed too, so that reading it says how to fix it)."""
    text = decode_head(head)
    if text is None:
        return False
    for line in text.splitlines():
        if line.strip(_MARKS + " \t"):
            return _header(line) is not None
    return False


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The messages of the export, in order (two passes: see the module's docstring)."""
    with source.open() as stream:
        day_first = _day_first(stream)
    conversation = source.name
    with source.open() as stream:
        current: _Pending | None = None
        for number, line in text_lines(stream):
            found = _header(line)
            if found is not None:
                if current is not None:
                    yield _finish(current, conversation)
                current = _Pending(number, _time(found, day_first, options, number), found["open"] is not None)
                current.lines.append(found["rest"])
                current.size = len(line.encode())
            elif current is not None:
                current.size += len(line.encode()) + 1
                if current.size > MAX_MESSAGE_BYTES:
                    raise BadExport(f"line {current.line}", f"a message longer than {MAX_MESSAGE_BYTES:,} bytes")
                current.lines.append(line)
        if current is not None:
            yield _finish(current, conversation)


@dataclass
class _Pending:
    """A message being read: where it starts, its time, its layout and its lines so far."""

    line: int
    time: datetime
    ios: bool
    size: int = 0
    lines: list[str] = field(default_factory=list)


def _header(line: str) -> re.Match[str] | None:
    """The date-time header of a line that starts a message (marks at the start ignored)."""
    found = _HEADER.match(line.lstrip(_MARKS))
    if found is None:
        return None
    a, c = found["a"], found["c"]
    year_first = len(a) == 4
    if (year_first and len(c) > 2) or (not year_first and (len(a) > 2 or len(c) not in (2, 4))):
        return None
    if found["pre"] and found["post"]:
        return None
    return found


def _day_first(stream: BinaryIO) -> bool:
    """The first pass: is the day before the month? (see the module's docstring)."""
    biggest = [0, 0]
    proof: list[int | None] = [None, None]
    backwards = [0, 0]  # day-first, month-first
    previous: list[tuple[int, int, int] | None] = [None, None]
    us_clock = False
    seen = False
    number = 0
    for number, line in text_lines(stream):
        found = _header(line)
        if found is None:
            if not seen and line.strip(_MARKS + " \t"):
                raise BadExport(
                    f"line {number}", "not a WhatsApp chat export: the first line does not start with a date and time"
                )
            continue
        seen = True
        if len(found["a"]) == 4:
            continue
        first, second, year = int(found["a"]), int(found["b"]), _year(found["c"])
        for index, value in enumerate((first, second)):
            if value > biggest[index]:
                biggest[index] = value
                if value > 12 and proof[index] is None:
                    proof[index] = number
        for index, (day, month) in enumerate(((first, second), (second, first))):
            if month <= 12:
                date = (year, month, day)
                last = previous[index]
                if last is not None and date < last:
                    backwards[index] += 1
                previous[index] = date
        marker = found["post"] or found["pre"] or ""
        us_clock = us_clock or (found["sep"] == "/" and marker.replace(".", "").strip() in ("AM", "PM"))
    if number == 0:
        raise BadExport("byte 0", "an empty file")
    if not seen:
        raise BadExport("line 1", "not a WhatsApp chat export: no line starts with a date and time")
    if proof[0] is not None and proof[1] is not None:
        raise BadExport(
            f"line {max(proof[0], proof[1])}",
            f"the dates disagree: line {proof[0]} writes the day first, line {proof[1]} the month first",
        )
    if proof[0] is not None or proof[1] is not None:
        return proof[0] is not None
    if backwards[0] != backwards[1]:
        return backwards[0] < backwards[1]
    return not us_clock


def _year(text: str) -> int:
    return 2000 + int(text) if len(text) == 2 else int(text)


def _time(found: re.Match[str], day_first: bool, options: ReadOptions, number: int) -> datetime:
    a, b, c = found["a"], int(found["b"]), found["c"]
    if len(a) == 4:
        year, month, day = int(a), b, int(c)
    elif day_first:
        year, month, day = _year(c), b, int(a)
    else:
        year, month, day = _year(c), int(a), b
    hour, minute, second = int(found["h"]), int(found["m"]), int(found["s"] or 0)
    marker = found["pre"] or found["post"]
    if marker:
        if not 1 <= hour <= 12:
            raise BadExport(f"line {number}", f"{hour} o'clock with {marker!r}: a 12-hour time goes from 1 to 12")
        pm = marker not in _AM_WORDS and (marker in ("午後", "下午", "오후") or marker.lower().startswith("p"))
        hour = hour % 12 + (12 if pm else 0)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=options.tz)
    except ValueError as exc:
        raise BadExport(f"line {number}", f"no such date and time ({exc})") from None


def _name(raw: str) -> str:
    """A name without the marks the app puts around it (and its ``~`` for non-contacts)."""
    name = raw.strip(_MARKS + " ")
    if name.startswith(("~\u202f", "~\u00a0")):
        name = name[2:].strip(_MARKS + " ")
    return name


def _finish(pending: _Pending, conversation: str) -> Message | Skipped:
    place = f"line {pending.line}"
    rest = "\n".join(pending.lines).lstrip(_MARKS)

    def skipped(kind: SkipKind) -> Skipped:
        return Skipped(conversation, kind, place)

    if not pending.ios and _SYSTEM_REST.match(rest):
        return skipped("system")
    split = _NAME.match(rest)
    name = _name(split["name"]) if split else ""
    if split is None or not name or re.search('["“”«»]', name):
        return skipped("call" if _CALL.match(rest.strip(_MARKS)) else "system")
    raw = split["text"] or ""
    from_app = raw.startswith(_LRM)
    text = _EDITED.sub("", raw.rstrip()).strip(_MARKS + " \n\t")
    if _DELETED.match(text):
        return skipped("deleted")
    if _CALL.match(text.replace(_LRM, "")):
        return skipped("call")
    if _OMITTED.match(text):
        return skipped("media")
    files = [found["file"] for found in _ATTACHED.finditer(text)]
    text = _ATTACHED.sub("", text)
    kept: list[str] = []
    for line in text.split("\n"):
        found = _FILE_ATTACHED.match(line.strip())
        if found is not None:
            files.append(found["file"])
        else:
            kept.append(line)
    text = "\n".join(kept).strip(_MARKS + " \n\t")
    if not files and (_ENCRYPTED.match(text) or (pending.ios and from_app)):
        return skipped("system")
    if not text:
        return skipped("media" if files else "empty")
    text += "".join(f"\n[attachment: {file.strip(_MARKS)}]" for file in files)
    return Message(conversation, "person", name, text, pending.time, None, place)

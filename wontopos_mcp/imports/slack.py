"""A Slack workspace export: a folder or a ``.zip`` of JSON files, never a single file.

The layout is Slack's ("How to read Slack data exports", slack.com/help/articles/220556107):
``users.json`` (``org_users.json`` from an Enterprise Grid org), ``channels.json``, and in
the exports of every conversation ``groups.json`` (private channels), ``mpims.json`` (group
DMs) and ``dms.json``; each conversation a folder (a channel's name; a DM's id) of day files
``2026-01-02.json``, each a JSON list of messages (``{type, user, text, ts, ...}``). The whole
export may sit under one top folder. The conversation is the channel's id, titled by its
name (a DM by its members' names); a thread reply (``thread_ts`` other than its ``ts``) is in
the conversation ``<channel id>:<thread_ts>``, titled by the channel and the start of the
thread's first message. That first message stays in its channel only: storing it in both
would make one message two memories; the thread's title carries its gist.

Handled: speakers from ``users.json`` (profile display name, else real name, else name),
bots by ``username`` or ``bot_profile.name``; ``<@U1>`` as ``@Name``, ``<#C1|general>`` as
``#general``, ``<https://x|label>`` as ``label (https://x)``, ``<!here>`` as ``@here``,
``&amp;``/``&lt;``/``&gt;`` unescaped; ``files`` as ``[attachment: name]`` lines (a file
without text is media); channel joins, leaves, topics, renames, pins and other subtypes
skipped as service, huddles as calls, ``message_deleted`` and ``tombstone`` as deleted. An
export holds an edited message with its final text (and an ``edited`` field); a
``message_changed`` record, which some exports keep, replaces the text of the message of
its ``ts`` in the same day file (one of an earlier day keeps the text read then). Day files
are read in date order, each parsed whole (a day of one conversation) and sorted by ``ts``;
every file is streamed through ``jsonstream`` (each item at most ``MAX_MESSAGE_BYTES``,
nesting bounded).
Left out: reactions, link unfurls (``attachments``), blocks beyond ``text``, canvases,
``integration_logs.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from wontopos_mcp.imports.jsonstream import list_items
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "slack"

_USERS = ("users.json", "org_users.json")
# The lists of conversations, in the order they are read: (file, folder key).
_LISTS = (("channels.json", "name"), ("groups.json", "name"), ("mpims.json", "name"), ("dms.json", "id"))
_DAY = re.compile(r"\d{4}-\d\d-\d\d\.json\Z")
_TS = re.compile(r"(\d{1,12})(?:\.(\d{1,6}))?\Z")
_SPOKEN = {None, "bot_message", "me_message", "thread_broadcast", "reply_broadcast", "file_share", "file_comment"}
_CALLS = {"huddle_thread", "sh_room_created"}
_DELETED = {"message_deleted", "tombstone"}
_ANGLE = re.compile(r"<([^<>\n]*)>")
_SPECIAL = {"here": "@here", "channel": "@channel", "everyone": "@everyone"}
_SNIPPET = 60


def sniff(head: bytes) -> bool:
    """A single file is never a Slack export (it is a folder or zip: ``sniff_source``)."""
    return False


def sniff_source(source: Source) -> bool:
    """A folder or zip with ``users.json`` and ``channels.json``, at its root or under one top folder."""
    return _root(source.entries()) is not None


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """Every conversation's messages, channels first, then private channels, group DMs and DMs."""
    entries = source.entries()
    if not entries:
        raise BadExport(
            source.name, "a single file: a Slack export is a folder or .zip with users.json and channels.json"
        )
    root = _root(entries)
    if root is None:
        raise BadExport(source.name, "no users.json and channels.json: not a Slack workspace export")
    present = set(entries)
    users: dict[str, str] = {}
    for name in _USERS:
        if root + name in present:
            for user in _items(source, root + name, "user"):
                if isinstance(user, dict) and isinstance(user.get("id"), str):
                    users[user["id"]] = _user_name(user)
    listed: list[tuple[str, str, str | None]] = []  # folder, conversation id, title
    channel_names: dict[str, str] = {}
    for name, folder_key in _LISTS:
        if root + name not in present:
            continue
        for conversation in _items(source, root + name, "conversation"):
            if not isinstance(conversation, dict) or not isinstance(conversation.get("id"), str):
                raise BadExport(root + name, "a conversation without its id")
            folder = conversation.get(folder_key)
            if not isinstance(folder, str):
                raise BadExport(root + name, f"conversation {conversation['id']} without its {folder_key}")
            title = conversation.get("name")
            if folder_key == "id":
                members = conversation.get("members") or []
                title = ", ".join(users.get(m, m) for m in members if isinstance(m, str)) or None
            if isinstance(title, str):
                channel_names[conversation["id"]] = title
            listed.append((folder, conversation["id"], title if isinstance(title, str) else None))
    days: dict[str, list[str]] = {}
    for entry in entries:
        if entry.startswith(root):
            folder, _, day = entry[len(root) :].rpartition("/")
            if folder and "/" not in folder and _DAY.match(day):
                days.setdefault(folder, []).append(entry)
    known = {folder for folder, _, _ in listed}
    # A folder of day files that no list names is still a conversation: read it by its folder's name.
    listed += [(folder, folder, folder) for folder in sorted(days) if folder not in known]
    text = _Text(users, channel_names)
    for folder, conversation, title in listed:
        threads: dict[str, str] = {}
        for entry in sorted(days.get(folder, [])):
            yield from _day(source, entry, conversation, title, text, threads)


def _day(
    source: Source, entry: str, conversation: str, title: str | None, text: _Text, threads: dict[str, str]
) -> Iterator[Message | Skipped]:
    """One day file's messages in ``ts`` order, edits applied."""
    records: list[tuple[tuple[int, int], int, dict[str, Any]]] = []
    by_ts: dict[str, int] = {}
    changes: list[int] = []
    for number, raw in enumerate(_items(source, entry, "message"), 1):
        place = f"{entry}, message {number}"
        if not isinstance(raw, dict):
            raise BadExport(place, "not a message object")
        ts = raw.get("ts")
        if raw.get("subtype") == "message_changed":
            changed = raw.get("message")
            target = changed.get("ts") if isinstance(changed, dict) else None
            if isinstance(changed, dict) and isinstance(target, str) and target in by_ts:
                key, order, original = records[by_ts[target]]
                records[by_ts[target]] = (key, order, {**original, **changed})
            changes.append(number)
            continue
        key = _ts_key(ts, place)
        by_ts.setdefault(str(ts), len(records))
        records.append((key, number, raw))
    for number in changes:
        yield Skipped(conversation, "service", f"{entry}, message {number}", title)
    records.sort(key=lambda record: (record[0], record[1]))
    for _, number, raw in records:
        yield _message(raw, f"{entry}, message {number}", conversation, title, text, threads)


def _message(
    raw: dict[str, Any], place: str, channel: str, title: str | None, text: _Text, threads: dict[str, str]
) -> Message | Skipped:
    ts = str(raw["ts"])
    thread = raw.get("thread_ts")
    conversation, where = channel, title
    if isinstance(thread, str) and thread != ts:
        conversation = f"{channel}:{thread}"
        where = threads.get(thread) or f"{title or channel} (thread)"
    subtype = raw.get("subtype")
    if subtype in _DELETED:
        return Skipped(conversation, "deleted", place, where)
    if subtype in _CALLS:
        return Skipped(conversation, "call", place, where)
    if subtype not in _SPOKEN or raw.get("type", "message") != "message":
        return Skipped(conversation, "service", place, where)
    body = raw.get("text", "")
    if not isinstance(body, str):
        raise BadExport(place, "its text is not a string")
    said = text.render(body).strip()
    files = _files(raw, place)
    if not said:
        return Skipped(conversation, "media" if files else "empty", place, where)
    if thread == ts and ts not in threads:
        gist = " ".join(said.split())
        threads[ts] = f"{title or channel}: {gist[:_SNIPPET]}{'…' if len(gist) > _SNIPPET else ''}"
    return Message(
        conversation=conversation,
        role="person",
        author=_author(raw, text.users, place),
        text="\n".join([said, *(f"[attachment: {name}]" for name in files)]),
        time=_time(ts, place),
        message_id=ts,
        place=place,
        title=where,
    )


def _author(raw: dict[str, Any], users: dict[str, str], place: str) -> str:
    """A person by ``users.json``; a bot by its own name; else the message's own profile, else the id."""
    user = raw.get("user")
    bot = raw.get("subtype") == "bot_message" or (raw.get("bot_id") and user not in users)
    if bot:
        profile = raw.get("bot_profile")
        for name in (raw.get("username"), profile.get("name") if isinstance(profile, dict) else None):
            if isinstance(name, str) and name:
                return name
    if isinstance(user, str) and user in users:
        return users[user]
    profile = raw.get("user_profile")
    if isinstance(profile, dict):
        for key in ("display_name", "real_name", "name"):
            if isinstance(profile.get(key), str) and profile[key]:
                return str(profile[key])
    for name in (user, raw.get("bot_id")):
        if isinstance(name, str) and name:
            return name
    raise BadExport(place, "a message without its user")


def _user_name(user: dict[str, Any]) -> str:
    found = user.get("profile")
    profile: dict[str, Any] = found if isinstance(found, dict) else {}
    for value in (profile.get("display_name"), user.get("real_name"), profile.get("real_name"), user.get("name")):
        if isinstance(value, str) and value.strip():
            return value
    return str(user["id"])


def _files(raw: dict[str, Any], place: str) -> list[str]:
    found = raw.get("files") or []
    if not isinstance(found, list):
        raise BadExport(place, "its files are not a list")
    names: list[str] = []
    for file in found:
        if not isinstance(file, dict) or file.get("mode") == "tombstone":  # a file deleted since
            continue
        name = file.get("name") or file.get("title")
        names.append(name if isinstance(name, str) else "file")
    return names


class _Text:
    """Slack's message markup made plain: mentions by name, links with their labels, entities unescaped."""

    def __init__(self, users: dict[str, str], channels: dict[str, str]) -> None:
        self.users, self.channels = users, channels

    def render(self, body: str) -> str:
        body = _ANGLE.sub(self._angle, body) if "<" in body else body
        return body.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    def _angle(self, match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target.startswith("@"):
            return "@" + self.users.get(target[1:], label or target[1:])
        if target.startswith("#"):
            return "#" + (label or self.channels.get(target[1:], target[1:]))
        if target.startswith("!"):
            word = target[1:].split("^", 1)[0]
            return label or _SPECIAL.get(word, "@" + word)
        if not label:
            return target
        address = target.removeprefix("mailto:")
        return label if label in (target, address) else f"{label} ({target})"


def _ts_key(ts: Any, place: str) -> tuple[int, int]:
    match = _TS.match(ts) if isinstance(ts, str) else None
    if match is None:
        raise BadExport(place, f"ts {ts!r} is not a Slack timestamp")
    return int(match.group(1)), int((match.group(2) or "0").ljust(6, "0"))


def _time(ts: str, place: str) -> datetime:
    seconds, micro = _ts_key(ts, place)
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=micro)
    except (ValueError, OverflowError, OSError):
        raise BadExport(place, f"ts {ts!r} is not a time") from None


def _root(entries: list[str]) -> str | None:
    """Where the export's files sit: ``""`` (the root) or ``"top/"`` (one top folder)."""
    names = set(entries)
    if "channels.json" in names and any(name in names for name in _USERS):
        return ""
    tops = {entry.split("/", 1)[0] for entry in entries}
    if len(tops) == 1 and all("/" in entry for entry in entries):
        top = next(iter(tops)) + "/"
        if top + "channels.json" in names and any(top + name in names for name in _USERS):
            return top
    return None


def _items(source: Source, entry: str, what: str) -> Iterator[Any]:
    """The items of one JSON list entry, streamed, each at most ``MAX_MESSAGE_BYTES``."""
    with source.open_entry(entry) as raw:
        for _, item in list_items(raw, what, start=entry, within=f"{entry}, ", limit=MAX_MESSAGE_BYTES):
            yield item

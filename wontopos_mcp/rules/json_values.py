"""A JSON value a caller sent, as every face that decodes one checks it: a tool call's
arguments (MCP, on the wire and in-process) and a REST request body alike.

A decoded value may hold what no memory can store: a lone surrogate (JSON's ``"\\ud800"``,
which the standard library decodes but UTF-8 cannot hold), in a string or in a key; and it
may nest deeper than the MCP SDK's parser reads. :func:`scan` finds either in one
iterative walk, :func:`lone_surrogate_error` is the 400 naming the field at fault, and
:func:`field_path` writes a nested field's path as the service names it
(``messages[0].content``). Pure functions over decoded values: no parser, no I/O.
"""

from __future__ import annotations

from typing import Any

from wontopos_mcp.errors import InvalidRequestError

from .validation import SURROGATE, not_unicode

__all__ = ["MAX_NESTING", "field_path", "lone_surrogate_error", "scan"]

MAX_NESTING = 200
"""The most arrays/objects a value may sit inside: pydantic-core's parser limit (what the
MCP SDK parses with), so a message the SDK parses is never refused for its depth (a test
pins the two together)."""


def lone_surrogate_error(name: Any, arguments: Any, *, whole: str = "arguments") -> InvalidRequestError | None:
    """The 400 for a call whose ``name`` (a tool's; ``None`` when the call names none) or
    ``arguments`` (its strings and keys, at any depth) hold a lone surrogate, naming the
    field (``speaker``, ``messages[0].content``) as the service names nested fields, or
    ``whole`` for a key of the top level (REST: ``body``); None when the call is
    well-formed Unicode."""
    if isinstance(name, str) and SURROGATE.search(name):
        return InvalidRequestError(not_unicode("name"), field="name")
    if not isinstance(arguments, dict):
        return None
    path = scan(arguments)
    if not isinstance(path, tuple):  # depth was checked on the wire, not here
        return None
    field = field_path(path) or whole
    return InvalidRequestError(not_unicode(field), field=field)


def field_path(parts: tuple[str | int, ...] | list[Any]) -> str:
    """``("messages", 0, "content")`` as ``messages[0].content``."""
    if not parts:
        return ""
    return str(parts[0]) + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts[1:])


def scan(value: Any) -> tuple[str | int, ...] | str | None:
    """``"deep"`` when a value sits inside more than :data:`MAX_NESTING` containers, else
    the path of the first string (or the object holding the first key) with a lone
    surrogate, else None. Iterative: the value may be nested about a thousand deep."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    found: tuple[str | int, ...] | None = None
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if found is None and SURROGATE.search(item):
                found = path
            continue
        if not isinstance(item, (dict, list)):
            continue
        if len(path) >= MAX_NESTING and item:
            return "deep"  # its members sit inside MAX_NESTING + 1 containers
        if isinstance(item, dict):
            if found is None and any(SURROGATE.search(key) for key in item):
                found = path
            children = [(child, (*path, key)) for key, child in item.items()]
        else:
            children = [(child, (*path, index)) for index, child in enumerate(item)]
        stack.extend(reversed(children))  # document order: the first flaw is reported
    return found

"""The command line's own protocol with the shared engine: what the human commands send
on the engine's socket instead of MCP, so each is a short conversation with the process
that already holds the database and the model, not a new load of both.

One JSON object a line, both ways, on the same socket as the relays' MCP sessions; the
connection's first line tells the two apart (:func:`is_hello`: an object whose first key
is ``"wontopos"``, which no JSON-RPC message has):

- the command line says ``{"wontopos": "commands", "version": V}``; the engine answers
  ``{"hello": {"pid": P, "version": V}}`` (an engine that does not speak it answers with a
  JSON-RPC error instead, and the command runs in its own process);
- then one request at a time, ``{"op": NAME, "args": {...}}``: an operation of the fixed
  set the engine's side serves (``cli.answering``), with its JSON arguments;
- the engine answers zero or more ``{"progress": [...]}`` and ``{"say": LINE}`` (an
  import's progress, a line for the command's stderr), then exactly one ``{"answer":
  ...}`` or ``{"error": BODY, "parts": [...]}``: the error body every face sends, with
  the message's parts (text, and each call that fixes the refusal as ``{"op", "args"}``)
  so the command line raises the engine's exception and names the fix in its own verbs.

The standard library and ``errors`` only: a command's process imports this, not the MCP
SDK, LanceDB or the model.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from wontopos_mcp.errors import Fix, WontoposError, from_envelope


class Report(Protocol):
    """Where an import's news goes while it runs: a line for the command's stderr
    (``said``) and its progress (``progress``, the values the import reports). In a
    command's own process it is drawn there; in the engine, it is sent as messages."""

    def said(self, text: str) -> None: ...

    def progress(self, *values: Any) -> None: ...


HELLO_KEY = "wontopos"
COMMANDS = "commands"
_PREFIX = b'{"' + HELLO_KEY.encode() + b'"'


def line(message: dict[str, Any]) -> bytes:
    """``message`` as one line of the protocol."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def hello(version: str) -> bytes:
    """The command line's first line."""
    return line({HELLO_KEY: COMMANDS, "version": version})


def is_hello(first: bytes) -> bool:
    """Whether a connection's first line opens this protocol (else it is MCP)."""
    return first.lstrip().startswith(_PREFIX)


def error_line(exc: WontoposError) -> bytes:
    """A refusal as the engine sends it: its body, and its message's parts."""
    parts = [part if isinstance(part, str) else {"op": part.op, "args": [list(a) for a in part.args]}
             for part in exc.parts]  # fmt: skip
    return line({"error": exc.envelope(), "parts": parts})


def raised(message: dict[str, Any]) -> WontoposError:
    """The refusal of an ``{"error", "parts"}`` line, as the engine raised it."""
    parts = [
        part if isinstance(part, str) else Fix(str(part["op"]), tuple((str(k), v) for k, v in part["args"]))
        for part in message.get("parts") or ()
    ]
    return from_envelope(message["error"], parts)

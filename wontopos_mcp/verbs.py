"""The caller's verbs: how each face names the call that fixes a refusal.

The core raises errors whose message names the fix as a :class:`~errors.Fix` (an
operation of the contract table and its arguments, by their core names). Each face
renders it once, where it maps errors, with :func:`speak`, so a caller is told to call
what it can call (SPEC "Errors"):

=========  ==================================================  ===============================
face       rendering                                           from the contract table
=========  ==================================================  ===============================
mcp        ``speaker_register(speaker='Bob')``                 the tool (the operation's name)
library    ``add_speaker(speaker='Bob')``                      ``Operation.library``, names
                                                               renamed as the SDK names them
rest       ``add_speaker(speaker='Bob') (POST /api/v1/...)``  the SDK method and the route
cli        ``wontopos-mcp speakers add Bob``                   ``Operation.cli``
=========  ==================================================  ===============================

The verbs themselves are columns of the one contract table (``contract.OPERATIONS``);
this module only spells a call with them. A fix naming an operation that has no verb on
a face is a bug in the table (``tests/test_caller_verbs.py`` proves every fix the core
raises has one on every face); should one slip through, the core's spelling is used.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from .contract import API_PREFIX, OPERATIONS
from .errors import Fix, WontoposError

__all__ = ["FACES", "Face", "render", "speak", "verb"]

Face = Literal["mcp", "library", "rest", "cli"]
FACES: tuple[Face, ...] = ("mcp", "library", "rest", "cli")
PROGRAM = "wontopos-mcp"
CLI_FLAGS = {"user_id": "--user"}  # a core name the CLI spells otherwise; the rest are --dashed-names
CLI_METAVARS = {"speaker": "NAME", "user_id": "NAME", "memory_id": "ID"}  # a positional the fix leaves open


def verb(op: str, face: Face) -> str | None:
    """The name ``face`` gives operation ``op`` (``None``: the face does not offer it)."""
    operation = OPERATIONS.get(op)
    if operation is None:
        return None
    if face == "mcp":
        return operation.name if operation.mcp else None
    if face == "cli":
        return None if operation.cli is None else f"{PROGRAM} {operation.cli}"
    return operation.library if face == "library" or operation.rest is not None else None


def render(fix: Fix, face: Face) -> str:
    """``fix`` as a call on ``face``: its verb, and the arguments by the face's names."""
    name = verb(fix.op, face)
    if name is None:
        return str(fix)
    if face == "mcp":
        return str(fix)
    if face == "cli":
        return _command(name, dict(fix.args))
    operation = OPERATIONS[fix.op]
    renamed = operation.caller_names()
    call = f"{name}({', '.join(f'{renamed.get(k, k)}={value!r}' for k, value in fix.args)})"
    if face == "rest" and operation.rest is not None:
        call += f" ({operation.rest.method} {API_PREFIX}{operation.rest.path})"
    return call


def speak(exc: WontoposError, face: Face) -> WontoposError:
    """``exc`` with every fix in its message named in ``face``'s verbs."""
    return exc.spoken(lambda fix: render(fix, face)) if exc.fixes else exc


def _command(template: str, args: dict[str, Any]) -> str:
    """A CLI command line: ``{name}`` filled from ``args`` (quoted for a shell; an
    argument the fix leaves open shows as the command's ``--help`` names it, ``NAME``),
    the other arguments as flags."""
    words = []
    for word in template.split(" "):
        if word.startswith("{") and word.endswith("}"):
            name = word[1:-1]
            words.append(shlex.quote(str(args.pop(name))) if name in args else CLI_METAVARS.get(name, name.upper()))
        else:
            words.append(word)
    for name, value in args.items():
        words += [CLI_FLAGS.get(name, "--" + name.replace("_", "-")), shlex.quote(str(value))]
    return " ".join(words)

"""The caller's verbs: how each face names the call that fixes a refusal.

The core raises errors whose message names the fix as a :class:`~errors.Fix` (an
operation of the contract table and its arguments, by their core names). Each face
renders it once, where it maps errors, with :func:`speak`, so a caller is told to call
what it can call:

=====  ==========================================  =====================================
face   rendering                                   from the contract table
=====  ==========================================  =====================================
mcp    ``speaker_register(speaker='Bob')``         the tool (the operation's name)
sdk    ``add_speaker(speaker='Bob')``              ``Operation.library``, the arguments
                                                   named as the SDK names them
cli    ``wontopos-mcp speakers add Bob``           ``Operation.cli``
=====  ==========================================  =====================================

``sdk`` is the face of the SDK's names: the ``Memory`` library and the REST API, whose
callers use the official SDK's ``Client`` (same methods), so a refusal reads the same
through both and code moves between them unchanged (``tests/test_faces_agree.py``).

The verbs themselves are columns of the one contract table (``contract.OPERATIONS``);
this module only spells a call with them. A fix naming an operation that has no verb on
a face is a bug in the table (``tests/test_caller_verbs.py`` proves every fix the core
raises has one on every face); should one slip through, the core's spelling is used.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from .contract import OPERATIONS
from .errors import Fix, WontoposError

__all__ = ["FACES", "Face", "render", "speak", "verb"]

Face = Literal["mcp", "sdk", "cli"]
FACES: tuple[Face, ...] = ("mcp", "sdk", "cli")
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
    return operation.library


def render(fix: Fix, face: Face) -> str:
    """``fix`` as a call on ``face``: its verb, and the arguments by the face's names."""
    name = verb(fix.op, face)
    if name is None:
        return str(fix)
    if face == "mcp":
        return str(fix)
    if face == "cli":
        return _command(name, dict(fix.args))
    renamed = OPERATIONS[fix.op].caller_names()
    return f"{name}({', '.join(f'{renamed.get(k, k)}={value!r}' for k, value in fix.args)})"


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

"""The one exception tree of wontopos-mcp.

Every refusal the engine makes is one of these; each face (MCP tools, REST, the
``Memory`` library) translates them in exactly one place, so an agent sees the same
``{"type": "error", "status", "error": {"type", "message", ...fields}}`` body
everywhere::

    WontoposError                     (status, type, message, details)
    ├── InvalidRequestError           400 invalid_request_error   (BadRequestError)
    ├── AuthenticationError           401 authentication_error
    ├── PermissionDeniedError         403 permission_error
    ├── NotFoundError                 404 not_found_error
    ├── ConflictError                 409 conflict_error
    ├── RateLimitError                429 rate_limit_error        (HTTP: repeated wrong API keys)
    ├── ServerError                   5xx, never raised itself    (the SDK's parent of the three below)
    │   ├── APIError                  500 api_error
    │   ├── NotImplementedAPIError    501 not_implemented_error
    │   └── UnavailableError          503 unavailable_error
    ├── APIConnectionError              0  ┐ the SDK's classes for what only the hosted
    ├── PaymentRequiredError          402  │ service or the network answers: never raised
    └── GoneError                     410  ┘ here, kept so code catching them runs unchanged

``InvalidRequestError`` also carries 408/413/415/421/422 on the HTTP face: the type names the
kind of fault, the status the HTTP meaning. ``WosError`` and ``BadRequestError`` are the
official SDK's names, kept as aliases so code written for the hosted client ports by
changing one import.

Three more kinds of failure are not refusals of a request and stay outside the tree:
``ConfigError`` (a bad setting, stopping the server at start-up), ``ModelMismatch`` (a
database built with another model, also a start-up stop) and ``StorageError`` (what the
LanceDB adapter, ``storage.adapter``, maps LanceDB's own failures to, once).

A message that says how to fix the refusal names the call to make as a :class:`Fix`
(an operation of the contract table and its arguments), not as text: the caller of the
MCP face is told ``speaker_register(speaker='Bob')``, of the library ``add_speaker(...)``,
of the CLI ``wontopos-mcp speakers add Bob``, so that each caller is told a call it can
make. Each face renders it once, where it maps errors (``verbs.speak``); until
then the message spells it with the core's names, which are the MCP tools'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fix:
    """The call that would fix a refusal: ``op`` names an operation of the contract table
    (its core name), ``args`` its arguments by their core names (``None`` ones left out).

    ``str(fix)`` is the core's spelling, ``op(name='value', ...)``; the faces render it
    with their own verbs and names."""

    op: str
    args: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, op: str, **args: Any) -> Fix:
        return cls(op, tuple((name, value) for name, value in args.items() if value is not None))

    def __str__(self) -> str:
        given = ", ".join(f"{name}={value!r}" for name, value in self.args)
        return f"{self.op}({given})" if self.args else self.op


Message = str | Sequence[str | Fix]  # text, or text around the calls that fix the refusal


# A message that opens "<field> is ...", "<field> must ...", "<field> has ..." names the
# parameter itself ("speaker 'Bob' is not registered" names the person: left as it is).
_FIELD_VERBS = ("is", "must", "has")


class WontoposError(Exception):
    """Base of every error the engine raises on purpose.

    ``details`` holds the machine-readable fields of the error body (``field``, ``speaker``,
    ``speaker_limit``, ...) that agents branch on; the message is for humans.
    """

    status: int = 500
    type: str = "api_error"

    def __init__(self, message: Message, *, status: int | None = None, **details: Any) -> None:
        self.parts: tuple[str | Fix, ...] = (message,) if isinstance(message, str) else tuple(message)
        self.message = "".join(str(part) for part in self.parts)
        super().__init__(self.message)
        if status is not None:
            self.status = status
        self.details: dict[str, Any] = {k: v for k, v in details.items() if v is not None}
        self.request_id: str | None = None  # the SDK's attribute: a local call has no request id

    @property
    def field(self) -> str | None:
        return self.details.get("field")

    @property
    def fixes(self) -> tuple[Fix, ...]:
        return tuple(part for part in self.parts if isinstance(part, Fix))

    def spoken(self, render: Callable[[Fix], str]) -> WontoposError:
        """Return this error with each :class:`Fix` in its message rendered by ``render``
        (a face's verbs). Rendering again starts from the parts, never from the text."""
        self.message = "".join(part if isinstance(part, str) else render(part) for part in self.parts)
        self.args = (self.message,)
        return self

    def envelope(self) -> dict[str, Any]:
        """The error body, as every face sends it: ``{"type": "error", "status", "error":
        {"type", "message", ...details}}``."""
        return {
            "type": "error",
            "status": self.status,
            "error": {"type": self.type, "message": self.message, **self.details},
        }

    def renamed_field(self, names: dict[str, str]) -> WontoposError:
        """Return this error with ``field`` mapped back to the caller's own name, and the
        message too where it opens with the core's name as a parameter ("content is ..."
        to an SDK caller who sent ``new_content``)."""
        field = self.field
        if field is not None and field in names:
            caller = self.details["field"] = names[field]
            first = self.parts[0] if self.parts else None
            if isinstance(first, str) and first.startswith(tuple(f"{field} {verb} " for verb in _FIELD_VERBS)):
                self.parts = (caller + first[len(field) :], *self.parts[1:])
                self.message = "".join(str(part) for part in self.parts)
                self.args = (self.message,)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r}, details={self.details!r})"


class InvalidRequestError(WontoposError):
    status = 400
    type = "invalid_request_error"


class AuthenticationError(WontoposError):
    status = 401
    type = "authentication_error"


class PermissionDeniedError(WontoposError):
    status = 403
    type = "permission_error"


class NotFoundError(WontoposError):
    status = 404
    type = "not_found_error"


class ConflictError(WontoposError):
    status = 409
    type = "conflict_error"

    @property
    def conflicts_with(self) -> str | None:
        """The existing store id this one collides with (the SDK's property); else None."""
        value = self.details.get("conflicts_with")
        return value if isinstance(value, str) else None


class ServerError(WontoposError):
    """5xx: the engine could not answer (the SDK's ``ServerError``, so ``except
    ServerError`` ports unchanged). Raised as one of its subclasses."""

    status = 500


class APIError(ServerError):
    """A bug on our side. The message never carries internals."""

    status = 500
    type = "api_error"


class NotImplementedAPIError(ServerError):
    status = 501
    type = "not_implemented_error"


class UnavailableError(ServerError):
    """The embedding model is still loading, or failed to load."""

    status = 503
    type = "unavailable_error"


class RateLimitError(WontoposError):
    """429: too many wrong API keys came in the last minute, from every client together
    (the HTTP face only, ``http.wrong_keys``); ``retry_after_ms`` says when a wrong key is
    counted again. ``retry_after`` is the SDK's attribute (that wait in seconds)."""

    status = 429
    type = "rate_limit_error"

    @property
    def retry_after(self) -> float | None:
        wait = self.details.get("retry_after_ms")
        return wait / 1000 if isinstance(wait, (int, float)) else None


# The SDK's other classes, for what only the hosted service answers (a card, a retired
# model, the network): never raised here, so code that catches them imports and runs
# unchanged: code written for the hosted client ports by changing one import.
class APIConnectionError(WontoposError):
    status = 0


class PaymentRequiredError(WontoposError):
    status = 402


class GoneError(WontoposError):
    status = 410


WosError = WontoposError
BadRequestError = InvalidRequestError

ALL_ERRORS: tuple[type[WontoposError], ...] = (
    InvalidRequestError,
    AuthenticationError,
    PermissionDeniedError,
    NotFoundError,
    ConflictError,
    RateLimitError,
    APIError,
    NotImplementedAPIError,
    UnavailableError,
)


def from_envelope(body: dict[str, Any], parts: Sequence[str | Fix] | None = None) -> WontoposError:
    """The refusal an error body was made from (:meth:`WontoposError.envelope` read back):
    the class its ``error.type`` and ``status`` name (a 413 ``invalid_request_error`` is an
    :class:`InvalidRequestError` with that status), its message and fields. ``parts``, when
    the sender kept them, are the message with its :class:`Fix` calls, so the receiving face
    renders them in its own verbs. How a process that asks another for the answer (the
    command line asking the shared engine) raises exactly what the engine raised."""
    error = dict(body.get("error") or {})
    kind, status = str(error.pop("type", APIError.type)), int(body.get("status", APIError.status))
    message = str(error.pop("message", ""))
    cls = next((c for c in ALL_ERRORS if c.type == kind and c.status == status), None)
    cls = cls or next((c for c in ALL_ERRORS if c.type == kind), APIError)
    return cls(list(parts) if parts else message, status=status, **error)


class ConfigError(ValueError):
    """A bad setting: the CLI prints it as one line on stderr and exits non-zero."""


class ModelMismatch(RuntimeError):
    """The database was built with another embedding model (a start-up error: vectors of
    two models are not comparable; ``reindex`` re-embeds)."""


class StorageError(RuntimeError):
    """A failure of the database itself, as ``storage.adapter`` names it (never sent as-is: a face
    that meets one sends ``internal_error``)."""


class TableMissing(StorageError):
    """A table is not there (yet): listed while another thread or process creates it."""


def internal_error() -> APIError:
    """The one 500 every face sends for an unexpected exception: no internals leak."""
    return APIError("internal error: the operation was not applied; see the server log")

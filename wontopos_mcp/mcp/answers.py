"""The MCP tools' output models and schemas, derived from the core's answer types.

The shapes are written once, as the ``TypedDict``s of :mod:`wontopos_mcp.rules.answers`
that the engine returns; :func:`model` turns each into a pydantic model (the MCP SDK checks
each successful answer against it before it leaves the server and publishes its JSON
schema). A key's ``Doc`` becomes its ``description`` and bounds, and two rules of the
answers carry over:

- Optional keys (``NotRequired``) are **omitted** when they have no value, never
  ``null``: such a field gets the Python default ``None`` (only "not sent") without a
  ``None`` in its type or a default in its schema, so an explicit ``null`` is refused just
  as a client's validator would refuse it.
- Answers allow extra keys (``extra="allow"``): the REST face adds the keys the official
  SDK reads, and a later version may add more, without breaking strict clients.

Every tool's output schema is ``{"type": "object", "anyOf": [answer, ErrorEnvelope]}``
(:class:`OrError`): a refusal is a result with ``isError: true`` whose structured content
is the error body, and strict clients (the TypeScript SDK, MCP Inspector) validate even
error payloads against the declared schema. The error body is the face's own channel, so
its models are written here.
"""

from __future__ import annotations

import types
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

# typing_extensions' get_type_hints: it keeps NotRequired on Python 3.10 too.
from typing_extensions import NotRequired, Required, get_type_hints, is_typeddict

from wontopos_mcp.rules import answers as core
from wontopos_mcp.rules.answers import Doc

if TYPE_CHECKING:
    from wontopos_mcp.contract import Operation

__all__ = ["ErrorBody", "ErrorEnvelope", "OrError", "answer_models", "model"]


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _absent(description: str) -> Any:
    """An optional field that is omitted when it has no value: not required, never null."""
    return Field(default=None, description=description, json_schema_extra=_drop_default)


class _Answer(BaseModel):
    """Base of every answer: extra keys are allowed (REST adds some; later versions may)."""

    model_config = ConfigDict(extra="allow")


@cache
def model(answer: type) -> type[BaseModel]:
    """The pydantic model of one core answer type (a ``TypedDict``), of the same name,
    its docstring as its description; the answer types it names are models too."""
    fields: dict[str, Any] = {}
    optional: frozenset[str] = answer.__optional_keys__  # type: ignore[attr-defined]  # no type names a TypedDict class
    for key, hint in get_type_hints(answer, include_extras=True).items():
        inner, doc = _parts(hint)
        given = {"description": doc.text, "ge": doc.ge, "le": doc.le}
        kwargs: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
        if key in optional:
            kwargs.update(default=None, json_schema_extra=_drop_default)
        fields[key] = (_model_type(inner), Field(**kwargs))
    built: type[BaseModel] = create_model(
        answer.__name__, __base__=_Answer, __doc__=answer.__doc__, __module__=__name__, **fields
    )
    return built


def _parts(hint: Any) -> tuple[Any, Doc]:
    """(the type, its ``Doc``) of a key's annotation, ``NotRequired`` and ``Annotated`` taken off."""
    while get_origin(hint) in (NotRequired, Required):
        (hint,) = get_args(hint)
    if get_origin(hint) is Annotated:
        inner, *extras = get_args(hint)
        docs = [extra for extra in extras if isinstance(extra, Doc)]
        return inner, docs[0] if docs else Doc()
    return hint, Doc()


def _model_type(hint: Any) -> Any:
    """``hint`` with every answer type in it replaced by its model."""
    if is_typeddict(hint):
        return model(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is list:
        return list[_model_type(args[0])]  # type: ignore[misc]  # built at run time
    if origin is dict:  # counts by kind or by speaker
        return dict[args[0], _model_type(args[1])]  # type: ignore[misc,valid-type]  # built at run time
    if origin in (Union, types.UnionType):
        return Union[tuple(_model_type(arg) for arg in args)]  # noqa: UP007 - built at run time
    if origin is Literal or not args:
        return hint
    raise TypeError(f"no model for {hint!r}")


# --- errors -----------------------------------------------------------------------


class ErrorBody(BaseModel):
    """``error`` of the error body: its type, a message for humans, and machine fields."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="invalid_request_error, not_found_error, conflict_error, api_error, ...")
    message: str = Field(description="For humans; branch on status, type and the fields, never on this.")
    field: str = _absent("The parameter at fault, as the caller named it.")


class ErrorEnvelope(BaseModel):
    """The one error body every face sends: ``{"type": "error", "status", "error": {...}}``."""

    type: Literal["error"]
    status: int = Field(description="HTTP-like status: 400, 404, 409, 500, 503.")
    error: ErrorBody


T = TypeVar("T")


class OrError(RootModel[Union[T, ErrorEnvelope]], Generic[T]):  # noqa: UP007 - a TypeVar union
    """A tool's output: its answer, or the error body (``type: object`` at the root,
    which 2025-era clients require of an output schema)."""

    model_config = ConfigDict(json_schema_extra={"type": "object"})


def answer_models(op: Operation) -> tuple[type[BaseModel], ...]:
    """The pydantic models an operation's success answers validate against (the core
    answer types its contract entry names)."""
    return tuple(model(getattr(core, name)) for name in op.answers)

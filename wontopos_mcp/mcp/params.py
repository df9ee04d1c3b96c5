"""MCP tool parameters, made from the contract table: each one's JSON schema is the
documentation a model reads (type, description, range and default from :mod:`contract`,
by the parameter's ``kind``); the service checks every value again, so these only
describe and pre-check.

A model pays for every character of a schema on every turn, so each says a thing once:
a range is the schema's ``minimum``/``maximum``/``default``, not repeated in words.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import Field, Strict, WrapValidator

from wontopos_mcp.contract import MAX_MESSAGES, Param, operation

__all__ = ["parameter"]


def _absent_is_none(value: Any, handler: Callable[[Any], Any]) -> Any:
    return None if value is None else handler(value)


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def optional(kind: Any, description: str, *constraints: Any) -> Any:
    """An optional parameter: omitted (or null) means "not given", so the service's
    default applies; any other value must be a ``kind``.

    The annotation is ``kind`` itself, not ``kind | None``, on purpose: the SDK
    JSON-decodes string arguments whose annotation is not exactly ``str`` (a workaround
    for clients that send objects as JSON text), which would turn a store or speaker
    literally named ``null`` into "not given". ``constraints`` (``Strict()``, ``Ge(0)``)
    apply to a given value, inside the null check.
    """
    metadata = (
        *constraints,
        WrapValidator(_absent_is_none),
        Field(description=description, json_schema_extra=_drop_default),
    )
    arguments = (kind, *metadata)
    return Annotated[arguments]  # an Annotated type built at run time


def optional_text(description: str) -> Any:
    return optional(str, description)


def limit_param(param: Param) -> Any:
    """An integer parameter with its range and default from the contract table; null
    means "not given" (the default), as for every optional parameter here and in REST:
    some tool-calling clients send null for each optional field they leave out."""
    assert param.low is not None, f"{param.name} is not an integer parameter"
    bounds = (Ge(param.low),) if param.high is None else (Ge(param.low), Le(param.high))
    described = Field(description=param.description)
    arguments = (int, Strict(), *bounds, WrapValidator(_absent_is_none), described)
    return Annotated[arguments]  # an Annotated type built at run time


def flag(description: str) -> Any:
    """A true/false parameter; null means "not given" (its default)."""
    return Annotated[bool, Strict(), WrapValidator(_absent_is_none), Field(description=description)]


MESSAGE_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": ["user", "assistant", "system", "tool"],
        },
        "name": {"type": "string", "description": "A registered person who said it, instead of the role's."},
        "content": {"type": "string"},
    },
    "required": ["role", "content"],
    "additionalProperties": False,
}


def _messages_schema(schema: dict[str, Any]) -> None:
    # The service checks each message (and names it: `messages[2].role`); the schema
    # documents the shape for the model.
    schema.update(items=MESSAGE_ITEM_SCHEMA, minItems=1, maxItems=MAX_MESSAGES)


Messages = Annotated[
    list[Any],
    Strict(),
    Field(
        description=operation("memory_add_messages").param("messages").description, json_schema_extra=_messages_schema
    ),
]


def parameter(param: Param) -> inspect.Parameter:
    """``param`` as a tool function declares it (keyword-only): the annotation its
    ``kind`` calls for, and as Python default the table's (shown in the schema) or
    ``None`` ("not given") for an optional parameter without one."""
    required = inspect.Parameter.empty
    annotation: Any
    default: Any = None
    if param.kind == "integer":
        assert param.low is not None  # an integer parameter is one with a low bound
        bounds = (Ge(param.low),) if param.high is None else (Ge(param.low), Le(param.high))
        described = param.description
        if param.required:
            arguments = (int, Strict(), *bounds, Field(description=described))
            annotation, default = Annotated[arguments], required  # an Annotated type built at run time
        elif param.default is not None:
            annotation, default = limit_param(param), param.default
        else:
            annotation = optional(int, described, Strict(), *bounds)
    elif param.kind == "flag":
        annotation, default = flag(param.description), param.default
    elif param.kind == "names":
        annotation = optional(list[str], param.description, Strict())
    elif param.kind == "object":
        annotation = optional(dict[str, Any], param.description, Strict())
    elif param.kind == "messages":
        annotation, default = Messages, required
    elif param.required:
        annotation, default = Annotated[str, Field(description=param.description)], required
    else:
        annotation = optional_text(param.description)
    return inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)

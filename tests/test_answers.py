"""The core's answer types are the one place an answer's shape is written.

Every operation of the contract table returns, by its ``MemoryService`` annotation, the
answer types the table names; the MCP output models are derived from those types, key for
key; and an optional key is omitted (never ``null``) in the types and the schemas alike.
"""

from __future__ import annotations

import types
from typing import Union, get_args, get_origin

import pytest
from typing_extensions import get_type_hints, is_typeddict

from wontopos_mcp import contract
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.mcp.answers import answer_models, model
from wontopos_mcp.rules import answers

ANSWER_TYPES = [value for name, value in vars(answers).items() if is_typeddict(value) and not name.startswith("_")]


def _members(annotation: object) -> set[str]:
    if get_origin(annotation) in (Union, types.UnionType):
        return {member.__name__ for member in get_args(annotation)}
    return {annotation.__name__}


@pytest.mark.parametrize("op", contract.OPERATIONS.values(), ids=lambda op: op.name)
def test_each_operation_returns_the_answer_types_its_table_entry_names(op: contract.Operation) -> None:
    method = getattr(MemoryService, op.core)
    returned = get_type_hints(method)["return"]
    assert _members(returned) == set(op.answers)
    assert all(is_typeddict(getattr(answers, name)) for name in op.answers)


def test_no_public_method_of_the_service_returns_a_bare_dict() -> None:
    for name, method in vars(MemoryService).items():
        if name.startswith("_") or not callable(method) or name == "reindex":
            continue
        returned = method.__annotations__.get("return", "None")
        assert "dict[" not in str(returned), name


@pytest.mark.parametrize("answer", ANSWER_TYPES, ids=lambda answer: answer.__name__)
def test_each_model_has_the_keys_of_its_answer_type_and_requires_only_the_required_ones(answer: type) -> None:
    schema = model(answer).model_json_schema()
    assert list(schema["properties"]) == list(get_type_hints(answer))
    assert set(schema.get("required", [])) == set(answer.__required_keys__)
    for key in answer.__optional_keys__:
        shown = schema["properties"][key]
        assert "default" not in shown, key
        assert {"type": "null"} not in shown.get("anyOf", []) or key in ("next_before",), key
    assert schema.get("additionalProperties") is True


def test_the_models_the_table_names_are_the_derived_ones() -> None:
    for op in contract.OPERATIONS.values():
        assert answer_models(op) == tuple(model(getattr(answers, name)) for name in op.answers)


def test_an_optional_key_sent_as_null_is_refused_as_a_strict_client_refuses_it() -> None:
    record = {
        "id": "m", "content": "c", "category": "general", "importance": 0.5, "time_bucket": "2026-07",
        "created_at": "2026-07-01T00:00:00.000000Z", "is_superseded": False,
    }  # fmt: skip
    model(answers.MemoryRecord).model_validate(record)
    with pytest.raises(ValueError, match="speaker"):
        model(answers.MemoryRecord).model_validate({**record, "speaker": None})

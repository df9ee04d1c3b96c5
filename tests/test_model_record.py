"""The database records the model it was built with; opening it with another one stops
(SPEC "Configuration": one line naming both), checked from the small file beside a local
database, without LanceDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wontopos_mcp.store import ModelMismatch, Store


def test_a_database_built_with_one_model_refuses_another_naming_both(make_service: Any, tmp_path: Path) -> None:
    service = make_service(db=tmp_path / "db")
    service.memory_add("The ferry leaves at seven.")  # creates the chunks table: the model is recorded
    model_id = service._embedder().model_id

    fresh = Store(str(tmp_path / "db"))
    assert fresh.check_model(model_id) is None
    with pytest.raises(ModelMismatch) as refused:
        fresh.check_model("intfloat/multilingual-e5-large")
    assert model_id in str(refused.value) and "intfloat/multilingual-e5-large" in str(refused.value)
    assert fresh._db is None, "the check reads the file beside the database, not LanceDB"


def test_a_database_without_vectors_yet_accepts_any_model(make_service: Any, tmp_path: Path) -> None:
    make_service(db=tmp_path / "db").store_create("alice")
    assert Store(str(tmp_path / "db")).check_model("any-model") is None

"""The engine's layout, pinned: each core module imports only modules below it in
``CORE_ORDER``, and the core imports nothing of the faces, their frameworks or ``config``.

The imports are read from the source (``ast``, every ``import`` statement, those under
``TYPE_CHECKING`` and inside functions included), so an upward arrow fails here even
when it is only taken at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wontopos_mcp"

# Lowest first. A module may import only modules listed before it.
CORE_ORDER = (
    # rules that know no storage
    "errors", "forwarding", "validation", "dates", "names", "text", "secret_rules", "secret_shapes",
    "secret_words", "redaction", "duplicates", "records",
    "conversation", "idempotency", "batch", "scope", "contract", "budget", "verbs",
    # the embedding model
    "e5_convert", "embeddings",
    # storage: upkeep decisions, write coordination, the LanceDB adapter
    "maintenance", "lease", "object_leases", "coordination", "db_checks",
    "store_schema", "store_search", "store_upkeep", "store_purge", "store",
    # the parts, each the only owner of its data
    "registry", "memories", "history", "search", "commits", "stores", "identity", "writes", "batch_writes",
    "reads", "paging",
    # building a service, and the facade
    "bootstrap", "service",
)  # fmt: skip
FACES = (
    "__init__", "__main__", "config", "models", "jsonrpc", "mcp_params", "mcp_tools", "mcp_speaker_tools",
    "mcp_server", "transport", "rest", "wrong_keys", "http_app", "http_server", "logs", "library", "cli",
    "commands", "cli_info", "importing",
)  # fmt: skip
FORBIDDEN = ("mcp", "starlette", "uvicorn", "anyio", "pydantic")
LONG_MODULES = {"e5_convert"}  # the model converter
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 230
# Not split yet (issue 10): the adapter's public methods are what tests and bench/ call.
KNOWN_LONG_CLASSES = {"store.Store"}


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(our modules, third-party top-level packages) that ``module`` imports."""
    ours: set[str] = set()
    others: set[str] = set()
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                ours.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif node.level == 0 and node.module and node.module.split(".")[0] == "wontopos_mcp":
                parts = node.module.split(".")
                ours.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
            elif node.level == 0 and node.module:
                others.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                (ours.add(parts[1]) if parts[0] == "wontopos_mcp" and len(parts) > 1 else others.add(parts[0]))
    return ours, others


def test_every_module_of_the_package_is_placed() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    assert len(CORE_ORDER) == len(set(CORE_ORDER))
    assert modules - set(CORE_ORDER) - set(FACES) == set(), "a new module: place it in CORE_ORDER or FACES"
    assert set(CORE_ORDER) <= modules


@pytest.mark.parametrize("module", CORE_ORDER)
def test_a_core_module_imports_only_modules_below_it(module: str) -> None:
    ours, _ = _imports(module)
    below = set(CORE_ORDER[: CORE_ORDER.index(module)])
    assert ours - below == set(), f"{module} imports {sorted(ours - below)}, which are not below it"


@pytest.mark.parametrize("module", CORE_ORDER)
def test_the_core_imports_no_face_framework_or_config(module: str) -> None:
    ours, others = _imports(module)
    assert ours & set(FACES) == set()
    assert others & set(FORBIDDEN) == set()


@pytest.mark.parametrize("module", CORE_ORDER + FACES)
def test_modules_and_their_classes_stay_small(module: str) -> None:
    text = (PACKAGE / f"{module}.py").read_text(encoding="utf-8")
    if module not in LONG_MODULES:
        assert text.count("\n") <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and f"{module}.{node.name}" not in KNOWN_LONG_CLASSES:
            assert node.end_lineno - node.lineno + 1 <= MAX_CLASS_LINES, f"{module}.{node.name}"


def test_the_import_reader_sees_an_upward_arrow() -> None:
    """The checks above could pass by reading nothing: service must import its parts."""
    ours, others = _imports("service")
    assert {"registry", "memories", "writes", "reads", "paging", "bootstrap"} <= ours
    assert "threading" in others


# -- the seams the layout promises ----------------------------------------------------------------


def test_write_coordination_is_chosen_by_the_database_uri(tmp_path: Path) -> None:
    from wontopos_mcp.coordination import (
        LOCK_FILE,
        FileLockCoordinator,
        InProcessCoordinator,
        LeaseCoordinator,
        coordinator_for,
    )

    local = coordinator_for(str(tmp_path / "db"))
    assert isinstance(local, FileLockCoordinator)
    for uri in ("s3://bucket/db", "s3+ddb://bucket/db?ddbTableName=t", "gs://bucket/db", "az://container/db"):
        for writers in ("single", "leased"):
            chosen = coordinator_for(uri, writers=writers)
            assert isinstance(chosen, LeaseCoordinator) and chosen.mode == writers
    assert type(coordinator_for("db://cloud-db")) is InProcessCoordinator  # LanceDB Cloud: best effort
    local.attach()
    with local.hold(), local.hold():  # re-entrant for the thread that holds it
        assert (tmp_path / "db" / LOCK_FILE).exists()


def test_the_offline_switch_of_the_default_model_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from wontopos_mcp.embeddings import _offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with _offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in os.environ
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's choice is never overridden
    with _offline():
        assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_a_store_left_out_of_store_create_is_the_default_store_in_the_core(tmp_path: Path) -> None:
    from wontopos_mcp.embeddings import ModelLoader
    from wontopos_mcp.service import MemoryService
    from wontopos_mcp.store import Store

    service = MemoryService(Store(str(tmp_path / "db")), ModelLoader(lambda: None, model="unused"))  # type: ignore[arg-type,return-value]
    try:
        assert service.store_create() == {"user_id": "default", "status": "exists"}
        assert service.store_create(None) == {"user_id": "default", "status": "exists"}
        assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default"]
    finally:
        service.close()

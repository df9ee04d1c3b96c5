"""Shared helpers of the MCP tests: a real service on a fresh database, and a client
wrapper that checks every answer the way a strict client would.

Every call made through :class:`Session` asserts that the result carries structured
content, that its text content is the same JSON, and that the structured content
validates (``jsonschema``, like the TypeScript SDK and MCP Inspector) against the output
schema the server declared for that tool, success and error alike.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from mcp import Client
from mcp.types import CallToolResult

from wontopos_mcp.config import Settings
from wontopos_mcp.embeddings import ModelLoader
from wontopos_mcp.service import MemoryService

TOOLS = {
    "memory_add",
    "memory_search",
    "speaker_register",
    "speakers_list",
    "by_speaker",
    "speaker_remove",
    "store_create",
    "stores_list",
    "store_delete",
    "memory_get",
    "memory_list",
    "memory_forget",
    "memory_supersede",
    "memory_add_messages",
    "memory_recall",
}
READ_ONLY = {
    "memory_search", "speakers_list", "by_speaker", "memory_get", "memory_list", "stores_list", "memory_recall",
}  # fmt: skip
DESTRUCTIVE = {"memory_forget", "speaker_remove", "store_delete"}


REPO = Path(__file__).resolve().parent.parent


def server_env(model_cache: Any, **extra: str) -> dict[str, str]:
    """What a host passes a server process: a minimal environment plus our settings. The
    package may not be installed in the venv yet, so the repository goes on PYTHONPATH."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "WONTOPOS_MODEL_CACHE": str(model_cache),
        **extra,
    }
    for name in ("HF_HUB_OFFLINE", "TMPDIR", "SSL_CERT_FILE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    values = {"db": str(tmp_path / "db"), "model_cache": str(tmp_path / "models"), **overrides}
    return Settings.load(values, environ={})


def open_service(tmp_path: Path, embedder: Any, *, speaker_limit: int = 50, **kwargs: Any) -> MemoryService:
    """A real service on a fresh LanceDB under ``tmp_path``, with the session's model."""
    settings = settings_for(tmp_path, speaker_limit=speaker_limit)
    return MemoryService.open(settings, models=ModelLoader.of(embedder), **kwargs)


class Gate:
    """A model load that blocks until the test opens the gate; ``entered`` is set once a
    call is waiting for the model (the load has begun)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.event = threading.Event()
        self.entered = threading.Event()

    def load(self) -> Any:
        self.entered.set()
        self.event.wait(timeout=60)
        return self.embedder


def open_loading_service(tmp_path: Path, gate: Gate, *, model_wait: float = 0.2) -> MemoryService:
    """A real service whose model is still loading (until ``gate.event`` is set)."""
    loader = ModelLoader(gate.load, model=gate.embedder.model_id)
    return MemoryService.open(settings_for(tmp_path), models=loader, model_wait=model_wait)


class Session:
    """A connected client whose every answer is checked against its tool's output schema."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.validators: dict[str, Draft202012Validator] = {}
        self.tools: dict[str, Any] = {}

    async def load_tools(self) -> None:
        for tool in (await self.client.list_tools()).tools:
            self.tools[tool.name] = tool
            assert tool.output_schema is not None, tool.name
            Draft202012Validator.check_schema(tool.output_schema)
            self.validators[tool.name] = Draft202012Validator(tool.output_schema)

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        result = await self.client.call_tool(name, arguments or {})
        payload = result.structured_content
        assert isinstance(payload, dict), f"{name}: no structured content: {result.content}"
        assert len(result.content) == 1 and result.content[0].type == "text"
        assert json.loads(result.content[0].text) == payload, f"{name}: text and structured content differ"
        if name in self.validators:
            errors = [e.message for e in self.validators[name].iter_errors(payload)]
            assert not errors, f"{name}: answer does not match its output schema: {errors}\n{payload}"
        return result

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(name, arguments)
        assert not result.is_error, f"{name} refused: {result.structured_content}"
        return result.structured_content

    async def refused(
        self, name: str, arguments: dict[str, Any], *, status: int, type: str, field: str | None = None
    ) -> dict[str, Any]:
        """Call ``name`` and check it answers SPEC's error body; return ``error``."""
        result = await self.call(name, arguments)
        body = result.structured_content
        assert result.is_error, f"{name} answered {body} instead of a {status}"
        assert body["type"] == "error" and body["status"] == status, body
        assert body["error"]["type"] == type, body
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        if field is not None:
            assert body["error"].get("field") == field, body
        return body["error"]

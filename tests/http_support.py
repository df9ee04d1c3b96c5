"""Helpers of the HTTP-face tests: the real app served by real uvicorn on a free loopback
port, in a background thread, over a real service (LanceDB under a temporary folder and
the session's real model, or a model that is still loading)."""

from __future__ import annotations

import dataclasses
import socket
import threading
from pathlib import Path
from typing import Any

import uvicorn

from wontopos_mcp.config import Settings
from wontopos_mcp.embeddings import ModelLoader
from wontopos_mcp.http_app import build_app
from wontopos_mcp.service import MemoryService

KEY = "test-key-s3cret"


def settings_for(folder: Path, *, api_key: str | None = None, **overrides: Any) -> Settings:
    values = {"db": str(folder / "db"), "model_cache": str(folder / "models"), **overrides}
    return dataclasses.replace(Settings.load(values, environ={}), api_key=api_key)


def open_service(settings: Settings, embedder: Any = None, *, models: ModelLoader | None = None, **kwargs: Any):
    loader = models if models is not None else ModelLoader.of(embedder)
    return MemoryService.open(settings, models=loader, **kwargs)


class _Server(uvicorn.Server):
    """uvicorn that says when it is serving (no polling)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()


class LiveServer:
    """``with LiveServer(app) as live: live.url``: real uvicorn on 127.0.0.1, a free port."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.url = ""
        self.port = 0

    def __enter__(self) -> "LiveServer":
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            self.app, log_config=None, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        self.server = _Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listener]}, name="test-uvicorn", daemon=True
        )
        self.thread.start()
        assert self.server.ready.wait(30), "uvicorn did not start within 30 s"
        assert self.server.started, "uvicorn failed to start (see the log)"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "uvicorn did not stop within 15 s"


def serve(service: MemoryService, settings: Settings) -> LiveServer:
    return LiveServer(build_app(service, settings))

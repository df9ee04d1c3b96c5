"""``wontopos-mcp``: argument parsing and start-up; no rules.

The default command is the stdio MCP server, so ``uvx wontopos-mcp`` in an agent's
config just works. A bad setting stops here with one line on stderr and exit code 2,
never a traceback; stdout stays reserved for the protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .config import TRANSPORTS, ConfigError, Settings

EXIT_BAD_SETTING = 2
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        _fail(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="wontopos-mcp", description="Memory that knows who said it: an offline MCP memory server.")
    parser.add_argument("--version", action="version", version=f"wontopos-mcp {__version__}")
    parser.add_argument("--db", help="database directory or LanceDB URI (WONTOPOS_DB)")
    parser.add_argument("--transport", choices=TRANSPORTS, help="stdio (default), http or sse (WONTOPOS_TRANSPORT)")
    parser.add_argument("--host", help="HTTP bind address, default 127.0.0.1 (WONTOPOS_HOST)")
    parser.add_argument("--port", help="HTTP port, default 8765 (WONTOPOS_PORT)")
    parser.add_argument("--allowed-hosts", help="extra Host/Origin names, comma-separated (WONTOPOS_ALLOWED_HOSTS)")
    parser.add_argument("--max-body-bytes", help="HTTP body limit, default 4 MiB (WONTOPOS_MAX_BODY_BYTES)")
    parser.add_argument("--speaker-limit", help="people a store may register, default 50 (WONTOPOS_SPEAKER_LIMIT)")
    parser.add_argument("--embed-model", help="embedding model (WONTOPOS_EMBED_MODEL)")
    parser.add_argument("--model-cache", help="model cache directory (WONTOPOS_MODEL_CACHE)")
    parser.add_argument("--log-level", help="debug, info, warning (default), error (WONTOPOS_LOG_LEVEL)")
    return parser


def _fail(message: str) -> Any:
    print(f"wontopos-mcp: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_SETTING)


def main(argv: Sequence[str] | None = None) -> int:
    args = vars(_parser().parse_args(argv))
    try:
        settings = Settings.load(args)
    except ConfigError as exc:
        _fail(str(exc))
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return serve(settings)


def serve(settings: Settings) -> int:
    from .service import MemoryService
    from .store import ModelMismatch

    if settings.transport != "stdio":
        # Until the HTTP face has its own API-key middleware, serve HTTP on loopback only
        # and refuse a key we could not enforce, rather than expose memories silently.
        if settings.host not in _LOOPBACK:
            _fail(f"refusing to serve on {settings.host}: this version serves HTTP on loopback only")
        if settings.api_key:
            _fail("WONTOPOS_API_KEY is set but this version's HTTP transport cannot check it yet")
    service = MemoryService.open(settings)
    try:
        service.store.check_model(settings.embed_model)
    except ModelMismatch as exc:
        _fail(str(exc))
    from .mcp_server import build_server

    server = build_server(service)
    try:
        if settings.transport == "stdio":
            server.run("stdio")
        elif settings.transport == "http":
            server.run("streamable-http", host=settings.host, port=settings.port)
        else:
            server.run("sse", host=settings.host, port=settings.port)
    except KeyboardInterrupt:
        pass
    service.close()
    _exit_now(0)
    return 0


def _exit_now(code: int) -> None:
    """Leave without interpreter finalisation.

    The model may still be loading in a background thread when a host closes stdin;
    tearing down onnxruntime/LanceDB under a running native thread aborts the process
    (SIGABRT). Every acknowledged write is already committed, so nothing is lost.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

"""The program: ``wontopos-mcp`` (the console script), ``python -m wontopos_mcp`` and the
Claude Desktop bundle's entry point all run :func:`main`.

The composition root of the faces. The command line (``cli``), the MCP face (``mcp``),
the HTTP face (``http``) and the library (``library``) stand side by side above the
engine, none importing another, except that the HTTP app mounts MCP's server and
transports. Serving is the one place where the command line needs the other faces, so
the wiring is here, above all of them: :class:`Faces` hands ``cli.main`` the three servers
it may start, each importing its face only when called. A human command, ``--help`` or a
stdio relay (what an agent's host spawns) so never loads the MCP SDK, Starlette or
uvicorn, and this module itself imports nothing heavier than ``cli.main``.

May import: ``cli`` (whose :func:`~wontopos_mcp.cli.main.main` it runs), and, inside the
servers, ``mcp`` and ``http``; ``config`` and ``engine`` for annotations only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from wontopos_mcp.cli.main import main as run_command_line

if TYPE_CHECKING:
    import socket

    from wontopos_mcp.config import Settings
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["Faces", "main"]


class Faces:
    """The servers of the MCP and HTTP faces, as ``cli.main.Servers`` asks for them."""

    def stdio(self, service: MemoryService, *, tools: str) -> None:
        from wontopos_mcp.mcp.server import build_server
        from wontopos_mcp.mcp.transport import run_stdio

        run_stdio(build_server(service, tools=tools))

    def engine(
        self,
        service: MemoryService,
        listener: socket.socket,
        *,
        idle: float,
        alive: Callable[[], bool],
        on_clients: Callable[[int], None],
        tools: str,
    ) -> None:
        import anyio

        from wontopos_mcp.cli.answering import serve_commands
        from wontopos_mcp.cli.wire import is_hello
        from wontopos_mcp.mcp.server import build_server
        from wontopos_mcp.mcp.transport import serve_engine

        server = build_server(service, tools=tools)
        # The database opens, then the model loads, in the background, once; after the MCP
        # imports, which would otherwise share the interpreter with them (bench/first_call.py).
        service.start()
        # The human commands' connections (their own protocol, told by the first line).
        commands = (is_hello, functools.partial(serve_commands, service))
        serve = functools.partial(
            serve_engine, server, listener, idle=idle, alive=alive, on_clients=on_clients, also=commands
        )
        anyio.run(serve)

    def http(self, service: MemoryService, settings: Settings, listener: socket.socket) -> None:
        from wontopos_mcp.http.server import serve

        serve(service, settings, listener)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line (``sys.argv[1:]`` when ``argv`` is None) and return its exit code."""
    from wontopos_mcp.engine.bootstrap import cap_malloc_arenas

    cap_malloc_arenas()  # before any thread starts: an engine's memory (issue 53)
    return run_command_line(argv, servers=Faces())

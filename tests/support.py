"""The plain helpers of the whole suite (the fixtures are in ``conftest.py``).

- the core: a clock a test moves by hand, error expectations, whole-store snapshots and
  paging walks, and the two faces every core rule is checked through (``ServiceFace``,
  ``LibraryFace``);
- services: settings on a temporary folder, a real service, a model load held by a gate;
- MCP: the pinned tool list and a client session that checks every answer against the
  output schema its tool declares;
- HTTP: the real app served by real uvicorn on a free loopback port, in a thread;
- processes: the environment a host gives a server process.

Everything is real: LanceDB on disk and the session's real model (``embedder``), or a
model that is still loading; nothing of storage or the model is faked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import uvicorn
from anyio.streams.buffered import BufferedByteReceiveStream
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.types import CallToolResult

from wontopos_mcp import Memory
from wontopos_mcp.cli import commands, engines
from wontopos_mcp.cli.answering import serve_commands
from wontopos_mcp.cli.client import EngineClient
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import WontoposError
from wontopos_mcp.http.app import build_app
from wontopos_mcp.http.server import server_config
from wontopos_mcp.mcp.server import build_server
from wontopos_mcp.model.embeddings import ModelLoader

REPO = Path(__file__).resolve().parent.parent

# -- the core ----------------------------------------------------------------------------------------

RFC3339_MICROS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")  # every timestamp an answer carries
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 409: "conflict_error"}
T0 = datetime(2026, 7, 10, 4, 20, 39, 123456, tzinfo=timezone.utc)


class SteppableClock:
    """A clock that stands still until a test moves it, so writes can share a timestamp."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


@contextmanager
def refused(status: int, **details: Any) -> Iterator[pytest.ExceptionInfo[WontoposError]]:
    """Expect a ``WontoposError`` with this status, its error type (``ERROR_TYPES``) and these
    detail fields."""
    with pytest.raises(WontoposError) as info:
        yield info
    error = info.value
    assert error.status == status, repr(error)
    if status in ERROR_TYPES:
        assert error.type == ERROR_TYPES[status], repr(error)
    error_body(error.envelope(), status, ERROR_TYPES.get(status), **details)


def error_body(body: dict[str, Any], status: int, type: str | None = None, **fields: Any) -> dict[str, Any]:
    """``body`` is the structured error body (``{"type": "error", "status", "error": {...}}``) with
    this status, error type (unless None), a message and these fields; return ``error``.
    Every face's refusals are checked by this one function."""
    assert body["type"] == "error", body
    assert body["status"] == status, body
    error = body["error"]
    if type is not None:
        assert error["type"] == type, body
    assert isinstance(error["message"], str), body
    assert error["message"], body
    for key, value in fields.items():
        assert error.get(key) == value, f"{key}: {error.get(key)!r} != {value!r} in {body!r}"
    return error


def ids(memories: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in memories]


def all_memories(svc: MemoryService, user_id: str | None = None, *, page: int = 500) -> list[dict[str, Any]]:
    """Every memory of a store, walking ``memory_list`` to its end (oldest first)."""
    memories: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        answer = svc.memory_list(limit=page, cursor=cursor, user_id=user_id)
        memories += answer["memories"]
        cursor = answer["next_cursor"]
        if cursor is None:
            return memories
    raise AssertionError("memory_list never reached its last page")


def snapshot(svc: MemoryService) -> dict[str, Any]:
    """Everything a caller can see: stores, and each store's speakers and memories."""
    stores = svc.stores_list()["stores"]
    state: dict[str, Any] = {"stores": stores}
    for store in stores:
        uid = store["user_id"]
        state[uid] = {"speakers": svc.speakers_list(user_id=uid), "memories": all_memories(svc, uid)}
    return state


@contextmanager
def changes_nothing(svc: MemoryService) -> Iterator[None]:
    """The block must leave every store exactly as it found it."""
    before = snapshot(svc)
    yield
    assert snapshot(svc) == before


def walk_by_speaker(
    svc: MemoryService,
    speaker: str,
    *,
    limit: int = 20,
    user_id: str | None = None,
    between_pages: Callable[[], None] | None = None,
    max_pages: int = 1_000,
) -> list[dict[str, Any]]:
    """All pages of ``by_speaker``, following ``next_before``/``next_skip_ids``."""
    seen: list[dict[str, Any]] = []
    before, skip = None, None
    for _ in range(max_pages):
        page = svc.by_speaker(speaker, limit=limit, before=before, skip_ids=skip, user_id=user_id)
        assert page["returned"] == len(page["memories"])
        seen += page["memories"]
        if not page["has_more"]:
            assert page["next_before"] is None
            assert page["next_skip_ids"] == []
            return seen
        assert page["returned"] == limit
        before, skip = page["next_before"], page["next_skip_ids"]
        if between_pages is not None:
            between_pages()
    raise AssertionError(f"by_speaker({speaker!r}) never reached its last page")


def refused_by_every_store_call(svc: MemoryService, store_id: Any) -> None:
    """Every call that names a store refuses this ``user_id`` with a 400 naming it."""
    for call in (
        lambda: svc.store_create(store_id),
        lambda: svc.store_delete(store_id),
        lambda: svc.speakers_list(user_id=store_id),
        lambda: svc.speaker_register("Bob", user_id=store_id),
        lambda: svc.memory_list(user_id=store_id),
        lambda: svc.memory_search("this", user_id=store_id),
    ):
        with refused(400, field="user_id"):
            call()


# -- rows written past the rules ------------------------------------------------------------------------
# What a replica or an older version left in the chunks table, built with the parts' public
# operations (``registry``, ``commits``, ``memories``, ``store``), never the service's own privates.


def store_key(svc: MemoryService, user_id: str | None = None) -> str:
    """The key an existing store's rows carry (``None``: "default")."""
    return svc.registry.resolve(user_id).key


def next_seq(svc: MemoryService, user_id: str | None = None) -> int:
    """The sequence number the store's next write takes."""
    return svc.commits.last_seq(store_key(svc, user_id)) + 1


def memory_rows(
    svc: MemoryService, text: str, *, seq: int | None = None, user_id: str | None = None
) -> tuple[str, list[Any]]:
    """(the id, the chunk rows) of an untagged memory of ``text`` as ``memory_add`` makes
    them, not yet written and past every rule (restatement, the sequence number decided
    under the write lock); ``seq`` defaults to the store's next. :func:`write_rows` writes
    them, as given or edited."""
    embedder = svc.commits.embedder()
    memory = {"content": text, "speaker": None, "category": "general", "event": None,
              "conversation_id": None, "role": None}  # fmt: skip
    seq = next_seq(svc, user_id) if seq is None else seq
    return svc.memories.new_rows(store_key(svc, user_id), memory, [text], embedder.embed_passages([text]), seq=seq)


def write_rows(svc: MemoryService, rows: list[Any]) -> None:
    """Append chunk rows to the table of the service's model, as they are."""
    embedder = svc.commits.embedder()
    svc.store.chunks.add(svc.store.chunks.for_model(embedder.model_id, embedder.dim), rows)


# -- the two faces of the core ------------------------------------------------------------------------


class ServiceFace:
    """The core, called with the MCP parameter names it uses."""

    def __init__(self, svc: MemoryService) -> None:
        self.svc = svc

    def create_store(self, user_id: Any) -> dict[str, Any]:
        return self.svc.store_create(user_id)

    def delete_store(self, user_id: Any) -> dict[str, Any]:
        return self.svc.store_delete(user_id)

    def stores(self) -> list[dict[str, Any]]:
        return self.svc.stores_list()["stores"]

    def register(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.speaker_register(speaker, user_id=user_id)

    def speakers(self, user_id: Any = None) -> dict[str, Any]:
        return self.svc.speakers_list(user_id=user_id)

    def remove(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.speaker_remove(speaker, user_id=user_id)

    def add(self, content: Any, user_id: Any = None, **fields: Any) -> dict[str, Any]:
        return self.svc.memory_add(content, user_id=user_id, **fields)

    def add_messages(self, messages: Any, conversation_id: Any = None, user_id: Any = None) -> dict[str, Any]:
        return self.svc.memory_add_messages(messages, conversation_id=conversation_id, user_id=user_id)

    def recall(self, query: Any, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.svc.memory_recall(query, user_id=user_id, **options)

    def search(self, query: Any, user_id: Any = None, **options: Any) -> list[dict[str, Any]]:
        return self.svc.memory_search(query, user_id=user_id, **options)["memories"]

    def by_speaker(self, speaker: Any, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.svc.by_speaker(speaker, user_id=user_id, **options)

    def get(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.memory_get(memory_id, user_id=user_id)["memory"]

    def list(self, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.svc.memory_list(user_id=user_id, **options)

    def forget(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.memory_forget(memory_id=memory_id, user_id=user_id)

    def forget_speaker(self, speaker: Any, confirm_records: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.memory_forget(speaker=speaker, confirm_records=confirm_records, user_id=user_id)

    def supersede(self, memory_id: Any, content: Any, user_id: Any = None) -> dict[str, Any]:
        return self.svc.memory_supersede(memory_id, content, user_id=user_id)


class LibraryFace(ServiceFace):
    """The same calls through ``Memory``, with the SDK ``Client``'s names and argument order
    (``get(memory_id)`` and ``delete(memory_id)`` alone when no store is named)."""

    def __init__(self, svc: MemoryService) -> None:
        super().__init__(svc)
        self.mem = Memory(service=svc)

    def create_store(self, user_id: Any) -> dict[str, Any]:
        return self.mem.create_store(user_id)

    def delete_store(self, user_id: Any) -> dict[str, Any]:
        return self.mem.delete_store(user_id)

    def stores(self) -> list[dict[str, Any]]:
        return self.mem.list_stores()

    def register(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.add_speaker(speaker, user_id=user_id)

    def speakers(self, user_id: Any = None) -> dict[str, Any]:
        return self.mem.list_speakers(user_id=user_id)

    def remove(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.remove_speaker(speaker, user_id=user_id)

    def add(self, content: Any, user_id: Any = None, **fields: Any) -> dict[str, Any]:
        return self.mem.add(content, user_id=user_id, **fields)

    def add_messages(self, messages: Any, conversation_id: Any = None, user_id: Any = None) -> dict[str, Any]:
        return self.mem.add_messages(messages, user_id, conversation_id=conversation_id)

    def recall(self, query: Any, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.mem.recall(query, user_id, **options)

    def search(self, query: Any, user_id: Any = None, **options: Any) -> list[dict[str, Any]]:
        return self.mem.search(query, user_id, **options)

    def by_speaker(self, speaker: Any, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.mem.by_speaker(speaker, user_id, **options)

    def get(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.get(memory_id) if user_id is None else self.mem.get(user_id, memory_id)

    def list(self, user_id: Any = None, **options: Any) -> dict[str, Any]:
        return self.mem.list_memories(user_id, **options)

    def forget(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.delete(memory_id) if user_id is None else self.mem.delete(user_id, memory_id)

    def forget_speaker(self, speaker: Any, confirm_records: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.delete_speaker(speaker, confirm_records=confirm_records, user_id=user_id)

    def supersede(self, memory_id: Any, content: Any, user_id: Any = None) -> dict[str, Any]:
        return self.mem.update(memory_id, content, user_id=user_id)


# -- services --------------------------------------------------------------------------------------


def settings_for(folder: Path, *, api_key: str | None = None, **overrides: Any) -> Settings:
    """Settings on ``folder`` (database and model cache), nothing read from the machine."""
    values = {"db": str(folder / "db"), "model_cache": str(folder / "models"), **overrides}
    return dataclasses.replace(Settings.load(values, environ={}), api_key=api_key)


def open_service(settings: Settings, embedder: Any = None, *, models: ModelLoader | None = None, **kwargs: Any):
    """The service a server builds from ``settings``, with the session's model (or ``answers``)."""
    loader = models if models is not None else ModelLoader.of(embedder)
    return MemoryService.open(settings, models=loader, **kwargs)


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

    def loader(self) -> ModelLoader:
        """A loader of the real model that waits for this gate."""
        return ModelLoader(self.load, model=self.embedder.model_id)


def open_loading_service(tmp_path: Path, gate: Gate, *, model_wait: float = 0.2) -> MemoryService:
    """A real service whose model is still loading (until ``gate.event`` is set)."""
    return open_service(settings_for(tmp_path), models=gate.loader(), model_wait=model_wait)


def command_runner(
    svc: MemoryService, capsys: pytest.CaptureFixture[str], *, inprocess: bool = False
) -> Callable[..., tuple[int, str, str]]:
    """``run("speakers", "list", "--user", "alice")`` -> (exit code, stdout, stderr): a
    human command of the CLI, parsed as the CLI does, run on ``svc`` as the shared engine
    serves it (the command line's protocol over a real socket to the engine's side,
    ``commands_engine``: a connection a command, as a command's process makes it), or
    ``inprocess`` on ``svc`` itself."""

    def run(*argv: str) -> tuple[int, str, str]:
        args = vars(build_parser().parse_args(argv))
        if inprocess:
            code = commands.run(args, Settings(), service=svc)
        else:
            with contextlib.closing(commands_engine(svc)) as client:
                code = commands.run(args, Settings(), service=client)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def commands_engine(svc: MemoryService) -> EngineClient:
    """A client of the command line's protocol, served on ``svc`` by the shared engine's
    side of it (``cli.answering``) in a thread of this process, over a socket pair: the
    engine's face without a process and a second model load, until the client closes."""
    ours, theirs = socket.socketpair()

    async def serve() -> None:
        stream = await anyio.abc.SocketStream.from_socket(theirs)
        buffered = BufferedByteReceiveStream(stream)

        async def lines() -> AsyncIterator[bytes]:
            while True:
                try:
                    yield await buffered.receive_until(b"\n", 1 << 30)
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                    return

        async with stream:
            read = lines()
            await anext(read)  # the hello
            await serve_commands(svc, read, stream.send)

    threading.Thread(target=anyio.run, args=(serve,), name="wontopos-test-commands", daemon=True).start()
    return EngineClient(ours)


# -- MCP ---------------------------------------------------------------------------------------------

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
    "speaker_rename",
    "speaker_merge",
}
READ_ONLY = {
    "memory_search", "speakers_list", "by_speaker", "memory_get", "memory_list", "stores_list", "memory_recall",
}  # fmt: skip
DESTRUCTIVE = {"memory_forget", "speaker_remove", "store_delete", "speaker_merge"}


class Session:
    """A connected client whose every answer is checked the way a strict client would: it
    carries structured content, its text content is the same JSON, and the structured
    content validates (``jsonschema``, like the TypeScript SDK and MCP Inspector) against
    the output schema the server declared for that tool, success and error alike."""

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
        assert len(result.content) == 1
        assert result.content[0].type == "text"
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
        """Call ``name`` and check it answers the structured error body; return ``error``."""
        result = await self.call(name, arguments)
        body = result.structured_content
        assert result.is_error, f"{name} answered {body} instead of a {status}"
        return error_body(body, status, type, **({} if field is None else {"field": field}))


@asynccontextmanager
async def mcp_session(service: MemoryService, mode: str | None = None) -> AsyncIterator[Session]:
    """An in-memory MCP client of ``service``'s server, its tools loaded."""
    options = {} if mode is None else {"mode": mode}
    async with Client(build_server(service), **options) as client:
        session = Session(client)
        await session.load_tools()
        yield session


# -- HTTP --------------------------------------------------------------------------------------------

KEY = "test-key-s3cret-0123456789"  # servers refuse keys under 16 characters


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
    """``with LiveServer(app) as live: live.url``: real uvicorn on 127.0.0.1, a free port,
    configured as the CLI configures it (``http.server.server_config``) from ``settings``."""

    def __init__(self, app: Any, settings: Settings | None = None) -> None:
        self.app = app
        self.settings = settings if settings is not None else Settings()
        self.url = ""
        self.port = 0

    def __enter__(self) -> LiveServer:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = server_config(self.app, self.settings, log_level="warning", timeout_graceful_shutdown=2)
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


def serve(service: MemoryService, settings: Settings, **options: Any) -> LiveServer:
    """A live server of ``build_app(service, settings, **options)``."""
    return LiveServer(build_app(service, settings, **options), settings)


@contextmanager
def served(folder: Path, embedder: Any, **settings: Any) -> Iterator[LiveServer]:
    """A live server over a real service on ``folder`` with these settings, handed out
    once it has settled (database open, model ready, so /healthz says "ok"); closed after.

    Settled is known from events, not time: the service starts the model load once its
    background database open is over (``MemoryService.start``), and the loader's ``get``
    returns once the load is."""
    configured = settings_for(folder, **settings)
    gate = Gate(embedder)
    gate.event.set()  # the model loads at once, but through the service's own start
    loader = gate.loader()
    service = open_service(configured, models=loader)
    try:
        with serve(service, configured) as live:
            assert gate.entered.wait(60), "the service never began the model load"
            loader.get(timeout=60)
            yield live
    finally:
        service.close()


# -- processes ---------------------------------------------------------------------------------------


ENGINE_IDLE = "3"
"""Seconds a shared engine a test started stays without a client (the real setting)."""


def engine_env() -> dict[str, str]:
    """What a server process a test starts needs so that its shared engine lives in the
    session's runtime directory and leaves :data:`ENGINE_IDLE` seconds after its last client."""
    return {"XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", ""), "WONTOPOS_ENGINE_IDLE": ENGINE_IDLE}


def server_env(model_cache: Any, **extra: str) -> dict[str, str]:
    """What a host passes a server process: a minimal environment plus our settings. The
    package may not be installed in the venv yet, so the repository goes on PYTHONPATH.
    A stdio server's shared engine lives in the session's runtime directory (conftest's
    ``engine_runtime``) and leaves :data:`ENGINE_IDLE` seconds after its last client."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "WONTOPOS_MODEL_CACHE": str(model_cache),
        "WONTOPOS_ENGINE_IDLE": ENGINE_IDLE,
        **extra,
    }
    for name in ("HF_HUB_OFFLINE", "TMPDIR", "SSL_CERT_FILE", "XDG_RUNTIME_DIR"):
        if name in os.environ and name not in extra:
            env[name] = os.environ[name]
    return env


# A trip chat as WhatsApp's Android export writes it (day first, 24 h): three scripts, a
# system line, a media line and a message on two lines. One sample for the REST import
# test and the page's import test, so both import the same file.
TRIP_NAME = "WhatsApp Chat with Trip.txt"
TRIP_CHAT = """\
12/04/2026, 09:00 - Messages and calls are end-to-end encrypted. No one outside of this chat can read them.
12/04/2026, 09:01 - Νίκος: Κλείνω το πλοίο για Νάξο την Παρασκευή.
12/04/2026, 09:02 - Lena: I'll take care of the rooms near the harbour.
12/04/2026, 09:03 - 陽菜: 港で会いましょう。
12/04/2026, 09:04 - Lena: <Media omitted>
12/04/2026, 09:05 - Νίκος: Το πλοίο φεύγει στις 07:30.
13/04/2026, 18:20 - Lena: Rooms booked: Harbour View,
two nights, breakfast included.
"""


def engines_serving(db: Path) -> list[dict[str, Any]]:
    """The running shared engines (``engines.running``) whose database is ``db``."""
    return [engine for engine in engines.running() if engine["db"] == str(db.resolve())]


def wait_until(check: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``check`` until it holds; fail saying ``what`` was awaited after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)

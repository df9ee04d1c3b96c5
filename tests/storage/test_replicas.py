"""Two server replicas on one database keep every guarantee (issue 11): a local directory
or ``file://`` URI through a file lock, object storage through a lease on the store's
conditional writes with ``--writers leased``.

Each deployment runs two real ``wontopos-mcp --transport http`` processes, started at the
same moment on one fresh database from two working directories, for the whole module (the
model loads once per process): a local directory, a ``file://`` URI, and ``s3://`` on
moto's S3 emulator (``s3_emulator``, started by this module on 127.0.0.1 and always
stopped). They are driven over the REST routes the SDK speaks, the two sides fired
together (threads behind a barrier), each race in a store of its own. What a client sees
is checked through the API; the sequence numbers, which no answer carries, are read from
the database's own table.

A client here retries what the SDK retries for a write (409/503 with ``retry_after_ms``,
the same ``Idempotency-Key`` on every attempt), so a replica that lost its lease and said
so is not a failure, while a second registration, memory or successor is.

The many-writes race is smaller than the issue's 2x300, to keep the module within a few
minutes on 2 shared cores: 2x300 took 55-80 s on a local directory, and 2x40 took 52 s on
the emulator before any lease (the lease serialises writes to one store, about doubling
that). ``file://`` is the local directory's lock once the URI is normalised, so it races
fewer. Raise ``WRITES`` for a longer soak.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx
import pytest
from s3_emulator import S3Emulator, free_port
from support import KEY, server_env

pytestmark = [pytest.mark.process, pytest.mark.emulator]

LIMIT = 5
LEASE_TTL_MS = 3_000
START_TIMEOUT = 180.0  # two processes importing LanceDB and loading the model on 2 cores
CALL_TIMEOUT = 120.0  # one request, however long it waits for a lease
RETRY_FOR = 60.0  # how long a client goes on retrying a 409/503 that says when to come back
PAGE = 7  # the small memory_list page of the walks
ROUNDS = 5
WRITES = {"local": 150, "file": 50, "s3": 25}  # per replica; why these, see the module doc
DEPLOYMENTS = ("local", "file", "s3")

T = TypeVar("T")
_names = itertools.count()


def fresh(prefix: str) -> str:
    """A store or speaker name no other race of the module uses."""
    return f"{prefix}-{next(_names)}"


# -- one replica -------------------------------------------------------------------------------------------


class Replica:
    """One ``wontopos-mcp --transport http`` process and a client of its REST API."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path, logs: Path) -> None:
        self.name = name
        self.env = env
        self.cwd = cwd
        self.log_path = logs / f"{name}.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self._log = self.log_path.open("a", encoding="utf-8")
        command = [sys.executable, "-m", "wontopos_mcp", "--transport", "http", "--port", str(self.port)]
        self.process = subprocess.Popen(
            command, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, deadline: float) -> None:
        """Until /healthz says ``ok`` (database open, model loaded), bounded by ``deadline``."""
        last: Any = "no answer"
        with httpx.Client(base_url=self.url, timeout=5) as bare:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise AssertionError(
                        f"{self.name} exited at start ({self.process and self.process.returncode}):\n{self.log()}"
                    )
                try:
                    answer = bare.get("/healthz")
                    last = answer.json()
                    if answer.status_code == 200 and last["status"] == "ok":
                        return
                except httpx.TransportError as exc:
                    last = repr(exc)
                time.sleep(0.2)
        raise AssertionError(f"{self.name} not ready in time: {last}\n{self.log()}")

    def kill(self) -> None:
        """``kill -9``: no chance to release a lease or finish a write."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self) -> str:
        if self._log is not None:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def client(self) -> Api:
        return Api(self)


class Api:
    """The REST routes the races use, each returning ``(status, body)`` after the retries
    the SDK would make. One per thread."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.http = httpx.Client(
            base_url=f"{replica.url}/api/v1/memory", headers={"X-API-Key": KEY}, timeout=CALL_TIMEOUT
        )

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def send(
        self, method: str, path: str, body: dict[str, Any], *, key: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {} if key is None else {"Idempotency-Key": key}
        deadline = time.monotonic() + RETRY_FOR
        while True:
            answer = self.http.request(method, path, json=body, headers=headers)
            payload = answer.json()
            wait_ms = payload.get("error", {}).get("retry_after_ms") if answer.status_code in (409, 503) else None
            if wait_ms is None or time.monotonic() > deadline:
                return answer.status_code, payload
            time.sleep(min(wait_ms, 2_000) / 1000)

    def ok(self, method: str, path: str, body: dict[str, Any], **options: Any) -> dict[str, Any]:
        status, payload = self.send(method, path, body, **options)
        assert status == 200, f"{self.replica.name} {method} {path} {body}: {status} {payload}\n{self.replica.log()}"
        return payload

    def create_store(self, user_id: str) -> tuple[int, dict[str, Any]]:
        return self.send("POST", "/collection", {"user_id": user_id})

    def register(self, user_id: str, speaker: str) -> tuple[int, dict[str, Any]]:
        return self.send("POST", "/speakers", {"user_id": user_id, "speaker": speaker})

    def remove(self, user_id: str, speaker: str) -> tuple[int, dict[str, Any]]:
        return self.send("DELETE", "/speakers", {"user_id": user_id, "speaker": speaker})

    def add(
        self, user_id: str, content: str, *, speaker: str | None = None, key: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        metadata = {} if speaker is None else {"speaker": speaker}
        return self.send("POST", "/store", {"user_id": user_id, "content": content, "metadata": metadata}, key=key)

    def supersede(self, user_id: str, memory_id: str, content: str) -> tuple[int, dict[str, Any]]:
        body = {"user_id": user_id, "old_memory_id": memory_id, "new_content": content}
        return self.send("POST", "/supersede", body, key=fresh("supersede"))

    def stores(self) -> list[str]:
        answer = self.http.get("/collections")
        assert answer.status_code == 200, answer.text
        return [c["user_id"] for c in answer.json()["collections"]]

    def speakers(self, user_id: str) -> list[str]:
        answer = self.http.get("/speakers", params={"user_id": user_id})
        assert answer.status_code == 200, answer.text
        return [s["speaker"] for s in answer.json()["speakers"]]

    def walk(self, user_id: str, page: int = PAGE) -> list[dict[str, Any]]:
        """Every memory of the store, following ``next_cursor`` to the end."""
        memories: list[dict[str, Any]] = []
        cursor = None
        for _ in range(10_000):
            answer = self.ok("POST", "/list", {"user_id": user_id, "limit": page, "cursor": cursor})
            assert answer["count"] == len(answer["memories"]) <= page
            memories += answer["memories"]
            cursor = answer["next_cursor"]
            if cursor is None:
                return memories
        raise AssertionError("memory_list never reached its last page")


# -- two replicas on one database ----------------------------------------------------------------------


@dataclass
class Deployment:
    name: str
    uri: str
    replicas: tuple[Replica, Replica]
    storage_options: dict[str, str] = field(default_factory=dict)
    start_problems: list[str] = field(default_factory=list)  # seen while both started together

    @property
    def a(self) -> Replica:
        return self.replicas[0]

    @property
    def b(self) -> Replica:
        return self.replicas[1]

    def ensure_running(self) -> None:
        """A replica an earlier test killed is started again."""
        for replica in self.replicas:
            if not replica.alive():
                replica.stop()
                replica.start()
                replica.wait_ready(time.monotonic() + START_TIMEOUT)

    def store(self, prefix: str) -> str:
        """A new store for one race, created at replica A."""
        user_id = fresh(prefix)
        with self.a.client() as api:
            assert api.create_store(user_id)[1]["status"] == "created"
        return user_id

    def seqs(self, memory_ids: list[str]) -> dict[str, set[int]]:
        """The sequence numbers the database holds for these memories (from their chunks)."""
        import lancedb

        table = lancedb.connect(self.uri, storage_options=self.storage_options or None).open_table("chunks")
        wanted = set(memory_ids)
        found: dict[str, set[int]] = {}
        for row in table.to_arrow().select(["memory_id", "seq"]).to_pylist():
            if row["memory_id"] in wanted:
                found.setdefault(row["memory_id"], set()).add(row["seq"])
        return found


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Emulator]:
    with S3Emulator(tmp_path_factory.mktemp("moto")) as s3:
        yield s3


@pytest.fixture(scope="module", params=DEPLOYMENTS)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_cache: Path, embedder: Any
) -> Iterator[Deployment]:
    """Two replicas on one fresh database, started at the same moment from two working
    directories; ``embedder`` first, so the model is converted once for both."""
    name = request.param
    root = tmp_path_factory.mktemp(f"replicas-{name}")
    extra: dict[str, str] = {}
    storage: dict[str, str] = {}
    if name == "local":
        uri = str(root / "db")
    elif name == "file":
        uri = (root / "db").as_uri()
    else:
        s3: S3Emulator = request.getfixturevalue("emulator")
        uri = f"s3://{s3.bucket(fresh('replicas'))}/db"
        extra = {**s3.env(), "WONTOPOS_WRITERS": "leased", "WONTOPOS_LEASE_TTL_MS": str(LEASE_TTL_MS)}
        storage = s3.storage_options()
    env = server_env(
        model_cache,
        WONTOPOS_API_KEY=KEY,
        WONTOPOS_DB=uri,
        WONTOPOS_SPEAKER_LIMIT=str(LIMIT),
        LANCEDB_LOG="error",
        **extra,
    )
    logs = root / "logs"
    logs.mkdir()
    pair = (Replica("A", env, root / "cwd-a", logs), Replica("B", env, root / "cwd-b", logs))
    deployment = Deployment(name, uri, pair, storage)
    try:
        for replica in pair:
            replica.start()
        deadline = time.monotonic() + START_TIMEOUT
        for replica in pair:
            try:
                replica.wait_ready(deadline)
            except AssertionError as problem:  # recorded for the fresh-start test; the rest go on
                deployment.start_problems.append(str(problem))
        deployment.ensure_running()
        yield deployment
    finally:
        for replica in pair:
            replica.stop()


def together(*calls: Callable[[], T]) -> list[T]:
    """Run the calls on threads released at one barrier; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = calls[index]()
        except BaseException as error:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=CALL_TIMEOUT * 3 + RETRY_FOR)
    assert not any(t.is_alive() for t in threads), "a racing call never came back"
    if errors:
        raise errors[0]
    return results


def both(deployment: Deployment, call: Callable[[Api], T]) -> tuple[T, T]:
    """``call`` at replica A and at replica B at the same moment."""
    with deployment.a.client() as a, deployment.b.client() as b:
        first, second = together(lambda: call(a), lambda: call(b))
    return first, second


def one_of_each(answers: tuple[tuple[int, dict[str, Any]], ...]) -> dict[str, dict[str, Any]]:
    """Both sides answered 200 with two different statuses: the bodies by status."""
    assert [status for status, _ in answers] == [200, 200], answers
    by_status = {body["status"]: body for _, body in answers}
    assert len(by_status) == len(answers), f"both answered {answers[0][1]['status']!r}: {answers}"
    return by_status


@pytest.fixture
def pair(deployment: Deployment) -> Deployment:
    deployment.ensure_running()
    return deployment


# -- the races -------------------------------------------------------------------------------------------
# The first test runs first on each deployment's fresh database (pytest keeps file order
# within one parametrisation of a module-scoped fixture).


def test_both_replicas_starting_together_on_a_fresh_database_answer_their_first_writes(pair: Deployment) -> None:
    assert pair.start_problems == []
    stores = {"A": fresh("first-a"), "B": fresh("first-b")}

    def first_writes(api: Api) -> tuple[tuple[int, Any], tuple[int, Any]]:
        uid = stores[api.replica.name]
        return api.create_store(uid), api.add("default", f"The first write of {uid}.")

    answers = both(pair, first_writes)
    logs = f"\nA:\n{pair.a.log()}\nB:\n{pair.b.log()}"
    for created, added in answers:
        assert created[0] == 200, f"{created}{logs}"
        assert created[1]["status"] == "created", f"{created}{logs}"
        assert added[0] == 200, f"{added}{logs}"
        assert added[1]["status"] == "stored", f"{added}{logs}"
    for replica in pair.replicas:  # a relative lock path (file:// once did) would land there
        assert list(replica.cwd.iterdir()) == [], f"{replica.name} wrote into its working directory"
    with pair.a.client() as api:
        assert set(stores.values()) <= set(api.stores())
        assert {m["content"] for m in api.walk("default")} >= {f"The first write of {uid}." for uid in stores.values()}


def test_distinct_names_registered_at_both_never_exceed_the_limit(pair: Deployment) -> None:
    for _ in range(4):  # the issue saw the limit exceeded in 4 of 4 rounds without coordination
        user_id = pair.store("limit")

        def register_six(api: Api, user_id: str = user_id) -> list[tuple[str, int, dict[str, Any]]]:
            names = [f"{api.replica.name}-person-{i}" for i in range(LIMIT + 1)]
            return [(name, *api.register(user_id, name)) for name in names]

        a, b = both(pair, register_six)
        answers = a + b
        registered = [name for name, status, body in answers if status == 200 and body["status"] == "registered"]
        refused = [body for _, status, body in answers if status != 200]
        assert len(registered) == LIMIT, answers
        assert all(body["status"] == 400 and body["error"]["speaker_limit"] == LIMIT for body in refused), refused
        with pair.b.client() as api:
            assert sorted(api.speakers(user_id)) == sorted(registered)


def test_the_same_name_registered_at_both_is_registered_once(pair: Deployment) -> None:
    user_id = pair.store("same-name")
    names = [f"Person {i}" for i in range(ROUNDS)]
    for name in names:
        answers = one_of_each(both(pair, partial(Api.register, user_id=user_id, speaker=name)))
        assert set(answers) == {"exists", "registered"}, answers
    with pair.a.client() as api:
        assert sorted(api.speakers(user_id)) == sorted(names)


def test_the_same_new_store_created_at_both_is_created_once(pair: Deployment) -> None:
    made = [fresh("same-store") for _ in range(ROUNDS)]
    for user_id in made:
        answers = one_of_each(both(pair, partial(Api.create_store, user_id=user_id)))
        assert set(answers) == {"created", "exists"}, answers
    with pair.b.client() as api:
        listed = Counter(api.stores())
    assert all(listed[user_id] == 1 for user_id in made), listed


def test_the_same_sentence_added_at_both_is_stored_once(pair: Deployment) -> None:
    user_id = pair.store("same-sentence")
    sentences = [f"The boiler in flat {i} was serviced on a Tuesday." for i in range(ROUNDS)]
    for sentence in sentences:
        answers = one_of_each(both(pair, partial(Api.add, user_id=user_id, content=sentence)))
        assert set(answers) == {"stored", "duplicate"}, answers
        assert answers["duplicate"]["duplicate_of"] == answers["stored"]["id"]
    with pair.a.client() as api:
        assert sorted(m["content"] for m in api.walk(user_id)) == sorted(sentences)


def test_the_same_idempotency_key_at_both_is_one_memory_and_one_answer(pair: Deployment) -> None:
    user_id = pair.store("same-key")
    sentences = [f"Invoice {i} was paid by card on the {i + 2}nd." for i in range(ROUNDS)]
    for sentence in sentences:
        key = fresh("key")
        answers = both(pair, partial(Api.add, user_id=user_id, content=sentence, key=key))
        assert [status for status, _ in answers] == [200, 200], answers
        bodies = [body for _, body in answers]
        assert sorted(bool(body.get("replayed")) for body in bodies) == [False, True], bodies
        first, again = ({k: v for k, v in body.items() if k != "replayed"} for body in bodies)
        assert first == again
        assert first["status"] == "stored"
    with pair.b.client() as api:
        assert sorted(m["content"] for m in api.walk(user_id)) == sorted(sentences)


def test_a_supersede_from_both_leaves_one_current_successor(pair: Deployment) -> None:
    user_id = pair.store("supersede")
    for i in range(ROUNDS):
        with pair.a.client() as api:
            old = api.ok("POST", "/store", {"user_id": user_id, "content": f"The meeting {i} is on Monday."})["id"]

        def rewrite(api: Api, old: str = old, i: int = i) -> tuple[int, dict[str, Any]]:
            return api.supersede(user_id, old, f"The meeting {i} moved to {api.replica.name}day.")

        answers = both(pair, rewrite)
        won = [body for status, body in answers if status == 200]
        lost = [body for status, body in answers if status != 200]
        assert len(won) == 1, answers
        assert won[0]["status"] == "stored", answers
        assert won[0]["superseded"] == old, answers
        assert lost[0]["status"] == 409, answers
        assert lost[0]["error"]["superseded_by"] == won[0]["id"], answers
        with pair.b.client() as api:
            memories = {m["id"]: m for m in api.walk(user_id) if f"meeting {i} " in m["content"]}
        assert set(memories) == {old, won[0]["id"]}, memories
        assert memories[old]["is_superseded"]
        assert memories[old]["superseded_by"] == won[0]["id"]
        assert not memories[won[0]["id"]]["is_superseded"]


def test_speaker_remove_racing_an_add_leaves_no_tag_of_an_unregistered_name(pair: Deployment) -> None:
    user_id = pair.store("remove")
    names = [f"Visitor {i}" for i in range(ROUNDS)]
    for name in names:
        with pair.a.client() as api:
            assert api.register(user_id, name)[1]["status"] == "registered"
        with pair.a.client() as a, pair.b.client() as b:
            removed, added = together(
                partial(a.remove, user_id, name),
                partial(b.add, user_id, f"{name} left the keys at reception.", speaker=name),
            )
        assert removed[0] == 200, removed
        assert removed[1]["status"] == "removed", removed
        assert added[0] == 200 or (added[0] == 400 and added[1]["error"]["speaker"] == name), added
    with pair.b.client() as api:
        assert api.speakers(user_id) == []
        memories = api.walk(user_id)
    assert [m for m in memories if "speaker" in m] == []


def test_writes_from_both_replicas_are_all_kept_once_with_unique_seq(pair: Deployment) -> None:
    user_id = pair.store("many")
    count = WRITES[pair.name]

    def write_all(api: Api) -> list[dict[str, Any]]:
        tag = api.replica.name
        return [api.ok("POST", "/store", {"user_id": user_id, "content": f"{tag} wrote entry {i}: {i * 7} crates."},
                       key=f"{tag}-{user_id}-{i}") for i in range(count)]  # fmt: skip

    started = time.monotonic()
    a, b = both(pair, write_all)
    took = time.monotonic() - started
    print(f"\n{pair.name}: 2x{count} writes to one store in {took:.1f} s")
    acknowledged = [answer["id"] for answer in a + b]
    assert all(answer["status"] == "stored" for answer in a + b)
    assert len(set(acknowledged)) == 2 * count
    with pair.a.client() as api:
        walked = [m["id"] for m in api.walk(user_id)]
    assert len(walked) == len(set(walked)), "a memory listed twice"
    assert set(walked) == set(acknowledged), "a memory lost or one never acknowledged"
    seqs = pair.seqs(acknowledged)
    assert all(len(held) == 1 for held in seqs.values())
    assert len(seqs) == 2 * count
    numbers = [next(iter(held)) for held in seqs.values()]
    assert len(set(numbers)) == len(numbers), f"{len(numbers) - len(set(numbers))} seq given twice"


def test_a_replica_killed_mid_write_leaves_the_other_writing_after_the_lease_ttl(pair: Deployment) -> None:
    user_id = pair.store("killed")
    acknowledged: list[tuple[str, str]] = []  # (content, id) of the writes A answered
    sent: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def keep_writing(lane: int) -> None:
        with pair.a.client() as api:
            for i in itertools.count():
                content = f"A lane {lane} wrote line {i} before the crash."
                sent.append(content)
                try:
                    status, body = api.add(user_id, content, key=f"kill-{user_id}-{lane}-{i}")
                except httpx.TransportError:  # the process died under this request
                    return
                if status != 200:
                    failures.append(f"{status} {body}")
                    return
                acknowledged.append((content, body["id"]))
                if stop.is_set():
                    return

    lanes = [threading.Thread(target=keep_writing, args=(lane,), daemon=True) for lane in (0, 1)]
    for lane in lanes:
        lane.start()
    deadline = time.monotonic() + CALL_TIMEOUT
    while len(acknowledged) < 3:  # then the other lane's write is in flight: A holds the lease
        assert time.monotonic() < deadline, pair.a.log()
        assert all(lane.is_alive() for lane in lanes), pair.a.log()
        time.sleep(0.01)
    stop.set()
    pair.a.kill()
    for lane in lanes:
        lane.join(timeout=30)
    assert failures == [], failures
    assert not any(lane.is_alive() for lane in lanes), failures
    kept = list(acknowledged)

    started = time.monotonic()
    with pair.b.client() as api:
        after = [api.ok("POST", "/store", {"user_id": user_id, "content": f"B wrote line {i} after the crash."},
                        key=f"after-{user_id}-{i}")["id"] for i in range(3)]  # fmt: skip
        waited = time.monotonic() - started
        memories = api.walk(user_id)
    print(f"\n{pair.name}: B's three writes after the kill took {waited:.1f} s (lease TTL {LEASE_TTL_MS} ms)")
    assert waited < LEASE_TTL_MS / 1000 + RETRY_FOR
    ids = [m["id"] for m in memories]
    assert {mid for _, mid in kept} | set(after) <= set(ids), "an acknowledged write was lost"
    contents = Counter(m["content"] for m in memories)
    assert all(contents[content] <= 1 for content in sent), "a write stored twice"

"""Several processes on one database directory at once: a local directory keeps every
guarantee with several processes on it, the speaker limit included (it holds under
concurrent registrations from several processes).

Each child is a real Python process (``sys.executable``) running a small driver written
to ``tmp_path``: it opens the database and the model, says ``ready``, and waits on its
stdin for ``go`` so all children start together. Every child prints one JSON line per
answer it got, so the parent knows exactly which writes were acknowledged.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import REPO, all_memories

from wontopos_mcp.engine.service import MemoryService

pytestmark = pytest.mark.process

LIMIT = 5
SHARED_NAMES = ("Shared-1", "Shared-2", "Shared-3")
SHARED_SENTENCE = "The office closes at 6 pm on Fridays."
START_TIMEOUT = 180  # processes importing LanceDB and loading the model on 2 cores
RUN_TIMEOUT = 180

DRIVER = r"""
import json
import sys

from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.errors import WontoposError
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.storage.adapter import Store


def say(**event):
    print(json.dumps(event), flush=True)


def attempt(event, call, **fields):
    try:
        answer = call()
    except WontoposError as error:
        say(event=event, status=error.status, details=error.details, **fields)
        return None
    say(event=event, status=answer.get("status"), answer=answer, **fields)
    return answer


def race(svc, tag, shared_names, shared_sentence):
    usable = [None, "me"]
    for name in [f"{tag}-person-{i}" for i in range(8)] + shared_names:
        answer = attempt("register", lambda: svc.speaker_register(name), speaker=name)
        if answer is not None:
            usable.append(name)
    for store in ("proj-a", "proj.a"):
        attempt("store", lambda: svc.store_create(store), user_id=store)
    for i in range(12):
        speaker = usable[i % len(usable)]
        text = f"{tag} wrote memory number {i}: {i * 11} items for {speaker or 'nobody'}."
        attempt("add", lambda: svc.memory_add(text, speaker=speaker), speaker=speaker)
    attempt("add", lambda: svc.memory_add(shared_sentence, speaker="me"), speaker="me", shared=True)


def loop(svc, tag):
    for i in range(100000):
        attempt("add", lambda: svc.memory_add(f"{tag} loop write {i}: {i * 7} units."), speaker=None)


def main():
    db, cache, tag, mode, limit = sys.argv[1:6]
    shared_names = json.loads(sys.argv[6])
    shared_sentence = sys.argv[7]
    embedder = load_embedder("multilingual-e5-small-q4", cache, threads=1)  # converted already: loads fast
    svc = MemoryService(Store(db), ModelLoader.of(embedder), speaker_limit=int(limit))
    svc.stores_list()
    say(event="ready")
    if sys.stdin.readline().strip() != "go":
        return
    if mode == "race":
        race(svc, tag, shared_names, shared_sentence)
    else:
        loop(svc, tag)
    say(event="done")


main()
"""


class Child:
    """One driver process; its JSON lines arrive on a queue, so every wait is bounded."""

    def __init__(self, driver: Path, db: Path, cache: str, tag: str, mode: str, logs: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("LANCEDB_LOG", "error")
        self.tag = tag
        self.stderr = open(logs / f"{tag}.stderr", "w+", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(driver),
                str(db),
                cache,
                tag,
                mode,
                str(LIMIT),
                json.dumps(SHARED_NAMES),
                SHARED_SENTENCE,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
        )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):  # a line cut short by kill -9 was never acknowledged
                self.events.put(json.loads(line))
        self.events.put(None)

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.tag}: no answer within {timeout} s; stderr:\n{self.log()}") from None
        if event is not None:
            self.received.append(event)
        return event

    def wait_ready(self) -> None:
        event = self.next_event(START_TIMEOUT)
        assert event == {"event": "ready"}, f"{self.tag} did not start: {event}; stderr:\n{self.log()}"

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def drain(self, timeout: float = RUN_TIMEOUT) -> list[dict[str, Any]]:
        while self.next_event(timeout) is not None:
            pass
        self.proc.wait(timeout=timeout)
        return self.received

    def log(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.reader.join(timeout=30)  # it has read to the end of the dead child's stdout
        # Every pipe closed here, not by the garbage collector (a ResourceWarning, an error).
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        self.proc.stdout.close()
        self.stderr.close()


@pytest.fixture
def spawn(tmp_path: Path, model_cache: Any, embedder: Any) -> Any:
    """``spawn(tag, mode)`` starts a driver; ``embedder`` first, so the model is converted."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    logs = tmp_path / "logs"
    logs.mkdir()
    children: list[Child] = []

    def start(tag: str, mode: str) -> Child:
        child = Child(driver, tmp_path / "db", str(model_cache), tag, mode, logs)
        children.append(child)
        return child

    yield start
    for child in children:
        child.close()


def stored_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["answer"]["id"] for e in events if e["event"] == "add" and e["status"] == "stored"]


def test_processes_racing_never_pass_the_speaker_limit_and_lose_no_acknowledged_write(
    spawn: Any, make_service: Any, tmp_path: Path
) -> None:
    """Two processes (the machines have 2 cores), each trying 8 names of its own and 3
    shared ones against a limit of 5, then writing, all at the same moment."""
    children = [spawn(tag, "race") for tag in ("p1", "p2")]
    for child in children:
        child.wait_ready()
    for child in children:  # each is waiting on its stdin: release them together
        child.go()
    events = [e for child in children for e in child.drain()]
    assert sum(e == {"event": "done"} for e in events) == len(children), [c.log() for c in children]

    svc: MemoryService = make_service(speaker_limit=LIMIT, db=tmp_path / "db")
    listed = {s["speaker"]: s for s in svc.speakers_list()["speakers"]}

    # The limit holds: more attempts than places, every place taken, never one more.
    registrations = [e for e in events if e["event"] == "register"]
    assert len({e["speaker"] for e in registrations}) > LIMIT
    assert len(listed) == LIMIT
    registered = Counter(e["speaker"] for e in registrations if e["status"] == "registered")
    assert set(registered) == set(listed)
    assert max(registered.values()) == 1
    for e in registrations:
        if e["status"] == "exists":
            assert e["speaker"] in listed
        elif e["status"] != "registered":
            assert e["status"] == 400
            assert e["details"]["speaker_limit"] == LIMIT
            assert e["speaker"] not in listed

    # Two ids that differ only in '.': exactly one store exists.
    stores = [s["user_id"] for s in svc.stores_list()["stores"]]
    assert len({"proj-a", "proj.a"} & set(stores)) == 1
    creations = [e for e in events if e["event"] == "store"]
    assert [e["status"] for e in creations].count("created") == 1
    assert {e["status"] for e in creations} <= {"created", "exists", 409}

    # Every acknowledged write is there exactly once; nothing else is.
    acknowledged = stored_ids(events)
    assert len(acknowledged) == len(set(acknowledged))
    memories = all_memories(svc)
    found = [m["id"] for m in memories]
    assert len(found) == len(set(found)), "a memory is listed twice"
    assert sorted(found) == sorted(acknowledged)
    for e in events:
        if e["event"] == "add" and e["status"] not in ("stored", "duplicate"):
            raise AssertionError(f"a write was refused: {e}")

    # The same sentence by "me" from each process: stored once, the others are duplicates of it.
    shared = [e for e in events if e.get("shared")]
    assert [e["status"] for e in shared].count("stored") == 1
    original = next(e["answer"]["id"] for e in shared if e["status"] == "stored")
    assert all(e["answer"]["duplicate_of"] == original for e in shared if e["status"] == "duplicate")
    assert sum(m["content"] == SHARED_SENTENCE for m in memories) == 1

    # Each memory carries the speaker its writer asked for, and the counts agree.
    by_id = {m["id"]: m for m in memories}
    for e in events:
        if e["event"] == "add" and e["status"] == "stored":
            assert by_id[e["answer"]["id"]].get("speaker") == e["speaker"]
    for name, entry in listed.items():
        assert entry["memories"] == sum(m.get("speaker") == name for m in memories)


def test_a_writer_killed_mid_loop_loses_no_acknowledged_write_and_the_store_stays_usable(
    spawn: Any, make_service: Any, tmp_path: Path
) -> None:
    writer = spawn("crash", "loop")
    writer.wait_ready()
    writer.go()
    acknowledged: list[str] = []
    while len(acknowledged) < 10:
        event = writer.next_event(RUN_TIMEOUT)
        assert event is not None, f"the writer stopped early; stderr:\n{writer.log()}"
        if event["event"] == "add":
            assert event["status"] == "stored", event
            acknowledged.append(event["answer"]["id"])
    writer.proc.kill()  # SIGKILL: no cleanup, no lock release but the kernel's
    writer.proc.wait(timeout=30)
    acknowledged = stored_ids(writer.drain())  # every line it printed before it died

    svc: MemoryService = make_service(speaker_limit=LIMIT, db=tmp_path / "db")
    memories = all_memories(svc)
    found = [m["id"] for m in memories]
    assert len(found) == len(set(found)), "a memory is listed twice"
    assert set(acknowledged) <= set(found), "an acknowledged write was lost"
    # At most the one write in flight at the kill may exist without its acknowledgement.
    loop_writes = [m for m in memories if m["content"].startswith("crash loop write")]
    assert len(acknowledged) <= len(loop_writes) <= len(acknowledged) + 1
    for memory_id in acknowledged[:3] + acknowledged[-3:]:
        assert svc.memory_get(memory_id)["memory"]["id"] == memory_id

    # Still usable: search, a new write (it takes the write lock the dead writer held), paging.
    assert svc.memory_search("loop write units", limit=5)["memories"]
    fresh = svc.memory_add("Written after the crash.", speaker="me")
    assert fresh["status"] == "stored"
    assert svc.memory_get(fresh["id"])["memory"]["content"] == "Written after the crash."
    assert svc.by_speaker("me", limit=5)["memories"][0]["id"] == fresh["id"]
    assert len(all_memories(svc)) == len(memories) + 1

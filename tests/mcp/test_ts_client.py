"""The official TypeScript SDK (``@modelcontextprotocol/sdk``, the version
``tests/ts_client/package.json`` pins) as a client of ``wontopos-mcp`` over stdio: it lists
and gets the prompts, lists the resources and their templates, reads each, and gets the
resource-not-found error for a stranger (``tests/ts_client/client.mjs``).

The node project is installed with ``npm ci`` from its lock file into a cache directory
outside the repository, once per lock file (``XDG_CACHE_HOME``, else ``~/.cache``), so a
clean clone needs only node, npm and the npm registry. Without node the test is skipped,
except under ``CI``, where it fails: CI must run it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import REPO, server_env

from wontopos_mcp.engine.service import MemoryService

pytestmark = [pytest.mark.process, pytest.mark.slow]

PROJECT = REPO / "tests" / "ts_client"
FILES = ("package.json", "package-lock.json", "client.mjs")


def _node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed for the TypeScript SDK test (CI must provide them)")
        pytest.skip("node or npm is not installed")
    return node


def _installed() -> Path:
    """The node project, installed by ``npm ci`` once per lock file into the cache."""
    lock = (PROJECT / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    place = cache / "wontopos-mcp-tests" / f"ts_client-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (place / "node_modules" / ".package-lock.json").exists():
        building = place.with_name(f"{place.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for name in FILES[:2]:
            shutil.copy(PROJECT / name, building / name)
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=building, capture_output=True, text=True, timeout=600
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        shutil.rmtree(place, ignore_errors=True)
        building.rename(place)
    shutil.copy(PROJECT / "client.mjs", place / "client.mjs")  # the script as the repository has it now
    return place


@pytest.fixture
def seen(make_service: Callable[..., MemoryService], tmp_path: Path, model_cache: Path) -> dict[str, Any]:
    """What the TypeScript client received from ``wontopos-mcp`` on a store with Bob in it."""
    node = _node()
    place = _installed()
    service = make_service(db=tmp_path / "db")
    service.speaker_register("Bob")
    service.memory_add("The Orion release moved to Tuesday.", speaker="Bob")
    server = [sys.executable, "-m", "wontopos_mcp", "--db", str(tmp_path / "db"), "--engine", "inprocess"]
    done = subprocess.run(
        [node, str(place / "client.mjs"), *server], capture_output=True, text=True, timeout=120,
        env=server_env(model_cache), cwd=place,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_the_typescript_sdk_lists_and_reads_the_prompts_and_resources(seen: dict[str, Any]) -> None:
    assert seen["server"]["name"] == "wontopos-mcp"
    assert {p["name"] for p in seen["prompts"]} == {"recall_first", "about_person", "remember_conversation"}
    about = seen["gotPrompts"]["about_person"]["messages"][0]["content"]["text"]
    assert "Bob" in about
    assert "The Orion release moved to Tuesday." in about
    assert "register" in seen["gotPrompts"]["recall_first"]["messages"][0]["content"]["text"]
    assert [r["uri"] for r in seen["resources"]] == ["memory://stores"]
    assert {t["uriTemplate"] for t in seen["templates"]} == {
        "memory://{user_id}/speakers", "memory://{user_id}/speakers/{speaker}", "memory://{user_id}/stats",
    }  # fmt: skip
    reads = {uri: json.loads(answer["contents"][0]["text"]) for uri, answer in seen["reads"].items()}
    assert [s["speaker"] for s in reads["memory://default/speakers"]["speakers"]] == ["Bob"]
    assert [m["content"] for m in reads["memory://default/speakers/Bob"]["memories"]] == [
        "The Orion release moved to Tuesday."
    ]
    assert reads["memory://default/stats"]["total_memories"] == 1
    assert "default" in {s["user_id"] for s in reads["memory://stores"]["stores"]}
    assert {answer["contents"][0]["mimeType"] for answer in seen["reads"].values()} == {"application/json"}
    assert seen["unknown"]["code"] == -32602
    assert seen["unknown"]["data"]["status"] == 404

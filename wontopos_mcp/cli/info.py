"""``wontopos-mcp info``: where the data is and what the server would run with.

A person who installed the server asks "where is my memory, how big is it, which stores
are there, and is the model ready?". This answers without loading the model: the
database path as the settings resolve it (``--db`` > ``WONTOPOS_DB`` > the per-user
data directory), its size on disk (local directories only: object storage is not
walked), its stores, the embedding model with its cache folder and whether the default
model is converted there yet (the first run that needs it converts it, in seconds), and
whether the database was built with that model.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypedDict

from wontopos_mcp.rules.locations import is_remote

if TYPE_CHECKING:
    from wontopos_mcp.config import Settings

    from .client import Service


class Info(TypedDict):
    """What ``info`` prints (``--json``: as is)."""

    db: str
    size_bytes: int | None  # None: object storage, not walked
    stores: list[str]
    model: str
    model_cache: str
    model_converted: bool | None  # None: a fastembed model, downloaded on first use
    model_mismatch: str | None  # why the database cannot be used with this model, if so


def info(service: Service, settings: Settings) -> Info:
    """The facts ``info`` prints, as JSON-ready data."""
    from wontopos_mcp.engine.bootstrap import model_converted
    from wontopos_mcp.errors import ModelMismatch

    stores = [s["user_id"] for s in service.stores_list()["stores"]]
    try:
        service.check_model(settings.embed_model)
        mismatch = None
    except ModelMismatch as exc:
        mismatch = str(exc)
    return {
        "db": settings.db,
        "size_bytes": None if is_remote(settings.db) else _size_on_disk(settings.db),
        "stores": stores,
        "model": settings.embed_model,
        "model_cache": settings.model_cache,
        "model_converted": model_converted(settings),
        "model_mismatch": mismatch,
    }


def info_text(answer: Info) -> str:
    size = answer["size_bytes"]
    converted = answer["model_converted"]
    cache = (
        "a fastembed model, downloaded into the cache on first use"
        if converted is None
        else ("converted, ready" if converted else "not converted yet: the first search or write converts it")
    )
    lines = [
        f"database      {answer['db']}",
        f"size on disk  {'not measured (object storage)' if size is None else _human(size)}",
        f"stores        {len(answer['stores'])}: {', '.join(answer['stores'])}",
        f"model         {answer['model']} ({cache})",
        f"model cache   {answer['model_cache']}",
    ]
    if answer["model_mismatch"] is not None:
        lines.append(f"warning       {answer['model_mismatch']}")
    return "\n".join(lines)


def _size_on_disk(path: str) -> int:
    """Bytes of every file under ``path`` (0 when it does not exist yet)."""
    total = 0
    for folder, _, files in os.walk(path.removeprefix("file://")):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # removed meanwhile (a compaction)
    return total


def _human(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")

"""Import rate: ``wontopos-mcp import`` of an export against ``add_many`` of the same lines
(target: import >= 0.8x add_many's rate).

The same N memories are written to a JSON Lines export (as ``export`` writes it: ids,
``created_at``), then, interleaved per run, stored once with one ``memory_add_batch``
call of every item (what ``Memory.add_many`` does) and imported once by the ``import``
command into a fresh store, each on its own database so neither pays for the other's
rows. Both rates are printed per wall-clock second and per CPU second of this process
(``time.process_time``: every thread, onnxruntime's included), the latter being steadier
on a shared machine, where other processes take the cores at random moments. Progress
lines of the import go to stderr as usual.

    python bench/import_rate.py [--n 400] [--runs 3] [--batch 250] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

from ingest import texts, timed

from wontopos_mcp.cli import commands
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import DEFAULT_MODEL, Settings, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.storage.adapter import Store


def export_lines(n: int, seed: int) -> list[str]:
    return [
        json.dumps({"id": str(uuid.uuid4()), "content": t, "created_at": f"2025-01-{1 + i % 28:02d}T10:00:00.000000Z"})
        for i, t in enumerate(texts(n, seed))
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=commands.IMPORT_BATCH)
    parser.add_argument("--model-cache", default=default_model_cache())
    args = parser.parse_args()
    models = ModelLoader.of(load_embedder(DEFAULT_MODEL, args.model_cache))
    work = Path(tempfile.mkdtemp(prefix="wontopos-import-rate-"))
    many: list[tuple[float, float]] = []
    imported: list[tuple[float, float]] = []
    for run in range(args.runs):
        lines = export_lines(args.n, seed=run)
        source = work / f"run{run}.jsonl"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")

        service = MemoryService(Store(str(work / f"many{run}")), models)
        items = [{k: v for k, v in json.loads(line).items() if k != "id"} for line in lines]
        answer, wall, cpu = timed(partial(service.memory_add_batch, items))
        stored = answer["count"]
        many.append((stored / wall, stored / cpu))
        service.close()

        service = MemoryService(Store(str(work / f"import{run}")), models)
        argv = ["import", str(source), "--user", "copy", "--json", "--batch", str(args.batch)]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code, wall, cpu = timed(
                partial(commands.run, vars(build_parser().parse_args(argv)), Settings(), service=service)
            )
        service.close()
        summary = json.loads(out.getvalue())
        assert code == 0, (code, summary, stored)
        assert summary["stored"] == stored, (code, summary, stored)
        imported.append((summary["stored"] / wall, summary["stored"] / cpu))
        print(f"run {run}: add_many {many[-1][0]:.1f}/s, import {imported[-1][0]:.1f}/s (wall)", file=sys.stderr)
    for i, unit in enumerate(("wall-clock", "CPU")):
        rate_many, rate_import = statistics.median(m[i] for m in many), statistics.median(m[i] for m in imported)
        print(f"per {unit} second, median of {args.runs} runs of {args.n} (import --batch {args.batch}):")
        print(f"  add_many {rate_many:.1f} memories/s, import {rate_import:.1f} lines/s, "
              f"ratio {rate_import / rate_many:.2f} (target >= 0.8)")  # fmt: skip


if __name__ == "__main__":
    main()

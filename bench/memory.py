"""Where an engine's resident memory goes, step by step, and an engine's RSS at 10k / 100k.

Three parts, each printed as a table (RSS = ``VmRSS`` of ``/proc/<pid>/status``, MiB;
Linux only):

``imports``  every heavy package imported alone, each in a fresh ``python -c`` after
             ``gc.collect()``: its own cost over a bare interpreter (they share numpy and
             the C runtime, so the lines do not add up to the product's line).
``steps``    the product's own path, in ONE fresh process, ``gc.collect()`` before each
             reading: bare Python -> the imports a served engine makes before its first
             request (then malloc's arenas capped, as the program does before any thread
             starts, where the code has ``cap_malloc_arenas``) ->
             ``load_embedder(DEFAULT_MODEL, cache)`` -> a ``MemoryService`` opened on the
             first size's store -> its first search (speaker filter) -> 20 more.
``engine``   the figure issue 53 targets: the RSS of a real shared engine (``wontopos-mcp
             engine serve``, spawned by a stdio relay exactly as an agent host starts one)
             after its first ``memory_search`` through the relay, on a 10,000- and a
             100,000-memory store; then after 20 more searches. The relay is measured too.

The stores are built once into ``--stores DIR`` (``DIR/10000``, ``DIR/100000``) and reused
by later runs; building goes through the product's own batch write path
(``Memory.add_many``, 1,000 items a call: embedding, duplicate checks, commits and index
upkeep as an import does them), ~90 memories/s on 2 busy cores, so 100k takes ~20 min once.
Layout: store ``u0`` holds 80 % of the memories (speaker ``Alice`` 40 % of them, ``me`` 30 %,
28 other people 20 %, untagged 10 %), ``u1``-``u4`` 5 % each; every text is different.

    PYTHONPATH=. python bench/memory.py --stores ~/wontopos-memory-stores [--sizes 10000,100000]
        [--parts imports,steps,engine] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "bench"))

from scale import OTHERS  # noqa: E402  (the same 28 other people as the scale benchmark)
from sessions import rss_mb  # noqa: E402  (the resident memory of a process, as the sessions benchmark reads it)

TARGETS_MB = {10_000: 450.0, 100_000: 600.0}  # issue 53
HEAVY = ["numpy", "onnxruntime", "tokenizers", "fastembed", "pyarrow", "lancedb", "mcp"]
FACTS = [
    "moved into a flat near the river", "pushed the release to the end of March", "hurt a knee running again",
    "adopted a greyhound from the shelter", "started a pottery class on Thursday evenings",
    "heard the landlord is raising the rent", "is allergic to peanuts and shellfish",
    "has a sister getting married in Lisbon", "needs new brakes on the car before the trip",
    "switched teams at work", "booked a cabin in the mountains", "is learning Spanish every morning",
    "found out about a cavity at the dentist", "has a daughter starting school in September",
    "quit coffee for green tea", "finished the kitchen renovation", "ran a half marathon",
    "moved the project deadline to Friday", "visited a grandmother in hospital", "is saving up for a new bike",
    "fährt jeden Tag mit dem Fahrrad zur Arbeit", "zieht im Sommer nach Hamburg", "来月から新しい会社で働きます",
    "週末は京都で紅葉を見ました", "다음 달에 부산으로 이사 가요", "요즘 요가를 배우고 있어요", "下个月开始学开车",
    "周末去成都吃了火锅", "купил старую дачу под Тверью", "летом хочет поехать в Рим",
]  # fmt: skip
WHEN = ["on Monday", "last week", "in {m}", "before the holidays", "this weekend", "on day {d}"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
QUERIES = [
    "what did they say about moving house?", "when is the project deadline?", "any allergies I should know about?",
    "how is the knee after running?", "what pet did they get?", "plans for the holidays?",
    "Was hat sie über den Umzug gesagt?", "新しい仕事はいつから？", "이사는 언제 가요?", "Что он купил под Тверью?",
]  # fmt: skip
SEARCHES = 20


# -- the stores --------------------------------------------------------------------------


def memories(n: int, seed: int = 53) -> list[tuple[str, dict[str, Any]]]:
    """(store, item) for ``n`` memories, every text different (a number makes it so)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        store = "u0" if rng.random() < 0.8 else f"u{rng.randint(1, 4)}"
        pick = rng.random()
        if store == "u0":
            speaker = "Alice" if pick < 0.4 else "me" if pick < 0.7 else None if pick < 0.8 else rng.choice(OTHERS)
        else:
            speaker = "me" if pick < 0.5 else None if pick < 0.7 else rng.choice(OTHERS)
        when = rng.choice(WHEN).format(m=rng.choice(MONTHS), d=rng.randint(1, 28))
        text = f"{speaker or 'Someone'} {rng.choice(FACTS)} {when} (note {i + 1})."
        item: dict[str, Any] = {"content": text}
        if speaker:
            item["speaker"] = speaker
        out.append((store, item))
    return out


def build(path: Path, n: int, model_cache: str) -> None:
    """A store of ``n`` memories through ``Memory.add_many``, once (``path/done`` marks it)."""
    if (path / "done").exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    from wontopos_mcp import Memory

    print(f"building {n:,} memories into {path} (once) ...", flush=True)
    began = time.perf_counter()
    with Memory(str(path), model_cache=model_cache) as memory:
        plan = memories(n)
        by_store: dict[str, list[dict[str, Any]]] = {}
        for store, item in plan:
            by_store.setdefault(store, []).append(item)
        for store, items in sorted(by_store.items()):
            memory.create_store(store)
            for speaker in sorted({str(i["speaker"]) for i in items if i.get("speaker", "me") != "me"}):
                memory.add_speaker(speaker, user_id=store)
            for start in range(0, len(items), 1000):
                answer = memory.add_many(items[start : start + 1000], user_id=store)
                stored = answer["count"]
                elapsed = time.perf_counter() - began
                print(
                    f"  {store}: {min(start + 1000, len(items)):>7,} items sent ({stored} stored this call), {elapsed:.0f} s",
                    flush=True,
                )
    (path / "done").write_text(f"{n} memories in {time.perf_counter() - began:.0f} s\n")


# -- imports and steps: fresh processes --------------------------------------------------

PROBE = textwrap.dedent(
    """
    import gc, json, sys
    def rss():
        gc.collect()
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    """
)

STEPS = textwrap.dedent(
    """
    import time
    out = [("Python, nothing imported", rss())]
    import wontopos_mcp.engine.service, wontopos_mcp.mcp.server, wontopos_mcp.mcp.transport
    out.append(("the engine's modules imported (no model, no database)", rss()))
    import wontopos_mcp.engine.bootstrap as bootstrap
    getattr(bootstrap, "cap_malloc_arenas", lambda: None)()  # as the program does (where it exists)
    from wontopos_mcp.model.embeddings import DEFAULT_MODEL, ModelLoader, load_embedder
    embedder = load_embedder(DEFAULT_MODEL, sys.argv[2])
    out.append(("load_embedder(DEFAULT_MODEL, cache)", rss()))
    from wontopos_mcp.config import Settings
    from wontopos_mcp.engine.service import MemoryService
    service = MemoryService.open(Settings.load({"db": sys.argv[1], "model_cache": sys.argv[2]}),
                                 models=ModelLoader.of(embedder))
    service.start()
    service.open_or_refuse()
    service.stats("u0")
    out.append(("MemoryService opened on the store (stats of u0)", rss()))
    service.memory_search("what did they say about moving house?", speaker="Alice", user_id="u0")
    out.append(("after the first search (speaker filter)", rss()))
    for q in json.loads(sys.argv[3]):
        service.memory_search(q, speaker="Alice", user_id="u0")
        service.memory_search(q, user_id="u0")
    out.append(("after 20 more searches (10 with the filter, 10 without)", rss()))
    print(json.dumps(out))
    """
)


def imports_table(python: str) -> None:
    base = _probe(python, "print(rss())")
    print("\n== imports, each alone in a fresh process (RSS after gc.collect()) ==")
    print(f"{'Python, nothing imported':<40} {base:7.0f} MB")
    for name in HEAVY:
        value = _probe(python, f"import {name}\nprint(rss())")
        print(f"{'import ' + name:<40} {value:7.0f} MB  (+{value - base:.0f})")
    value = _probe(python, "import wontopos_mcp.engine.service, wontopos_mcp.mcp.server\nprint(rss())")
    print(f"{'the engine modules (service, mcp server)':<40} {value:7.0f} MB  (+{value - base:.0f})")


def steps_table(python: str, store: Path, model_cache: str) -> None:
    argv = [python, "-c", PROBE + STEPS, str(store), model_cache, json.dumps(QUERIES)]
    out = subprocess.run(argv, capture_output=True, text=True, env=_env(), check=True, cwd=HERE)
    print(f"\n== the product's path, one fresh process, store {store.name} (RSS after gc.collect()) ==")
    previous = 0.0
    for label, value in json.loads(out.stdout.strip().splitlines()[-1]):
        print(f"{label:<58} {value:7.0f} MB  (+{value - previous:.0f})")
        previous = value


def _probe(python: str, body: str) -> float:
    out = subprocess.run([python, "-c", PROBE + body], capture_output=True, text=True, env=_env(), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(HERE)}


# -- the engine --------------------------------------------------------------------------


def engine_rss(python: str, store: Path, model_cache: str) -> dict[str, float]:
    """RSS of the shared engine a stdio relay spawns on ``store``: after its first search
    and after 20 more; the relay's too. The engine is stopped afterwards."""
    sys.path.insert(0, str(HERE))
    from wontopos_mcp.cli import engines

    runtime = Path(tempfile.mkdtemp(prefix="wos-mem-"))
    env = {**_env(), "XDG_RUNTIME_DIR": str(runtime)}
    argv = [python, "-m", "wontopos_mcp", "--db", str(store), "--model-cache", model_cache]
    relay = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert relay.stdin
    assert relay.stdout
    ids = iter(range(1, 10_000))

    def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        number = next(ids)
        assert relay.stdin
        assert relay.stdout
        request = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        relay.stdin.write((json.dumps(request) + "\n").encode())
        relay.stdin.flush()
        for line in relay.stdout:
            message = json.loads(line)
            if message.get("id") == number:
                if "error" in message or message.get("result", {}).get("isError"):
                    raise RuntimeError(f"{method} failed: {message}")
                return dict(message["result"])
        raise RuntimeError("the relay closed its stdout")

    def search(query: str, speaker: str | None) -> None:
        arguments = {"query": query, "user_id": "u0", **({"speaker": speaker} if speaker else {})}
        call("tools/call", {"name": "memory_search", "arguments": arguments})

    try:
        call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "bench-memory", "version": "0"}})  # fmt: skip
        relay.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        relay.stdin.flush()
        search("what did they say about moving house?", "Alice")
        running = engines.running([runtime / "wontopos-mcp"])
        if len(running) != 1:
            raise RuntimeError(f"expected one engine, found {running}")
        pid = int(running[0]["pid"])
        first = rss_mb(pid)
        for query in QUERIES:
            search(query, "Alice")
            search(query, None)
        return {"engine_first": first, "engine_steady": rss_mb(pid), "relay": rss_mb(relay.pid)}
    finally:
        relay.stdin.close()
        relay.wait(timeout=60)
        engines.stop([runtime / "wontopos-mcp"])
        shutil.rmtree(runtime, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", required=True, help="directory holding (or to hold) the built stores")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--parts", default="imports,steps,engine", help="comma list of imports, steps, engine")
    parser.add_argument("--model-cache", default=os.path.expanduser("~/.cache/wontopos-mcp/models"))
    parser.add_argument("--build-only", action="store_true", help="build the missing stores and stop")
    args = parser.parse_args()
    python = sys.executable
    sizes = [int(s) for s in args.sizes.split(",") if s]
    parts = set(args.parts.split(","))
    root = Path(args.stores).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    for n in sizes:
        build(root / str(n), n, args.model_cache)
    if args.build_only:
        return
    if "imports" in parts:
        imports_table(python)
    if "steps" in parts:
        steps_table(python, root / str(sizes[0]), args.model_cache)
    if "engine" in parts:
        print("\n== a shared engine spawned by a stdio relay (RSS, MB) ==")
        print(f"{'memories':>9} {'after 1st search':>17} {'after 21':>9} {'relay':>6} {'target':>7} {'ratio':>6}")
        for n in sizes:
            figures = engine_rss(python, root / str(n), args.model_cache)
            target = TARGETS_MB.get(n)
            ratio = f"{figures['engine_first'] / target:6.2f}" if target else "     -"
            print(
                f"{n:>9,} {figures['engine_first']:>17.0f} {figures['engine_steady']:>9.0f} "
                f"{figures['relay']:>6.0f} {target or 0:>7.0f} {ratio}"
            )


if __name__ == "__main__":
    main()

"""Conversation import (issue 52): rate, memory, re-import, dry run and speakers, on
generated chat exports: messages of 20-200 characters in nine languages and scripts from
eight speakers, each made unique by a counter (`` #123``), written streaming as a WhatsApp
Android ``.txt`` and a Telegram Desktop ``result.json``. The targets:

- ``rate``: the import (``MemoryService.import_conversations`` with ``--register``, as the
  CLI calls it) against ``Memory.add_many`` of the same items (content, speaker,
  conversation, event date) in one call, each into a fresh database, interleaved (which
  goes first alternates per run); messages/s by wall clock and CPU time, medians of
  ``--runs`` runs of ``min(--messages, 2000)`` per format. Target: import >= 0.9x add_many.
- ``rss``: a child process opens ``Memory(db=...)``, loads the model and embeds one batch
  (the engine's own RSS), then imports a ``--messages`` export (default 200,000); its peak
  RSS (VmHWM, reset before the import) minus the engine's. Target: <= 200 MB.
- ``reimport``: the same export imported again in that child: stores 0, in <= 10 % of the
  first import's time.
- ``dryrun``: ``dry_run`` of a ``--messages / 2`` export (default 100,000), the database
  already open: <= 10 s.
- after every import the stored memories are walked and each one's speaker compared with
  the generated truth (the counter names the message): messages under the wrong speaker
  must be 0.

Time: the model embeds these texts at ~25 messages per CPU second (the short English of
``ingest.py``: ~100), ~40-50/s by wall clock on a quiet 2-core machine, so the full run
stores 2 x 200,000 messages in about 80 min each: ~3 h in all (~6 h at a load average of
10). ``--messages 20000`` takes ~25 min; ``--messages 2000 --runs 1`` ~20 min under load.

    python bench/import_formats.py [--messages 200000] [--runs 3] [--only rate|rss|reimport|dryrun] [--model-cache DIR]
    python bench/import_formats.py --messages 2000        # a quick check of every part
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import statistics
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

from ingest import timed

from wontopos_mcp.config import DEFAULT_MODEL, Settings, default_model_cache
from wontopos_mcp.engine.conversation_import import IMPORT_BATCH
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.imports.sources import open_source
from wontopos_mcp.library import Memory
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.rules.dates import format_us, to_us
from wontopos_mcp.rules.import_options import conversation_label, import_options

SPEAKERS = ["Alice", "Jürgen", "Иван", "민준", "さくら", "李雷", "أحمد", "Zoë"]
# fmt: off
PHRASES = [
    ["See you at the station at eight?", "I booked the table for Friday.", "Can you bring the charger", "ok",
     "The flight moved to 6:40, sorry!", "Did the landlord answer about the rent?", "haha yes"],
    ["Wir treffen uns um acht.", "Hast du den Schlüssel mitgenommen?", "Bin gleich da", "Danke dir!",
     "Der Zug hat zwanzig Minuten Verspätung."],
    ["On se voit demain midi ?", "J'ai oublié mon parapluie chez toi.", "D'accord, à plus tard", "Merci !"],
    ["¿Quedamos el sábado por la tarde?", "Ya compré las entradas.", "Llego en diez minutos", "vale"],
    ["Я буду через десять минут.", "Купи хлеба по дороге, пожалуйста.", "Созвонимся вечером?", "Спасибо!"],
    ["내일 회의 몇 시야?", "방금 출발했어.", "저녁에 전화할게", "고마워!", "우산 챙겨 가, 비 온대."],
    ["明日の会議は何時？", "駅に着いたよ。", "今日は少し遅れます", "ありがとう！", "夕飯どうする？"],
    ["我们明天几点见？", "我已经到了。", "别忘了带护照", "谢谢！", "周末一起去爬山吧"],
    ["سأكون هناك بعد عشر دقائق.", "هل حجزت الطاولة؟", "شكرا جزيلا", "نلتقي غدا صباحا"],
    ["Τα λέμε αύριο το πρωί.", "Πήρες τα εισιτήρια;", "Ευχαριστώ πολύ!"],
]
# fmt: on
START = datetime(2021, 3, 1, 8, 0, tzinfo=timezone.utc)
WHATSAPP_NAME, TELEGRAM_ID = "WhatsApp Chat with Bench.txt", 4242
FORMATS = ("whatsapp", "telegram")
COUNTER = re.compile(r" #(\d+)$")


def message(seed: int, i: int) -> tuple[str, str]:
    """Message ``i`` of an export: (speaker, text) ending in `` #i``, 20-200 characters
    log-uniformly (median ~75: chats are mostly short); a pure function of (seed, i), so
    the truth is recomputed, never held."""
    rng = random.Random(seed * 10_000_019 + i)
    phrases, target, tag = rng.choice(PHRASES), round(20 * 10 ** rng.random()), f" #{i}"
    body = rng.choice(phrases)
    while len(body) + len(tag) < target:
        body += ("\n" if rng.random() < 0.05 else " ") + rng.choice(phrases)
    return rng.choice(SPEAKERS), body[: 200 - len(tag)].rstrip() + tag


def moment(fmt: str, i: int) -> datetime:
    when = START + timedelta(seconds=37 * i)
    return when.replace(second=0) if fmt == "whatsapp" else when  # Android exports write minutes


def write_export(fmt: str, folder: Path, n: int, seed: int) -> Path:
    """An export of ``n`` messages, written a message at a time."""
    if fmt == "whatsapp":
        path = folder / WHATSAPP_NAME
        with open(path, "w", encoding="utf-8") as out:
            out.write(f"{START:%d/%m/%Y, %H:%M} - Messages and calls are end-to-end encrypted. No one outside of "
                      "this chat, not even WhatsApp, can read or listen to them. Tap to learn more.\n")  # fmt: skip
            for i in range(n):
                speaker, text = message(seed, i)
                out.write(f"{moment(fmt, i):%d/%m/%Y, %H:%M} - {speaker}: {text}\n")
        return path
    path = folder / "result.json"
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'{{\n "name": "Bench",\n "type": "private_group",\n "id": {TELEGRAM_ID},\n "messages": [')
        for i in range(n):
            speaker, text = message(seed, i)
            when = moment(fmt, i)
            entry = {"id": i + 1, "type": "message", "date": when.strftime("%Y-%m-%dT%H:%M:%S"),
                     "date_unixtime": str(int(when.timestamp())), "from": speaker, "from_id": f"user{len(speaker)}",
                     "text": text, "text_entities": [{"type": "plain", "text": text}]}  # fmt: skip
            out.write(("," if i else "") + "\n  " + json.dumps(entry, ensure_ascii=False))
        out.write("\n ]\n}\n")
    return path


def items(fmt: str, n: int, seed: int) -> list[dict[str, str]]:
    """What the import stores for that export, as ``add_many`` items."""
    label = conversation_label(fmt, WHATSAPP_NAME if fmt == "whatsapp" else str(TELEGRAM_ID))
    return [{"content": text, "speaker": speaker, "conversation_id": label,
             "event_date": format_us(to_us(moment(fmt, i)))}
            for i, (speaker, text) in ((i, message(seed, i)) for i in range(n))]  # fmt: skip


def run_import(service: MemoryService, path: Path, fmt: str, user: str, *, dry_run: bool = False, progress=None):
    options = import_options(format=fmt, register=True, tz="UTC", dry_run=dry_run)
    return service.import_conversations(open_source(path), options, user, progress=progress)


def misplaced(service: MemoryService, user: str, n: int, seed: int) -> dict[str, int]:
    """Every stored memory against the truth: under the wrong speaker, text not generated, missing."""
    wrong = unknown = 0
    seen: set[int] = set()
    cursor = None
    while True:
        page = service.memory_list(limit=500, cursor=cursor, user_id=user)
        for memory in page["memories"]:
            found = COUNTER.search(memory["content"])
            i = int(found[1]) if found else -1
            speaker, text = message(seed, i) if 0 <= i < n else (None, None)
            if text != memory["content"]:
                unknown += 1
                continue
            seen.add(i)
            wrong += memory.get("speaker") != speaker
        cursor = page["next_cursor"]
        if cursor is None:
            return {"wrong": wrong, "unknown": unknown, "missing": n - len(seen)}


def status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":")) / 1024


def import_child(fmt: str, path: str, db: str, n: int, seed: int, cache: str, again: bool, conn) -> None:
    """In a fresh process: the engine's RSS, then the import's peak, then the re-import."""
    memory = Memory(db=db, model_cache=cache)
    service = memory._service
    embedder = service.models.get(600)
    embedder.embed_passages([message(seed + 1, i)[1] for i in range(IMPORT_BATCH)])  # the engine's arena, warm
    result = {"engine_rss": status_mb("VmRSS"), "engine_hwm": status_mb("VmHWM")}
    sampled = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            sampled[0] = max(sampled[0], status_mb("VmRSS"))

    def progress(count: int, total: int, counts) -> None:
        if time.monotonic() - last[0] > 60:
            last[0] = time.monotonic()
            print(f"  {fmt}: {count} of {total} messages, {counts['stored']} stored", flush=True)

    last = [time.monotonic()]
    for step in ("first", "again") if again else ("first",):
        try:  # "5" resets VmHWM to the current RSS
            Path("/proc/self/clear_refs").write_text("5")
            reset = True
        except OSError:
            reset = False
        sampled[0] = status_mb("VmRSS")
        threading.Thread(target=sample, daemon=True).start()
        summary, wall, cpu = timed(partial(run_import, service, Path(path), fmt, "bench", progress=progress))
        done.set()
        result[step] = {"wall": wall, "cpu": cpu, "stored": summary["stored"], "messages": summary["messages"],
                        "already": summary["already_imported"],
                        "peak": status_mb("VmHWM") if reset else sampled[0]}  # fmt: skip
        done.clear()
    result["check"] = misplaced(service, "bench", n, seed)
    memory.close()
    conn.send(result)


def in_child(*args) -> dict:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=import_child, args=(*args, child))
    process.start()
    result = parent.recv()
    process.join()
    return result


def add_many(memory: Memory, batch: list[dict[str, str]]) -> None:
    """What a caller of the library does: the store, its speakers, then one ``add_many``."""
    memory.create_store("rate")
    for speaker in SPEAKERS:
        memory.add_speaker(speaker, "rate")
    memory.add_many(batch, "rate")


def rate(embedder, cache: str, work: Path, n: int, runs: int, rows: list, checks: list) -> None:
    models = ModelLoader.of(embedder)
    for fmt in FORMATS:
        rates: dict[str, list[tuple[float, float]]] = {"import": [], "add_many": []}
        for run in range(runs):
            folder = Path(tempfile.mkdtemp(prefix=f"{fmt}{run}-", dir=work))
            path = write_export(fmt, folder, n, seed=run)
            steps = ["add_many", "import"] if run % 2 == 0 else ["import", "add_many"]
            for step in steps:
                settings = Settings.load({"db": str(folder / step), "model_cache": cache})
                memory = Memory(service=MemoryService.open(settings, models=models))
                service = memory._service
                if step == "import":
                    summary, wall, cpu = timed(partial(run_import, service, path, fmt, "rate"))
                    stored = summary["stored"]
                    checks.append(misplaced(service, "rate", n, run))
                else:
                    batch = items(fmt, n, run)
                    _, wall, cpu = timed(partial(add_many, memory, batch))
                    stored = memory.stats("rate")["total_memories"]
                memory.close()
                if stored != n:
                    raise SystemExit(f"{fmt} run {run} {step}: {stored} of {n} stored")
                rates[step].append((n / wall, n / cpu))
            many, imp = rates["add_many"][-1][0], rates["import"][-1][0]
            print(f"{fmt} run {run}: add_many {many:.0f}/s, import {imp:.0f}/s (wall)", flush=True)
        ratio = [statistics.median(i[k] / a[k] for i, a in zip(rates["import"], rates["add_many"])) for k in (0, 1)]
        imp, many = (statistics.median(r[0] for r in rates[s]) for s in ("import", "add_many"))
        measured = f"{ratio[0]:.2f} | {ratio[1]:.2f} ({imp:.0f} vs {many:.0f} msg/s, {runs}x{n})"
        rows.append((f"rate {fmt}: import / add_many, wall | CPU", measured, ">= 0.9", min(ratio) >= 0.9))


def memory_and_again(work: Path, n: int, cache: str, again: bool, rows: list, checks: list) -> None:
    for fmt in FORMATS:
        folder = Path(tempfile.mkdtemp(prefix=f"big-{fmt}-", dir=work))
        started = time.perf_counter()
        path = write_export(fmt, folder, n, seed=100)
        size = path.stat().st_size / 1e6
        print(f"{fmt}: {n} messages written in {time.perf_counter() - started:.1f} s ({size:.1f} MB)", flush=True)
        result = in_child(fmt, str(path), str(folder / "db"), n, 100, cache, again)
        first = result["first"]
        checks.append(result["check"])
        extra = first["peak"] - result["engine_rss"]
        print(f"{fmt}: engine RSS {result['engine_rss']:.0f} MB (VmHWM {result['engine_hwm']:.0f}); import of {n}: "
              f"{first['stored']} stored in {first['wall']:.0f} s ({first['cpu']:.0f} s CPU), peak {first['peak']:.0f} MB", flush=True)  # fmt: skip
        measured = f"{extra:+.0f} MB ({first['peak']:.0f} vs {result['engine_rss']:.0f})"
        rows.append((f"rss {fmt}: import peak - engine ({n})", measured, "<= 200 MB", extra <= 200))
        if again:
            second = result["again"]
            ratio = [second[k] / first[k] for k in ("wall", "cpu")]
            print(f"{fmt}: again: {second['stored']} stored, {second['already']} already imported, "
                  f"{second['wall']:.1f} s ({second['cpu']:.1f} s CPU), peak {second['peak']:.0f} MB", flush=True)  # fmt: skip
            measured = f"{ratio[0]:.3f} | {ratio[1]:.3f} ({second['wall']:.1f} vs {first['wall']:.0f} s), stored {second['stored']}"
            met = ratio[0] <= 0.1 and second["stored"] == 0
            rows.append((f"reimport {fmt}: again / first, wall | CPU", measured, "<= 0.10, 0", met))


def dry_run(embedder, cache: str, work: Path, n: int, rows: list) -> None:
    settings = Settings.load({"db": str(work / "dry-db"), "model_cache": cache})
    service = MemoryService.open(settings, models=ModelLoader.of(embedder))
    service.stores_list()  # the database open (LanceDB's import, ~1-2 s) is not the dry run's
    for fmt in FORMATS:
        folder = Path(tempfile.mkdtemp(prefix=f"dry-{fmt}-", dir=work))
        path = write_export(fmt, folder, n, seed=200)
        summary, wall, cpu = timed(partial(run_import, service, path, fmt, "dry", dry_run=True))
        if summary["messages"] != n or summary["stored"]:
            raise SystemExit(f"dry run of {fmt}: {summary}")
        print(f"{fmt}: dry run of {n}: {wall:.1f} s ({cpu:.1f} s CPU)", flush=True)
        rows.append((f"dry run {fmt} ({n})", f"{wall:.1f} s ({cpu:.1f} s CPU)", "<= 10 s", wall <= 10))
    service.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000, help="rss, reimport; dry run: half; rate: <= 2000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("rate", "rss", "reimport", "dryrun"))
    parser.add_argument("--model-cache", default=default_model_cache())
    args = parser.parse_args()
    parts = [args.only] if args.only else ["rate", "rss", "reimport", "dryrun"]
    work = Path(tempfile.mkdtemp(prefix="wontopos-import-formats-"))
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; work in {work}", flush=True)
    rows: list[tuple[str, str, str, bool]] = []
    checks: list[dict[str, int]] = []
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache) if {"rate", "dryrun"} & set(parts) else None
    if "rate" in parts:
        rate(embedder, args.model_cache, work, min(args.messages, 2000), args.runs, rows, checks)
    if "rss" in parts or "reimport" in parts:
        memory_and_again(work, args.messages, args.model_cache, "reimport" in parts, rows, checks)
    if "dryrun" in parts:
        dry_run(embedder, args.model_cache, work, args.messages // 2, rows)
    if checks:
        wrong = sum(c["wrong"] for c in checks)
        other = ", ".join(f"{k} {sum(c[k] for c in checks)}" for k in ("unknown", "missing"))
        rows.append((f"wrong speaker, {len(checks)} imports checked", f"{wrong} ({other})", "0", wrong == 0))
    print(f"\n{'target':<46} {'measured':<52} {'goal':<12} met")
    for name, measured, goal, met in rows:
        print(f"{name:<46} {measured:<52} {goal:<12} {'yes' if met else 'NO'}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

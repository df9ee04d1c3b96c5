"""Claude Code's hooks fed the JSON Claude Code sends (its hooks reference: the common
fields and each event's own), run as the command line declares them, through the shared
engine's side of the command line's protocol (``commands_engine``: the engine in a thread
over a socket pair, the session's real model and a real database).

The transcripts are written here in the shape the ``claude-code`` reader accepts (as
``tests/imports/data/claude_code/session.jsonl``): what the person typed, the assistant's
text, and a tool call with its result between them, which the capture skips.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import commands_engine

from wontopos_mcp.cli.hooks import PROMPT_CHARS, SESSION_START_CHARS, read_event, run_hook
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.service import MemoryService

SESSION = "5d0f0a00-0000-4000-8000-00000000c0de"
COMMON = {"session_id": SESSION, "cwd": "/home/dev/app", "permission_mode": "default"}

Hook = Callable[..., tuple[int, str, str]]


def session_start_event() -> dict[str, Any]:
    return {**COMMON, "transcript_path": "/home/dev/.claude/projects/app/s.jsonl", "hook_event_name": "SessionStart",
            "source": "startup", "model": "claude-sonnet-4-20250514"}  # fmt: skip


def prompt_event(prompt: str) -> dict[str, Any]:
    return {**COMMON, "transcript_path": "/home/dev/.claude/projects/app/s.jsonl",
            "hook_event_name": "UserPromptSubmit", "prompt": prompt}  # fmt: skip


def capture_events(transcript: Path) -> list[dict[str, Any]]:
    """The three events ``capture`` runs for, as Claude Code sends each."""
    path = {**COMMON, "transcript_path": str(transcript)}
    return [
        {**path, "hook_event_name": "Stop", "stop_hook_active": False},
        {**path, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": ""},
        {**path, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
    ]


@pytest.fixture
def hook(service: MemoryService, capsys: pytest.CaptureFixture[str]) -> Hook:
    """``hook("prompt", event, "--user", "alice")`` -> (exit code, stdout, stderr): the hook
    parsed as the command line declares it, its event on stdin, through the engine's side."""

    def run(name: str, event: Any, *flags: str) -> tuple[int, str, str]:
        args = vars(build_parser().parse_args(["hook", name, *flags]))
        stdin = io.BytesIO(event if isinstance(event, bytes) else json.dumps(event).encode())
        with contextlib.closing(commands_engine(service)) as client:
            code = run_hook(args["action"], args, Settings(), service=client, stdin=stdin)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def transcript(path: Path, turns: range, *, session: str = SESSION, says: Callable[[int], str] | None = None) -> Path:
    """Append ``turns`` (numbered) to a Claude Code transcript: each a typed request, a
    tool call and its result, and the assistant's answer (``says``; bench/hooks.py writes
    longer ones)."""
    says = answer if says is None else says
    model = "claude-sonnet-4-20250514"
    lines = []
    for n in turns:
        stamp = f"2025-08-01T{10 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
        base = {"sessionId": session, "timestamp": stamp, "isSidechain": False, "cwd": "/home/dev/app"}
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": f"/m{n}.py"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "source"}
        lines += [
            {**base, "type": "user", "uuid": f"u-{n}", "message": {"role": "user", "content": question(n)}},
            {**base, "type": "assistant", "uuid": f"t-{n}",
             "message": {"role": "assistant", "model": model, "content": [call]}},
            {**base, "type": "user", "uuid": f"r-{n}", "toolUseResult": {"type": "text"},
             "message": {"role": "user", "content": [result]}},
            {**base, "type": "assistant", "uuid": f"a-{n}",
             "message": {"role": "assistant", "model": model, "content": [{"type": "text", "text": says(n)}]}},
        ]  # fmt: skip
    with path.open("a", encoding="utf-8") as file:
        file.writelines(json.dumps(line) + "\n" for line in lines)
    return path


def question(n: int) -> str:
    return f"Question {n}: what does module {n} do?"


def answer(n: int) -> str:
    return f"Module {n} parses the invoices of customer number {n}."


def stored(service: MemoryService, user_id: str | None = None) -> list[str]:
    return [m["content"] for m in service.memory_list(limit=500, user_id=user_id)["memories"]]


# -- session-start -----------------------------------------------------------------------------


def test_session_start_prints_the_people_and_the_latest_memories_newest_first(
    service: MemoryService, hook: Hook
) -> None:
    service.speaker_register("Bob")
    service.memory_add("The Orion release moved to Tuesday.", speaker="Bob")
    service.memory_add("I keep the changelog in docs/changes.md.", speaker="me")
    service.memory_add("The staging password rotates monthly.")

    code, out, err = hook("session-start", session_start_event())

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "Bob (1)" in lines[1]
    assert lines[-3:] == [
        f"- {today()} The staging password rotates monthly.",
        f"- {today()} [me] I keep the changelog in docs/changes.md.",
        f"- {today()} [Bob] The Orion release moved to Tuesday.",
    ]


def test_session_start_stays_within_its_budget_with_long_memories(service: MemoryService, hook: Hook) -> None:
    service.memory_add_batch([{"content": f"Decision {n}: " + "the parser keeps every field. " * 9} for n in range(17)])

    code, out, _ = hook("session-start", session_start_event())

    assert code == 0
    assert len(out.rstrip("\n")) <= SESSION_START_CHARS
    assert out.count("\n- ") >= 8  # long memories are cut, so many still fit


def test_session_start_prints_nothing_for_an_empty_store_or_one_not_created(service: MemoryService, hook: Hook) -> None:
    assert hook("session-start", session_start_event()) == (0, "", "")
    assert hook("session-start", session_start_event(), "--user", "nobody-yet") == (0, "", "")


# -- prompt -------------------------------------------------------------------------------------


def test_prompt_prints_the_closest_memories_labelled_by_speaker(service: MemoryService, hook: Hook) -> None:
    service.speaker_register("Ana")
    service.memory_add("Ana's flight to Lisbon lands at 9 pm on Friday.", speaker="Ana")
    service.memory_add("The build uses Python 3.12.")

    code, out, err = hook("prompt", prompt_event("When does Ana's plane arrive in Lisbon?"))

    assert (code, err) == (0, "")
    assert out.splitlines()[1] == f"- {today()} [Ana] Ana's flight to Lisbon lands at 9 pm on Friday."


def test_prompt_stays_within_its_budget(service: MemoryService, hook: Hook) -> None:
    rule = "totals are rounded per line. " * 9
    service.memory_add_batch([{"content": f"Invoice rule {n}: {rule}"} for n in range(9)])

    code, out, _ = hook("prompt", prompt_event("how are invoice totals rounded?"))

    assert code == 0
    assert 0 < len(out.rstrip("\n")) <= PROMPT_CHARS


def test_prompt_prints_nothing_when_the_store_is_empty(hook: Hook) -> None:
    assert hook("prompt", prompt_event("what did we decide about the parser?")) == (0, "", "")
    assert hook("prompt", prompt_event("anything?"), "--user", "nobody-yet") == (0, "", "")


def test_prompt_searches_the_store_named_by_user(service: MemoryService, hook: Hook) -> None:
    service.store_create("alice")
    service.memory_add("Alice's cat is called Miso.", user_id="alice")

    assert hook("prompt", prompt_event("what is the cat called?")) == (0, "", "")
    assert "Miso" in hook("prompt", prompt_event("what is the cat called?"), "--user", "alice")[1]


# -- capture --------------------------------------------------------------------------------------


def test_capture_stores_the_typed_turns_and_the_answers_once_and_later_only_the_new(
    service: MemoryService, hook: Hook, tmp_path: Path
) -> None:
    path = transcript(tmp_path / "session.jsonl", range(3))
    stop, pre_compact, session_end = capture_events(path)

    assert hook("capture", stop) == (0, "", "")
    first = stored(service)
    assert first == [text for n in range(3) for text in (question(n), answer(n))]
    assert hook("capture", pre_compact) == (0, "", "")
    assert stored(service) == first  # nothing twice

    transcript(path, range(3, 5))
    assert hook("capture", session_end) == (0, "", "")
    assert stored(service)[len(first) :] == [question(3), answer(3), question(4), answer(4)]
    assert {m.get("speaker") for m in service.memory_list(limit=500)["memories"]} == {None, "me"}


def test_turns_that_restated_another_session_are_found_again_without_a_second_look(
    service: MemoryService, hook: Hook, tmp_path: Path
) -> None:
    """A turn found a duplicate of an earlier session's is remembered as imported (a
    capture after every answer must not embed it again), until the memory it restates goes."""
    from wontopos_mcp.imports.sources import open_source
    from wontopos_mcp.rules.import_options import import_options

    earlier = transcript(tmp_path / "a.jsonl", range(2), session="session-a")
    later = transcript(tmp_path / "b.jsonl", range(2), session="session-b")
    assert hook("capture", capture_events(earlier)[0]) == (0, "", "")
    assert hook("capture", capture_events(later)[0]) == (0, "", "")
    assert len(stored(service)) == 4  # the later session's turns restate the earlier's

    def again() -> dict[str, Any]:
        return dict(service.import_conversations(open_source(str(later)), import_options(format="claude-code"), None))

    assert {k: again()[k] for k in ("stored", "duplicates", "already_imported")} == {
        "stored": 0, "duplicates": 0, "already_imported": 4,
    }  # fmt: skip
    first = service.memory_list(limit=1)["memories"][0]
    service.memory_forget(memory_id=first["id"])
    assert again()["stored"] == 1


def test_capture_into_a_store_not_created_yet_creates_it(service: MemoryService, hook: Hook, tmp_path: Path) -> None:
    stop = capture_events(transcript(tmp_path / "s.jsonl", range(1)))[0]

    assert hook("capture", stop, "--user", "project-x") == (0, "", "")
    assert len(stored(service, "project-x")) == 2


# -- failures: one line on stderr, exit 0, nothing on stdout ------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        (b"", "stdin held nothing"),
        (b"{not json", "no complete JSON object"),
        (b'["SessionStart"]', "a JSON list, not the hook's JSON object"),
        (json.dumps({**COMMON, "prompt": 42}).encode(), "prompt that is not a string"),
    ],
)
def test_stdin_that_is_not_the_hooks_json_is_one_line_and_exit_0(hook: Hook, stdin: bytes, said: str) -> None:
    code, out, err = hook("prompt", stdin)

    assert (code, out) == (0, "")
    assert err.count("\n") == 1
    assert err.startswith("wontopos-mcp: hook prompt: ")
    assert said in err


def test_capture_of_a_missing_transcript_is_one_line_and_exit_0(hook: Hook, tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"

    code, out, err = hook("capture", capture_events(missing)[0])

    assert (code, out, err) == (0, "", f"wontopos-mcp: hook capture: no transcript at {missing}\n")


def test_capture_of_a_transcript_that_is_not_one_is_one_line_and_exit_0(hook: Hook, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "user", "sessionId": "s", "parentUuid": null, "uuid": "u"\n', encoding="utf-8")

    code, out, err = hook("capture", capture_events(broken)[0])

    assert (code, out) == (0, "")
    assert err.count("\n") == 1
    assert "line 1" in err


def test_the_event_is_read_without_waiting_for_the_end_of_stdin() -> None:
    """Claude Code may keep stdin open after the JSON: a complete object is enough."""
    ours, theirs = os.pipe()
    os.write(theirs, json.dumps(prompt_event("hello")).encode())
    started = time.monotonic()
    try:
        with os.fdopen(ours, "rb", buffering=0) as stream:
            event = read_event(stream, wait=10.0)
    finally:
        os.close(theirs)
    assert event["prompt"] == "hello"
    assert time.monotonic() - started < 5.0


def test_stdin_that_never_completes_gives_up_after_the_wait() -> None:
    ours, theirs = os.pipe()
    os.write(theirs, b'{"prompt": "half')
    failed: list[BaseException] = []

    def read() -> None:
        with os.fdopen(ours, "rb", buffering=0) as stream:
            try:
                read_event(stream, wait=0.2)
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                failed.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=10)
    os.close(theirs)
    assert "within" in str(failed[0])


def today() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).date().isoformat()

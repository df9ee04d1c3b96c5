"""The log filter (``wontopos_mcp.logs``) on what reaches it beyond log calls: Python
warnings, tracebacks (a real bug's exception message can quote a memory), and the
exceptions that end a thread or the process. A real process configures logging as the
CLI does and writes the marker into each; its stderr must hold none of them, while
saying what happened and where."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from support import REPO

MARKER = "zsecretqq"

SCRIPT = textwrap.dedent(f"""
    import logging, threading, warnings
    from wontopos_mcp import logs

    logs.configure("debug")
    warnings.warn("a warning quoting {MARKER}", UserWarning)
    try:
        try:
            raise KeyError("{MARKER} as a key")
        except KeyError as exc:
            raise RuntimeError("{MARKER} in the message") from exc
    except RuntimeError:
        logging.getLogger("wontopos_mcp.engine").exception("a call failed")
        logging.getLogger("lancedb").error("a library's call failed", exc_info=True)

    def fail():
        raise ValueError("{MARKER} in a thread")

    worker = threading.Thread(target=fail, name="worker")
    worker.start()
    worker.join()
    raise LookupError("{MARKER} uncaught")
""")


def test_warnings_and_tracebacks_pass_the_log_filter_without_their_messages() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    log = done.stderr
    assert done.returncode == 1, log
    assert done.stdout == ""
    assert MARKER not in log, log
    assert "WARNING py.warnings: <string>:6: UserWarning (message withheld from the log)" in log, log
    assert "ERROR wontopos_mcp.engine: a call failed" in log
    assert "ERROR lancedb: a library's call failed" in log
    assert log.count("builtins.KeyError (message withheld from the log)") == 2, log  # cause of both
    assert log.count("The above exception was the direct cause of the following exception") == 2
    assert log.count("builtins.RuntimeError (message withheld from the log)") == 2
    assert 'File "<string>", line 11, in <module>' in log  # the frames stay
    assert "thread worker ended by an uncaught ValueError" in log
    assert "builtins.ValueError (message withheld from the log)" in log
    assert "CRITICAL wontopos_mcp.logs: uncaught LookupError" in log
    assert "builtins.LookupError (message withheld from the log)" in log

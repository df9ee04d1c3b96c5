"""The redaction corpora, read and measured: for ``tests/rules/test_redaction.py`` and
``bench/redaction_corpus.py``.

``tests/data/redaction_corpus.json`` is the first corpus, ``redaction_corpus_2.json`` the
second (issue 30: kinds the first has not, written before the rules that catch them).
Each secret is stored as parts, joined and put in place of ``⟦i⟧`` in its text, so that no
secret scanner reads the files as leaks.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from wontopos_mcp.rules.redaction import Redactor

DATA = Path(__file__).resolve().parent / "data"
CORPORA = ("redaction_corpus.json", "redaction_corpus_2.json")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return loaded


def placed(entry: dict[str, Any]) -> tuple[str, list[str]]:
    """An entry's text with its secrets (stored as parts) in place."""
    secrets = ["".join(parts) for parts in entry["secrets"]]
    text = entry["text"]
    for i, secret in enumerate(secrets):
        text = text.replace(f"\u27e6{i}\u27e7", secret)
    return text, secrets


def measure(corpus: dict[str, Any], redactor: Redactor) -> dict[str, list[Any]]:
    """Each secret caught (gone whole), missed (kept) or cut in part (8 characters of it
    left that the text holds nowhere else); each look-alike changed; each text named with
    other kinds than the corpus's."""
    found: dict[str, list[Any]] = {"caught": [], "missed": [], "partial": [], "wrong_kind": [], "changed": []}
    for entry in corpus["secrets"]:
        text, secrets = placed(entry)
        done = redactor.redact(text)
        left = re.sub(r"\[redacted:\w+\]", "", done.text)  # "rubygems_": a prefix and a kind
        for secret in secrets:
            if secret in done.text:
                found["missed"].append(text)
            elif any(
                (piece := secret[i : i + 8]) in left and piece not in text.replace(secret, "")
                for i in range(len(secret) - 7)
            ):
                found["partial"].append(done.text)
            else:
                found["caught"].append(secret)
        if not any(secret in done.text for secret in secrets) and Counter(done.counts) != Counter(entry["kinds"]):
            found["wrong_kind"].append((entry["where"], dict(done.counts), entry["kinds"]))
    for text in corpus["look_alikes"]:
        if (changed := redactor.redact(text).text) != text:
            found["changed"].append(changed)
    return found


def summary(name: str, corpus: dict[str, Any], found: dict[str, list[Any]]) -> str:
    secrets = sum(len(entry["secrets"]) for entry in corpus["secrets"])
    return (
        f"{name}: {len(found['caught'])}/{secrets} secrets caught, {len(found['missed'])} missed, "
        f"{len(found['partial'])} in part; {len(found['changed'])}/{len(corpus['look_alikes'])} "
        f"look-alikes changed; {len(found['wrong_kind'])} named with another kind"
    )

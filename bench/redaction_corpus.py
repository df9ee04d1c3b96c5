"""Redaction's catch on the corpora (``--redact secrets``): how many secrets each corpus loses
whole, how many it keeps (missed) or loses in part, how many look-alikes change (false
positives), and how many texts are named with other kinds than the corpus expects.

    python bench/redaction_corpus.py [--show]

The corpora and how they are read: ``tests/redaction_corpora.py``. ``--show`` prints each
miss, partial, wrong kind and changed look-alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wontopos_mcp.rules.redaction import Redactor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redaction_corpora import CORPORA, load, measure, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--show", action="store_true", help="print each miss, partial, wrong kind and change")
    args = parser.parse_args()
    redactor = Redactor("secrets")
    for name in CORPORA:
        corpus = load(name)
        found = measure(corpus, redactor)
        print(summary(name, corpus, found))
        if args.show:
            for what in ("missed", "partial", "wrong_kind", "changed"):
                for item in found[what]:
                    print(f"  {what}: {item!r}"[:300])


if __name__ == "__main__":
    main()

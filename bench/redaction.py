"""Redaction time against text length: linear whatever the text.

Times ``Redactor("secrets").redact`` on prose and on adversarial texts (a prefix or a
keyword repeated, long runs of one character, base64, hex, ...) at 10k, 100k and 500k
characters, and prints the time per 100k characters and the ratio of the 500k time to
the 100k time (5 when the time is linear; 25 when quadratic). With ``--anchors``, also
every literal a rule starts with, repeated alone and with a space, ``=`` or ``:``
after it (the worst ratios first).

    python bench/redaction.py [--anchors] [--repeat 3]

Each time is this process's CPU time, the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import base64
import os
import time
import timeit
from collections.abc import Callable

from wontopos_mcp.rules.bip39_words import WORDS
from wontopos_mcp.rules.redaction import Redactor, rules

SIZES = (10_000, 100_000, 500_000)
PROSE = (
    "Ana said the release moved to Tuesday because the build server was down again. "
    "Ben will check the password policy and the token expiry with security next week; "
    "the staging database keeps its key in the vault, see https://wiki.example.com/ops. "
)


B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def repeated(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def _base64(n: int) -> str:
    return base64.b64encode(os.urandom(n))[:n].decode()


def _hex(n: int) -> str:
    return os.urandom(n // 2 + 1).hex()[:n]


SHAPES: dict[str, Callable[[int], str]] = {
    "prose": repeated(PROSE),
    "sk- repeated": repeated("sk-"),
    "a * N": repeated("a"),
    "= * N": repeated("="),
    ":// repeated": repeated("://"),
    "'password is ' repeated": repeated("password is "),
    "'password=' repeated": repeated("password="),
    "'pw=f(' repeated": repeated("pw=f("),
    "long base64": _base64,
    "long hex": _hex,
    "'-' * N": repeated("-"),
    "'://:a@' repeated": repeated("://:a@"),
    "BEGIN lines repeated": repeated("-----BEGIN RSA PRIVATE KEY-----\n"),
    "base64 then END repeated": repeated("QUJDREVGR0hJSktMTU5PUA==\n-----END PRIVATE KEY-----\n"),
    "'curl -u a:b ' repeated": repeated("curl -u a:b "),
    "'docker login ' repeated": repeated("docker login "),
    "'--password ' repeated": repeated("--password "),
    "'eyJ' repeated": repeated("eyJ"),
    "'Authorization: ' repeated": repeated("Authorization: "),
    "white space": repeated(" \n\t"),
    "digits": repeated("0123456789"),
    "one word, no space": repeated("passwordtokensecret"),
    "one letter and a space": repeated("c "),
    "BIP39 words, 20 then a break": repeated(" ".join(WORDS[:20]) + " zz "),
    "BIP39 words, no break": repeated(" ".join(WORDS[:50]) + " "),
    "'admin / ' repeated": repeated("admin / "),
    "'login is root with ' repeated": repeated("login is root with "),
    "'wallet ' then hex": lambda n: ("wallet " + _hex(n))[:n],
    "'token ' then base64": lambda n: ("token " + _base64(n))[:n],
    "long base58": lambda n: "".join(B58[b % 58] for b in os.urandom(n)),
}


def best_time(redactor: Redactor, text: str, repeat: int) -> float:
    """The best of ``repeat`` runs in this process's CPU time: another process's load on a
    shared machine does not count."""
    return min(timeit.repeat(lambda: redactor.redact(text), timer=time.process_time, number=1, repeat=repeat))


def measure(redactor: Redactor, make: Callable[[int], str], repeat: int) -> list[float]:
    return [best_time(redactor, make(n), repeat) for n in SIZES]


def anchor_shapes() -> dict[str, Callable[[int], str]]:
    shapes = {}
    for rule in rules():
        for literal in rule.anchors or rule.needles:
            for after in ("", " ", "=", ":"):
                shapes[f"{literal + after!r} repeated"] = repeated(literal + after)
    return shapes


def report(name: str, times: list[float]) -> None:
    per_100k = [t * 100_000 / n * 1000 for t, n in zip(times, SIZES)]
    cells = "  ".join(f"{p:8.1f}" for p in per_100k)
    print(f"{name:34s} {cells}   {times[2] / times[1]:5.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--anchors", action="store_true", help="also every literal a rule starts with")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    redactor = Redactor("secrets")
    redactor.redact("warm up: password=abc123")
    print(f"{'text':34s} {'ms per 100k chars at 10k, 100k, 500k':38s} 500k/100k")
    for name, make in SHAPES.items():
        report(name, measure(redactor, make, args.repeat))
    if args.anchors:
        print("\nevery rule's literal, repeated (worst 15 ratios):")
        results = [(name, measure(redactor, make, 1)) for name, make in anchor_shapes().items()]
        for name, times in sorted(results, key=lambda r: r[1][2] / r[1][1], reverse=True)[:15]:
            report(name, times)


if __name__ == "__main__":
    main()

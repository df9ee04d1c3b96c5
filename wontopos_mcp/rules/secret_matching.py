"""How a redaction rule finds secrets (``redaction``'s engine; the rules themselves are in
``secret_shapes`` and ``secret_words``), and the checks values share.

A ``Rule`` is a pattern and a judge. The pattern is tried only where one of the rule's
literals is (found by substring search, in C, fast whatever the text), or scanned from a
character class when the rule has no literal; the judge turns a match into the span to
replace, or refuses it (a placeholder, code, a word of a sentence). Patterns succeed and
judges refuse, so no refused value is read twice: with bounded gaps and values, that keeps
redaction linear in the text's length, whatever the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

Span = tuple[int, int, str]  # start, end, kind
# How much a rule's finding is believed where findings overlap (the lower, the more).
PRIVATE_KEY, PROVIDER, URL, HEADER, COMMAND, ASSIGNMENT, PROSE = range(7)


class Lazy:
    """A pattern compiled on its first use: importing this module compiles nothing, so a
    server that does not redact never pays for the patterns (tens of milliseconds)."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    def __getattr__(self, name: str) -> Any:  # match, fullmatch, search
        return getattr(self.compiled, name)


Judge = Callable[[re.Match[str], str], "Span | None"]


@dataclass(frozen=True)
class Rule:
    """One pattern and the ``judge`` that turns its matches into spans (or refuses them).

    With ``anchors``, literals the pattern starts with, the pattern is tried only where
    one of them is (found by substring search, fast whatever the text); without, it is
    scanned through the text when one of ``needles`` is in it. ``folded``: those literals
    are looked for in the lower-case text. ``requires``: a literal the text must hold too.
    """

    rank: int
    pattern: re.Pattern[str]
    judge: Judge
    anchors: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    folded: bool = False
    requires: str = ""

    def spans(self, text: str, folded: str) -> Iterator[Span]:
        hay = folded if self.folded else text
        if self.requires and self.requires not in hay:
            return
        for match in self._matches(text, hay):
            span = self.judge(match, text)
            if span is not None and span[1] > span[0]:
                yield span

    def _matches(self, text: str, hay: str) -> Iterator[re.Match[str]]:
        if not self.anchors:
            if any(needle in hay for needle in self.needles):
                yield from self.pattern.finditer(text)
            return
        done = 0  # as finditer: a match is never tried inside the previous one
        for at in sorted({at for anchor in self.anchors for at in _occurrences(hay, anchor)}):
            if at < done:
                continue
            match = self.pattern.match(text, at)
            if match is not None:
                done = max(match.end(), at + 1)
                yield match


def _occurrences(hay: str, literal: str) -> Iterator[int]:
    at = hay.find(literal)
    while at >= 0:
        yield at
        at = hay.find(literal, at + 1)


def value_span(match: re.Match[str]) -> tuple[int, int, str] | None:
    """The first of the groups ``dq``, ``sq``, ``bt``, ``bare``, ``s`` that matched."""
    for group in ("dq", "sq", "bt", "bare", "s"):
        if group in match.re.groupindex and match.group(group) is not None:
            return match.start(group), match.end(group), group
    return None


def whole(kind: str, check: Callable[[str], bool] | None = None) -> Judge:
    """The value (or the whole match) as ``kind``, when ``check`` accepts it."""

    def judge(match: re.Match[str], text: str) -> Span | None:
        start, end, _ = value_span(match) or (match.start(), match.end(), "")
        if check is not None and not check(text[start:end]):
            return None
        return start, end, kind

    return judge


def mixed(value: str) -> bool:
    """Letters and digits both: a random token, not a word or a number."""
    return any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)


def cased(value: str) -> bool:
    """Upper and lower case letters and a digit: base64 of random bytes, not hex."""
    return any(ch.isupper() for ch in value) and any(ch.islower() for ch in value) and any(ch.isdigit() for ch in value)


# -- values: placeholders and code -------------------------------------------------------------------

_PLACEHOLDER = Lazy(
    r"""\$\{ | \$[A-Za-z_][A-Za-z0-9_]*$ | \$\(\w | \{\{ | \{[A-Za-z_][\w.]*\}$ | %\(\w+\)s | %s$ | <[^<>]*>$
    | \[redacted: | [*xX.•·_#-]+$ | !vault | \#\{ | @@
    | (?i:your[_ -]|enter[_ ]|insert[_ ]|replace[_ ]|my[_-]?secret$|my[_-]?password$)
    | (?i:(?:change[_-]?me|placeholder|example|dummy|sample|secret|password|passwd|pass|pwd|token|api[_-]?key|
          null|none|nil|undefined|true|false|empty|required|optional|hidden|unset|default|string|str|tbd|todo|
          redacted|masked|removed|x+|\*+)$)""",
    re.VERBOSE,
)
# Code and names: an identifier, a dotted name, a call or a subscript (os.environ[...]).
CODE = Lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:[(\[].*)?")
LETTERS = Lazy(r"[^\W\d_]+")
WORDS = Lazy(r"[^\W\d_]+(?:-[^\W\d_]+)*")  # "case-sensitive"


def placeholder(value: str) -> bool:
    return not value.strip() or bool(_PLACEHOLDER.match(value.strip()))


_PATH = Lazy(r"(?:~|\.{1,2}|[A-Za-z]:)?[/\\][\w.-]+(?:[/\\][\w.-]*)*")


def is_path(value: str) -> bool:
    """``/home/bob``, ``C:\\Users``, ``https://example.com/reset``: a place, not a password."""
    return bool(_PATH.fullmatch(value) or _URL_VALUE.match(value))


_URL_VALUE = Lazy(r"[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:@]*$")  # with no password in it


def is_code(value: str) -> bool:
    """A call, a subscript, a dotted name or a snake_case name without a digit."""
    if not CODE.fullmatch(value):
        return False
    return any(ch in value for ch in "([.") or ("_" in value and not any(ch.isdigit() for ch in value))


def literals(*alternations: str) -> tuple[str, ...]:
    """Where the alternatives of these alternations start: each one's text up to its first
    optional or repeated part (``api[_.-]?key``: ``api``; ``credentials?``: ``credential``),
    in lower case, leaving out those another one starts (``password`` is found as ``pass``)."""
    starts = set()
    for alternation in alternations:
        for alternative in re.sub(r"\([^()]*\)", "(", alternation).split("|"):
            start = re.match(r"[^\[(?*+{\\]*", alternative).group()  # type: ignore[union-attr]
            if alternative[len(start) : len(start) + 1] in ("?", "*", "{"):
                start = start[:-1]  # the last character is optional
            starts.add(start.lower())
    return tuple(sorted(s for s in starts if s and not any(o != s and s.startswith(o) for o in starts)))

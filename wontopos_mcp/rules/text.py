"""What the engine does to text: sentence chunks, the duplicate key, importance.

Kept apart from storage and the model so each rule is testable on its own and lives in
one place.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

# A sentence ends at ., !, ? (then white space) or at their CJK / Devanagari / Arabic
# forms (no space needed), optionally followed by a closing quote or bracket, or at a
# line break. "3.5" and "e.g." inside a sentence do not split it.
_BOUNDARY = re.compile(
    r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+"
    r"|(?<=[。！？｡।؟])(?![」』”’)\]])|(?<=[。！？｡][」』”’)\]])"
    r"|[\n\r\u2028\u2029]+"
)


def split_sentences(text: str) -> list[str]:
    pieces = (p.strip() for p in _BOUNDARY.split(text))
    return [p for p in pieces if p]


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Sentence-level chunks, each at most ``max_chars`` (too-long sentences split again).

    Short sentences are not merged: a chunk is what search matches, and one fact per
    chunk keeps a long memory from diluting it.
    """
    chunks: list[str] = []
    for sentence in split_sentences(text) or [text.strip()]:
        chunks.extend(_split_long(sentence, max_chars))
    return chunks


def _split_long(sentence: str, max_chars: int) -> list[str]:
    parts: list[str] = []
    rest = sentence
    while len(rest) > max_chars:
        cut = rest.rfind(" ", max_chars // 2, max_chars)
        cut = cut if cut > 0 else max_chars
        parts.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        parts.append(rest)
    return parts


def full_text(content: str, chunk_idx: int) -> str:
    """What BM25 indexes for a memory's chunk: the whole memory on its first chunk,
    nothing on the others, so full text ranks memories (one document each) while the
    vectors rank sentences."""
    return content if chunk_idx == 0 else ""


# Hangul, kana and Han: words carry attached particles and endings ("부산에서" is
# "부산" + "에서", "東京では") or stand without spaces, so the whole-word index misses
# a query's stem. Their runs get a second, character-bigram index (``schema``).
# The class is made of the characters themselves (the escapes are Python's), so
# Python's ``re`` and LanceDB's SQL ``regexp_replace`` (Rust regex) read it alike.
_CJK_CHARS = (
    "\u1100-\u11ff\u3005-\u3007\u3041-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
_NOT_CJK = f"[^{_CJK_CHARS}]+"
_NOT_CJK_RE = re.compile(_NOT_CJK)
_CJK_RE = re.compile(f"[{_CJK_CHARS}]")
# The same rule in LanceDB's SQL, to fill the column of rows written before it existed.
CJK_TEXT_SQL = f"regexp_replace(text, '{_NOT_CJK}', ' ', 'g')"


def cjk_text(text: str) -> str:
    """What the bigram index holds for a chunk: ``text``'s Hangul, kana and Han runs,
    everything else one space (so Latin-only text gives at most " ", no bigram)."""
    return _NOT_CJK_RE.sub(" ", text)


def has_cjk(text: str) -> bool:
    """Whether a query has anything the bigram index could match."""
    return _CJK_RE.search(text) is not None


def normalized(text: str) -> str:
    """Text with case, spacing, punctuation and Unicode form normalised away."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if unicodedata.category(ch)[0] in "LNM" else " " for ch in folded)
    return " ".join(kept.split())


def duplicate_key(text: str) -> str:
    """Equal keys mean "the same text once case, spacing, punctuation and form are normalised"."""
    return hashlib.sha256(normalized(text).encode("utf-8")).hexdigest()[:32]


# Importance heuristic (documented in the README): a base of 0.3, plus 0.15 for each
# signal that a memory carries a durable, specific fact. Multilingual where cheap.
_SIGNALS = (
    re.compile(r"\d"),  # numbers, dates, times, amounts
    re.compile(
        r"\b(always|never|must|prefer|favou?rite|allerg\w*|deadline|birthday|promise\w*|"
        r"remember|important|hate|love|need|wichtig|immer|nie|muss|важн\w*|всегда|никогда)\b",
        re.IGNORECASE,
    ),
    re.compile(r"(大切|重要|必ず|絶対|好き|嫌い|締め切り|중요|항상|절대|좋아|싫어|必须|重要|总是|从不|喜欢|讨厌)"),
    re.compile(r"[!！]"),
)


def importance(text: str) -> float:
    score = 0.3
    score += 0.15 * sum(1 for pattern in _SIGNALS if pattern.search(text))
    if len(text) >= 80:
        score += 0.1
    return round(min(score, 1.0), 2)

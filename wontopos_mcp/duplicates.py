"""Is a new text a restatement of a stored one? The text decides, and only the text.

Cosine similarity cannot tell "dinner at 8 pm" from "dinner at 10 pm" (0.99), so no
embedding is involved: a text is a restatement when, once case, spacing, punctuation and
Unicode form are normalised and *function words* (articles, particles, copulas, fillers,
politeness endings) are set aside, every detail is the same:

* the same numbers (digits in any script, after NFKC),
* the same negations (count of negation markers per language),
* the same symbols (currency, math, emoji),
* the same content words, in the same order (so swapped actors — "Bob paid Alice" /
  "Alice paid Bob" — differ), compared after a light stem (case endings, plurals).

Each of these is a function of one text, compared by equality, so they hash into a
*restatement key* (``restatement_key``): two texts have the same key exactly when one
restates the other. Writes store the key and find every restated memory with one
indexed equality lookup — exhaustive, unlike a nearest-k vector search, and without a
vector.

Anything else is stored: when in doubt, store. The lists are small and per script;
they only ever *remove* differences that carry no detail, so a gap in them makes the
detector store more, never lose a fact.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

from .text import normalized

_NUMBER = re.compile(r"[-+−]?\d+(?:[.,]\d+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# Words that carry no detail in a restatement. Negations are NOT here (counted apart),
# nor pronouns ("I owe you" / "you owe me" differ in who did what).
_FUNCTION_WORDS = frozenset(
    """
    a an the is are was were be been being am 's s m re ve d ll do does did to of in on at
    for with by as that this it its
    and or but so just really actually also very quite well oh um uh like basically still
    has have had will would shall should can could may might must please okay ok yes
    der die das ein eine einen einem einer des dem den ist sind war waren bin bist sein
    und oder aber auch ja doch mal noch schon sehr zu im am vom zum zur es hat habe haben
    wird werden
    le la les un une des est sont et ou mais aussi très de du au aux en ce cet cette
    el los las una unos unas es son y o pero también muy del al
    и а но же ли бы вот это так уже ещё еще очень тоже же был была были есть быть да ну
    """.split()
)
_NEGATIONS = frozenset(
    """
    not no never none nothing nobody nowhere neither nor n't cannot can't won't don't
    doesn't didn't isn't aren't wasn't weren't haven't hasn't hadn't shouldn't wouldn't
    nicht kein keine keinen keinem keiner nie niemals nichts
    ne pas jamais rien aucun aucune sans
    nunca nada ningún ninguna
    не нет ни никогда ничего никто нельзя без
    안 않 못 없 아니
    """.split()
)
_GLUED_NEGATIONS = ("ない", "なかっ", "ません", "ず", "不", "没", "沒", "別", "别", "未", "無", "无", "非", "않", "없", "못")
# Particles, copulas and sentence-final softeners of Japanese and Chinese.
_CJK_FUNCTION = tuple(
    sorted(
        "でした ました です ます だった だ である よね よ ね な は が を に へ も の と で や か "
        "的 了 吧 呢 啊 呀 嘛 很 也 是".split(),
        key=len,
        reverse=True,
    )
)
# Korean: particles and endings glued to a word; the stem is what remains.
_KO_ENDINGS = tuple(
    sorted(
        "습니다 입니다 합니다 해요 에요 예요 이에요 어요 아요 니다 해 요 은 는 이 가 을 를 에 에서 도 의 와 과 로 으로 랑 이랑".split(),
        key=len,
        reverse=True,
    )
)
_LATIN_SUFFIXES = ("es", "s", "en", "e", "n", "а", "я", "ы", "и", "у", "ю", "е", "ой", "ей", "ом", "ем")


def is_restatement(new: str, stored: str) -> bool:
    """True when ``new`` says what ``stored`` says, detail for detail."""
    return _parts(new) == _parts(stored)


def restatement_key(text: str) -> str:
    """Equal keys mean "one text restates the other" (``is_restatement``).

    A hash of the same parts ``is_restatement`` compares, so a write finds the memories
    it restates by an indexed equality lookup instead of a vector search for candidates:
    exhaustive (a nearest-k search can miss the restated memory) and no vector needed.
    """
    canonical = json.dumps(_parts(text), separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _parts(text: str) -> tuple[list[str], tuple[int, int], list[str], list[str]]:
    """Every detail of a text: numbers, negations, symbols, content words. Two texts
    restate each other exactly when these are equal.

    A text with no detail at all ("OK.", "Yes.", "It is.") keeps its function words as
    its content: otherwise every such reply would restate every other one.
    """
    norm = normalized(text)
    numbers, negations, symbols, content = _numbers(text), _negations(norm), _symbols(text), _content(norm)
    if not (numbers or symbols or content):
        content = _words(norm)
    return numbers, negations, symbols, content


def _numbers(text: str) -> list[str]:
    return _NUMBER.findall(unicodedata.normalize("NFKC", text))


def _words(norm: str) -> list[str]:
    """Words, with English "don t" (apostrophe lost to normalisation) rejoined as "don't"."""
    return (norm + " ").replace("n t ", "n't ").split()


def _symbols(text: str) -> list[str]:
    """Currency, math and other symbols (€ vs $, °, emoji): normalisation drops them."""
    return sorted(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) in ("Sc", "Sm", "So"))


def _negations(norm: str) -> tuple[int, int]:
    spaced = sum(1 for w in _words(norm) if w in _NEGATIONS or w.endswith("n't"))
    glued = sum(norm.count(marker) for marker in _GLUED_NEGATIONS)
    return spaced, glued


def _content(norm: str) -> list[str]:
    """Content tokens in order: CJK characters without particles, stems of other words."""
    tokens: list[str] = []
    for word in _words(norm):
        if word.endswith("n't"):
            continue
        if _CJK.search(word):
            tokens.extend(_cjk_chars(word))
        elif _is_hangul(word):
            stem = _strip_suffix(word, _KO_ENDINGS, keep=1)
            if stem not in _KO_ENDINGS:
                tokens.append(stem)
        elif word not in _FUNCTION_WORDS and word not in _NEGATIONS:
            tokens.append(_strip_suffix(word, _LATIN_SUFFIXES, keep=3))
    return tokens


def _cjk_chars(word: str) -> list[str]:
    for particle in _CJK_FUNCTION:
        word = word.replace(particle, " ")
    return [ch for ch in word if not ch.isspace()]


def _is_hangul(word: str) -> bool:
    return any("\uac00" <= ch <= "\ud7a3" for ch in word)


def _strip_suffix(word: str, suffixes: tuple[str, ...], *, keep: int) -> str:
    for suffix in suffixes:
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            return word[: -len(suffix)]
    return word

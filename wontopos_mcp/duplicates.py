"""Is a new text a restatement of a stored one? The text decides, and only the text.

SPEC: a restatement is the same text once case, spacing, punctuation and Unicode form
are normalised, or the same words in the same order apart from discourse fillers; a
difference in any other word (function words and prepositions included) or in word
order makes a different text. So no embedding is involved (cosine similarity cannot
tell "dinner at 8 pm" from "dinner at 10 pm", 0.99), and nothing is stemmed or set
aside but the fillers: "paper"/"papers", "on the Prince Consort Road"/"on Prince
Consort Road", "in a still rough state"/"still in a rough state" all differ.

Each text is reduced to one *canonical* string (``canonical``); two texts restate each
other exactly when these are equal, and ``restatement_key`` is its hash, so a write
finds every memory it restates with one indexed equality lookup. The canonical form:

* NFKC, case folded, emoji variation selectors dropped, curly apostrophes made straight;
* English contractions with one reading spelled out ("don't" = "do not", "I'm",
  "we're", "I've", "it'll"); "'s" and "'d" (is / has / possessive, had / would) are not;
* punctuation and spacing are word breaks; spacing next to Han or kana is dropped (these
  scripts write no spaces); symbols are words of their own (€ vs $, °, emoji, −5 vs 5);
* fillers are dropped in two places only (``_FILLERS``): a *hesitation sound* (um-like
  words that are no word in any of the languages: "uhm", "äh", "euh", "э", "음"; "嗯" or
  "えーと" at the start of a clause), and a *set-off filler*: a clause made only of
  fillers and set off by a comma, dash or ellipsis ("Well, …", "…, actually.", "Bob is,
  um, …", "Ну, …", "あの、…"). Anywhere else they are words: "sings well", "well done",
  "um 15 Uhr". Words such as "like", "so", "just", "really", "yes" are never fillers.
* a text made only of fillers keeps them ("Um." and "Well." differ), as every text keeps
  all its other words: "OK." and "Yes." differ.

Because set-off fillers are recognised by their punctuation, two texts that differ only
in the commas around a filler word ("Well done" / "Well, done") are stored as two: the
one place where this module is stricter than plain normalisation (when in doubt, store).

Databases written before this rule carry ``restate_key`` values computed by an earlier
function (a hash of numbers, negations, symbols and stemmed content words) or, older
still, their ``dup_key``. Writes look a text's keys up and then decide with
``is_restatement`` on the two texts (``writes._restates``), so an old row is never
wrongly matched: at worst it is not found and the new text is stored again. The new key
is the same hash as ``text.duplicate_key`` for a text without fillers, contractions,
symbols or CJK, so rows keyed by their ``dup_key`` are mostly still found; rows keyed
by the earlier function are not found by single writes (bulk writes also match
``dup_key``, so they still catch exact restatements of them).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_TRANSLATE = {ord(c): "'" for c in "\u2018\u2019\u02bc\u2032`\u00b4"} | {0xFE0E: None, 0xFE0F: None}

# English contractions that have one reading ('s and 'd have several: left as they are).
_NOT = re.compile(r"\b(do|does|did|is|are|was|were|have|has|had|could|would|should|must|need|might)n't\b")
_IRREGULAR_NOT = {"can't": "can not", "cannot": "can not", "won't": "will not", "shan't": "shall not"}
_IRREGULAR = re.compile(r"\b(can't|cannot|won't|shan't)\b")
_AUXILIARY = re.compile(
    r"\b(i)'m\b|\b(we|you|they|who|what)'re\b|\b(i|we|you|they|who|could|would|should|might|must)'ve\b"
    r"|\b(i|we|you|they|he|she|it|who|that|there)'ll\b"
)
_SPELLED = ("am", "are", "have", "will")

# A hyphen before a digit that follows no word is a minus sign ("-5 °C" / "5 °C").
_MINUS = re.compile(r"(?<!\w)[-\u2010\u2011\u2012\u2013](?=\d)")
# Punctuation that sets a filler off (NFKC has already turned "…" into "...", "，" into ",").
_PAUSE = re.compile(r"[,;、\u2013\u2014\-]|\.\.")

# Hesitation sounds: no word in any of the languages, dropped wherever they stand alone;
# those of Han and kana (no spaces) also at the start of a clause ("嗯我…", "えーと会議…").
_CJK_HESITATIONS = ("えーっと", "えーと", "えっと", "ええと", "あのー", "うーん", "嗯", "呃")
_HESITATIONS = frozenset(
    "uh uhm umm ummm erm hm hmm äh ähm öh öhm euh э ээ эм эмм 음 으음".split() + [*_CJK_HESITATIONS]
)
# Discourse fillers ("well", "actually" and their equivalents), dropped only as a clause of
# their own set off by a pause. Left out on purpose: words that are also names, list
# items or pronouns set off by commas ("ben", "nun", "er", "那个"), answers ("yes", "ja",
# "да", "ok"), connectives ("so", "donc", "alors") and hedges ("eigentlich", "basically").
_FILLERS = _HESITATIONS | frozenset(
    """
    well actually oh ah um   also na naja tja   bah   pues bueno eh   ну
    えー あの まあ 実は   어 그 저기 참 사실   其实
    """.split()
)
_FILLER_PHRASES = frozenset(
    tuple(p.split()) for p in ("in fact", "en fait", "eh bien", "de hecho", "на самом деле", "вообще то")
)


def is_restatement(new: str, stored: str) -> bool:
    """True when ``new`` says what ``stored`` says, word for word (fillers aside)."""
    return canonical(new) == canonical(stored)


def restatement_key(text: str) -> str:
    """Equal keys mean "one text restates the other" (``is_restatement``): a hash of the
    canonical form, so a write finds the memories it restates by an indexed equality
    lookup (exhaustive, no vector needed)."""
    return hashlib.sha256(canonical(text).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def canonical(text: str) -> str:
    """The words a restatement must share, in order, as one string (see the module)."""
    clauses = _clauses(_prepared(text))
    every = [word for words, _ in clauses for word in words]
    kept = [word for words, set_off in clauses for word in _without_fillers(words, set_off)]
    return _joined(kept or every)


def _prepared(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text.translate(_TRANSLATE)).casefold().translate(_TRANSLATE)
    folded = _IRREGULAR.sub(lambda m: _IRREGULAR_NOT[m[1]], folded)
    folded = _NOT.sub(r"\1 not", folded)
    folded = _AUXILIARY.sub(lambda m: next(f"{g} {s}" for g, s in zip(m.groups(), _SPELLED) if g), folded)
    return _MINUS.sub("\u2212", folded)


def _clauses(text: str) -> list[tuple[list[str], bool]]:
    """Words by clause (the runs between punctuation), each with whether a pause sets it off.

    Letters, digits and marks make words; a symbol is a word of its own; a hyphen or
    apostrophe inside a word ("well-known", "l'eau") or a separator inside a number
    ("9:40") breaks the word but not the clause, so the "well" of "well-known" is no filler.
    """
    tokens: list[tuple[bool, str]] = []  # (is punctuation, text)
    word: list[str] = []
    for i, ch in enumerate(text + " "):
        kind = unicodedata.category(ch)[0]
        if kind in "LNM":
            word.append(ch)
            continue
        if word:
            tokens.append((False, "".join(word)))
            word = []
        if kind == "S":
            tokens.append((False, ch))
        elif kind == "P" and not _joins(text, i):
            if tokens and tokens[-1][0]:
                tokens[-1] = (True, tokens[-1][1] + ch)
            else:
                tokens.append((True, ch))
    clauses: list[tuple[list[str], bool]] = []
    words: list[str] = []
    before = ""
    for is_mark, piece in tokens + [(True, "")]:
        if not is_mark:
            words.append(piece)
            continue
        if words:
            clauses.append((words, bool(_PAUSE.search(before + piece))))
            words = []
        before = piece
    return clauses


def _joins(text: str, i: int) -> bool:
    """A hyphen or apostrophe inside a word, a decimal point, comma or colon inside a number."""
    if not 0 < i < len(text) - 1:
        return False
    left, ch, right = text[i - 1], text[i], text[i + 1]
    if ch in "'-\u2010\u2011":
        return left.isalnum() and right.isalnum()
    return ch in ".,:" and left.isdigit() and right.isdigit()


def _without_fillers(words: list[str], set_off: bool) -> list[str]:
    if set_off and (all(w in _FILLERS for w in words) or tuple(words) in _FILLER_PHRASES):
        return []
    kept = [w for w in words if w not in _HESITATIONS]
    if kept:
        kept[0] = _without_cjk_hesitation(kept[0])
    return [w for w in kept if w]


def _without_cjk_hesitation(word: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for sound in _CJK_HESITATIONS:
            if word.startswith(sound):
                word, stripped = word[len(sound) :], True
    return word


def _joined(words: list[str]) -> str:
    """Words joined by one space, none next to Han or kana (spacing is not a difference)."""
    out: list[str] = []
    for word in words:
        if out and not (_is_cjk(out[-1][-1]) or _is_cjk(word[0])):
            out.append(" ")
        out.append(word)
    return "".join(out)


def _is_cjk(ch: str) -> bool:
    return "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or ch >= "\U00020000"

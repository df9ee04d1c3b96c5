"""Is a new text a restatement of a stored one? The text decides, and only the text.

A restatement is the same text once case, spacing, punctuation and Unicode form
are normalised, or the same words in the same order apart from discourse fillers; a
difference in any other word (function words and prepositions included) or in word
order makes a different text. So no embedding is involved (cosine similarity cannot
tell "dinner at 8 pm" from "dinner at 10 pm", 0.99), and nothing is stemmed or set
aside but the fillers: "paper"/"papers", "on the Prince Consort Road"/"on Prince
Consort Road", "in a still rough state"/"still in a rough state" all differ.

Each text is reduced to one *canonical* string (``canonical``); two texts restate each
other exactly when these are equal, and ``restatement_key`` is its hash, so a write
finds every memory it restates with one indexed equality lookup. The canonical form:

* NFKC, except for characters tagged superscript, subscript or fraction ("10⁶" is not
  "106", "½" not "12"); full-width forms and ligatures ("ﬁ") are still folded;
* lower-cased (``str.lower``, not ``casefold``: "Maßen" and "Massen" are two words);
  emoji variation selectors dropped, curly apostrophes made straight;
* English contractions with one reading spelled out ("don't" = "do not", "I'm",
  "we're", "I've", "it'll"); "'s" and "'d" (is / has / possessive, had / would) are not;
* prose punctuation (``_PROSE``: . , ; : ! ? quotes, brackets, dashes, 、 。 ・ …) and
  spacing are word breaks; spacing next to Han or kana is dropped (these scripts write no
  spaces); any other punctuation is a word of its own, as symbols are ("C#" / "C",
  "5%" / "5", "R&D" / "R D", € vs $, °, emoji, −5 vs 5);
* a separator between two digits keeps the number one word ("1.2", "1,2", "1/2", "3-5",
  "10:30" all differ, and "1,000" differs from "1000": when in doubt, store); a period
  after a number and before a space or the end ("…is 5.") is punctuation;
* fillers (``FILLERS``) are dropped in a few places only. A *hesitation sound*
  (``_HESITATIONS``: "uhm", "äh", "euh", "э", "음", no word in any of the languages)
  wherever it stands alone, and "嗯" or "えーと" also at the start of a clause. A
  *discourse marker* (``_MARKERS``: "um", "oh", "ah", "actually", "in fact", "naja",
  "tja", "ну", "其实", "実は", "well") as a clause of its own set off by a comma, dash or
  ellipsis ("Well, …", "…, actually.", "Bob is, um, …"), except in mid-sentence before
  "and"/"or" ("Bob cooks fast, well, and cheaply": a list item). A filler that is also a
  content word in its language (``_CONTENT_FILLERS``: "bueno" good, "pues", "na", あの
  that, まあ, 그 that, 저기 there, 참 truly, 사실 fact) only in the discourse-marker place:
  set off at the start of the text or of a sentence (after . ! ? 。, or a line break after
  punctuation: one inside a clause is a wrapped line), or at the very end of one ("Bueno, …", "…, bueno."), never
  mid-sentence ("barato, bueno, y cercano" keeps it). Anywhere else all are words: "sings
  well", "well done", "um 15 Uhr", "あの人". "well" stays a marker mid-sentence because
  ", well," there is nearly always a hedge ("Bob is, well, sick"); the list-item case is
  the one natural counter-example found. Words such as "also" ("Bob, also, likes tea":
  too; a connective in German), "like", "so", "just", "really", "yes" are never fillers.
* a text made only of fillers keeps them ("Um." and "Well." differ), as every text keeps
  all its other words: "OK." and "Yes." differ.

Because fillers are recognised by their punctuation, two texts that differ only in the
commas around a filler word ("Well done" / "Well, done") are stored as two: the one place
where this module is stricter than plain normalisation (when in doubt, store).

Databases written before this rule carry ``restate_key`` values computed by an earlier
canonical form (before superscripts, "ß", non-prose punctuation, number separators and
content-word fillers were told apart), by an earlier function (a hash of numbers,
negations, symbols and stemmed content words) or, older still, their ``dup_key``. Writes
look a text's keys up and then decide with ``is_restatement`` on the two texts
(``memories.restates``), so an old row is never wrongly matched: at worst it is not found
and the new text is stored again, which is safe. The new key is the same hash as
``text.duplicate_key`` for a text without fillers, contractions, symbols, "ß" or CJK, so
rows keyed by their ``dup_key`` are mostly still found; rows keyed by the earlier
function are not found by single writes (bulk writes also match ``dup_key``, so they
still catch exact restatements of them).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from itertools import groupby
from typing import NamedTuple

_TRANSLATE = {ord(c): "'" for c in "\u2018\u2019\u02bc\u2032`\u00b4"} | {0xFE0E: None, 0xFE0F: None}
# Compatibility decompositions NFKC must not apply: they change the number or the word.
_KEPT_FORMS = ("<super>", "<sub>", "<fraction>")

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
# The punctuation of prose: a word break. Every other punctuation character (# % & @ * /
# \ § † ‡ • ‰ _ …) is a word. NFKC has already made full-width forms ("！", "（") ASCII.
_HYPHENS = "-\u2010\u2011\u2012\u2013"
_PROSE = frozenset(
    ".,;:!?¡¿…'\"«»‹›„‚“”‘’()[]{}"
    + _HYPHENS
    + "\u2014\u2015\u2e3a\u2e3b〜〰"
    + "、。・·‧「」『』【】〈〉《》〔〕〖〗〘〙〚〛〝〞〟"
    + "؟،؛।॥"
)
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x85\u2028\u2029")
# Between two digits these keep the number one word ("1/2", "3-5", "10:30", "1'000").
_NUMBER_JOINERS = frozenset(".,:/'") | frozenset(_HYPHENS)
# Punctuation that sets a filler off (NFKC has already turned "…" into "...", "，" into ",").
_PAUSE = re.compile(r"[,;、\u2013\u2014\-]|\.\.")
# Punctuation that ends a sentence ("！", "？", "｡" are "!", "?", "。" after NFKC).
_SENTENCE_END = re.compile(r"[.!?。\n]")
# A clause opening with one of these after a set-off marker makes the marker a list item.
_LIST_CONJUNCTIONS = frozenset("and or nor und oder et ou ni y e o u и или".split())

# Hesitation sounds: no word in any of the languages, dropped wherever they stand alone;
# those of Han and kana (no spaces) also at the start of a clause ("嗯我…", "えーと会議…").
_CJK_HESITATIONS = ("えーっと", "えーと", "えっと", "ええと", "あのー", "うーん", "嗯", "呃")
_HESITATIONS = frozenset(
    "uh uhm umm ummm erm hm hmm äh ähm öh öhm euh э ээ эм эмм 음 으음".split() + [*_CJK_HESITATIONS]
)
# Discourse fillers ("well", "actually" and their equivalents), dropped as a clause of their
# own set off by a pause. Left out on purpose: words that are also names, list items or
# pronouns set off by commas ("ben", "nun", "er", "那个"), answers ("yes", "ja", "да",
# "ok"), connectives ("also", "so", "donc", "alors") and hedges ("eigentlich", "basically").
_MARKERS = _HESITATIONS | frozenset("well actually oh ah um eh bah naja tja ну えー 実は 어 其实".split())
# Fillers that are content words too ("bueno" = good, "그" = that): dropped only set off at
# the start or the end of a sentence.
_CONTENT_FILLERS = frozenset("bueno pues na あの まあ 그 저기 참 사실".split())
# Public, with FILLER_PHRASES: the tests write sentences of every filler there is.
FILLERS = _MARKERS | _CONTENT_FILLERS
FILLER_PHRASES = frozenset(
    tuple(p.split()) for p in ("in fact", "en fait", "eh bien", "de hecho", "на самом деле", "вообще то")
)


class _Clause(NamedTuple):
    """The words between two runs of prose punctuation, and those runs ("" at either end)."""

    words: list[str]
    before: str
    after: str


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
    every = [word for clause in clauses for word in clause.words]
    return _joined(_kept_words(clauses) or every)


def _prepared(text: str) -> str:
    folded = _nfkc(text.translate(_TRANSLATE)).lower().translate(_TRANSLATE)
    folded = _IRREGULAR.sub(lambda m: _IRREGULAR_NOT[m[1]], folded)
    folded = _NOT.sub(r"\1 not", folded)
    folded = _AUXILIARY.sub(lambda m: next(f"{g} {s}" for g, s in zip(m.groups(), _SPELLED) if g), folded)
    return _MINUS.sub("\u2212", folded)


def _nfkc(text: str) -> str:
    """NFKC, leaving superscripts, subscripts and vulgar fractions as they are. Most texts
    are NFKC already (one C call says so), and skip the walk character by character."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    return "".join(
        "".join(run) if kept else unicodedata.normalize("NFKC", "".join(run))
        for kept, run in groupby(text, lambda ch: unicodedata.decomposition(ch).startswith(_KEPT_FORMS))
    )


def _clauses(text: str) -> list[_Clause]:
    """The text's words by clause (the runs between prose punctuation)."""
    clauses: list[_Clause] = []
    words: list[str] = []
    before = ""
    for is_mark, piece in _tokens(text) + [(True, "")]:
        if not is_mark:
            words.append(piece)
            continue
        if words:
            clauses.append(_Clause(words, before, piece))
            words = []
        before = piece
    return clauses


def _tokens(text: str) -> list[tuple[bool, str]]:
    """(is prose punctuation, text) pieces: words and runs of punctuation.

    Letters, digits and marks make words, and so does a separator between two digits
    ("1/2"); a symbol or a non-prose punctuation character is a word of its own; a hyphen
    or apostrophe inside a word ("well-known", "l'eau") breaks the word but not the
    clause, so the "well" of "well-known" is no filler. A line break after punctuation
    (or at the start) starts a sentence; inside a clause (a wrapped line) it is a space.
    """
    tokens: list[tuple[bool, str]] = []
    word: list[str] = []
    for i, ch in enumerate(text + " "):
        if unicodedata.category(ch)[0] in "LNM" or _in_number(text, i):
            word.append("-" if ch in _HYPHENS else ch)
            continue
        if word:
            tokens.append((False, "".join(word)))
            word = []
        if ch in _LINE_BREAKS:
            if not tokens or tokens[-1][0]:
                _add_mark(tokens, "\n")
        elif ch in _PROSE:
            if not _inside_word(text, i):
                _add_mark(tokens, ch)
        elif unicodedata.category(ch)[0] in "SP":
            tokens.append((False, ch))
    return tokens


def _add_mark(tokens: list[tuple[bool, str]], ch: str) -> None:
    if tokens and tokens[-1][0]:
        tokens[-1] = (True, tokens[-1][1] + ch)
    else:
        tokens.append((True, ch))


def _in_number(text: str, i: int) -> bool:
    """A separator between two digits: part of the number ("1.2", "1/2", "3-5", "9:40")."""
    return 0 < i < len(text) - 1 and text[i] in _NUMBER_JOINERS and text[i - 1].isdigit() and text[i + 1].isdigit()


def _inside_word(text: str, i: int) -> bool:
    """A hyphen or apostrophe between two letters or digits (an en dash there is a dash)."""
    if not 0 < i < len(text) - 1:
        return False
    return text[i] in "'-\u2010\u2011" and text[i - 1].isalnum() and text[i + 1].isalnum()


def _kept_words(clauses: list[_Clause]) -> list[str]:
    """The words of the clauses that are no filler, hesitation sounds aside."""
    kept: list[str] = []
    opening = False  # at the start of a sentence, or only fillers since it
    for i, clause in enumerate(clauses):
        opening = opening or i == 0 or bool(_SENTENCE_END.search(clause.before))
        following = clauses[i + 1].words[0] if i + 1 < len(clauses) else ""
        if _is_filler(clause, opening, following):
            continue
        opening = False
        kept.extend(_without_hesitations(clause.words))
    return kept


def _is_filler(clause: _Clause, opening: bool, following: str) -> bool:
    """A clause of fillers set off by a pause, in a place where it is one (see the module);
    ``following`` is the next clause's first word ("" at the end)."""
    words = clause.words
    if not _PAUSE.search(clause.before + clause.after):
        return False
    closing = not following or bool(_SENTENCE_END.search(clause.after))
    if all(w in _MARKERS for w in words) or tuple(words) in FILLER_PHRASES:
        return opening or closing or following not in _LIST_CONJUNCTIONS
    return all(w in FILLERS for w in words) and (opening or closing)


def _without_hesitations(words: list[str]) -> list[str]:
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

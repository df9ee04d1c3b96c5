"""The default model's tokenizer at a tenth of its memory, with the same token ids.

``tokenizers`` builds a byte trie of hash maps over the whole 250,002-piece vocabulary of
XLM-R when it loads ``tokenizer.json``: 281 MB resident, the largest single cost of a
loaded engine (issue 53; the onnxruntime session of the whole model is ~200 MB). Yet a
Unigram tokenization (Viterbi over the pieces that match the text) can only ever use
pieces that occur inside the text's words. So the vocabulary is kept here as a plain
dict (~40 MB), and each call hands ``tokenizers`` a Unigram model of just the pieces its
texts contain, with their scores, then maps the local ids back to the vocabulary's.

Everything else is ``tokenizers``' own, loaded from the same ``tokenizer.json``: the
normaliser, the pre-tokeniser (Metaspace: a piece never crosses a word), the special
tokens, ``<s> $A </s>``, truncation and padding set as fastembed sets them. The Viterbi
search sees the same candidates with the same scores in the same order, and the unknown
piece's score (the lowest score less 10) stays the same because the lowest-scoring piece
is always in the subset: the ids are identical (a test compares them with the full
tokenizer's; the vectors are equal to fastembed's own load).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["SubsetUnigramTokenizer", "Tokens"]

_DECODED_KEPT = 20_000  # pieces kept decoded between calls (~2 MB); most texts reuse the same


class Tokens(NamedTuple):
    """One text's encoding, as fastembed reads it: ``ids`` and ``attention_mask``."""

    ids: list[int]
    attention_mask: list[int]


class SubsetUnigramTokenizer:
    """``encode_batch`` as ``tokenizers.Tokenizer`` answers it (``ids``, ``attention_mask``),
    for a Unigram ``tokenizer.json``; not thread-safe (the embedder's lock serialises calls)."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        spec = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        vocab: list[list[Any]] = spec["model"]["vocab"]
        if spec["model"].get("type") != "Unigram" or spec["model"].get("byte_fallback"):
            raise ValueError("not a Unigram tokenizer without byte fallback")
        self._vocab = _CompactVocabulary([piece for piece, _ in vocab])
        self._scores = array("d", (float(score) for _, score in vocab))
        ids = {piece: i for i, (piece, _) in enumerate(vocab) if piece in {t["content"] for t in spec["added_tokens"]}}
        unk = int(spec["model"]["unk_id"])
        pad = config["pad_token"]
        lowest = min(range(len(vocab)), key=self._scores.__getitem__)
        # Fixed local ids: the added (special) tokens first, as the ids ``tokenizers`` gives
        # them at load are looked up in the model's vocabulary; then the unknown piece and
        # the lowest-scoring one. Each call appends its texts' pieces after these.
        fixed = [ids[t["content"]] for t in spec["added_tokens"] if t["content"] in ids]
        self._fixed = list(dict.fromkeys([*fixed, unk, lowest]))
        spec["model"]["vocab"] = [vocab[i] for i in self._fixed]
        spec["model"]["unk_id"] = self._fixed.index(unk)
        for token in spec["added_tokens"]:
            if token["content"] in ids:
                token["id"] = self._fixed.index(ids[token["content"]])
        self._unk_local = self._fixed.index(unk)
        self._specials = re.compile("|".join(re.escape(t["content"]) for t in spec["added_tokens"]))
        self._tokenizer = Tokenizer.from_str(json.dumps(spec))
        # As fastembed's load_tokenizer sets them for this model's files.
        self._tokenizer.enable_truncation(max_length=int(config["model_max_length"]), direction="right")
        self._tokenizer.enable_padding(
            direction=config.get("padding_side", "right"), pad_id=ids[pad], pad_type_id=0, pad_token=pad
        )

    def encode_batch(self, texts: Sequence[str]) -> list[Tokens]:
        from tokenizers.models import Unigram

        local = list(self._fixed)
        seen = set(local)
        for piece_id in self._pieces_in(texts):
            if piece_id not in seen:
                seen.add(piece_id)
                local.append(piece_id)
        self._tokenizer.model = Unigram(
            [(self._vocab.piece(i), self._scores[i]) for i in local], unk_id=self._unk_local, byte_fallback=False
        )
        return [
            Tokens([local[i] for i in encoding.ids], list(encoding.attention_mask))
            for encoding in self._tokenizer.encode_batch(list(texts))
        ]

    def _pieces_in(self, texts: Sequence[str]) -> list[int]:
        """The ids of every vocabulary piece inside a word of ``texts``: the words of each
        text, and of each stretch between special tokens (which are split off before
        normalisation), normalised and pre-tokenised as the tokenizer does it."""
        normalizer, pre_tokenizer = self._tokenizer.normalizer, self._tokenizer.pre_tokenizer
        words: set[str] = set()
        for text in texts:
            for part in {text, *self._specials.split(text)}:
                normalized = normalizer.normalize_str(part) if normalizer is not None else part
                if pre_tokenizer is None:
                    words.add(normalized)
                else:
                    words.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalized))
        longest = self._vocab.longest
        return self._vocab.ids_of(
            [
                word[a:b]
                for word in words
                for a in range(len(word))
                for b in range(a + 1, min(len(word), a + longest) + 1)
            ]
        )


class _CompactVocabulary:
    """The pieces as one UTF-8 blob and a sorted table of their string hashes (~10 MB
    where a dict of 250k strings costs ~90 MB): which strings are pieces, and their ids."""

    def __init__(self, pieces: list[str]) -> None:
        import numpy as np

        encoded = [piece.encode("utf-8") for piece in pieces]
        self._blob = b"".join(encoded)
        self._ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
        hashes = np.fromiter((hash(piece) for piece in pieces), dtype=np.int64, count=len(pieces))
        self._order = np.argsort(hashes, kind="stable").astype(np.int32)
        self._hashes = hashes[self._order]
        self.longest = max(len(piece) for piece in pieces)
        self._decoded: dict[int, str] = {}  # the pieces recent texts used, as text

    def piece(self, piece_id: int) -> str:
        known = self._decoded.get(piece_id)
        if known is None:
            start = int(self._ends[piece_id - 1]) if piece_id else 0
            known = self._blob[start : int(self._ends[piece_id])].decode("utf-8")
            if len(self._decoded) >= _DECODED_KEPT:
                self._decoded.clear()
            self._decoded[piece_id] = known
        return known

    def ids_of(self, strings: list[str]) -> list[int]:
        """The ids of those ``strings`` that are pieces (a hash match is checked by text)."""
        import numpy as np

        if not strings:
            return []
        hashes = np.fromiter(map(hash, strings), dtype=np.int64, count=len(strings))
        found: list[int] = []
        lo = np.searchsorted(self._hashes, hashes, side="left")
        hi = np.searchsorted(self._hashes, hashes, side="right")
        for k in np.flatnonzero(hi > lo):
            for slot in range(int(lo[k]), int(hi[k])):
                piece_id = int(self._order[slot])
                if self.piece(piece_id) == strings[k]:
                    found.append(piece_id)
        return found

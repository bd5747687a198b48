"""Object detectors behind one small interface: the packaged MobileNet-SSD (VOC-20) or a user ONNX model.

- ``mobilenet-ssd``: the Caffe model and prototxt carried by the ``cam2text`` wheel, run with
  ``cv2.dnn`` at 300x300 (input scaled to [-1, 1]); 20 VOC classes.
- a path to an ONNX file (``senses.object_detector``) with a class-names file (``senses.object_classes``,
  one name per line): a YOLO-style export with one output of ``[1, 4 + classes, boxes]`` (v8 and later)
  or ``[1, boxes, 5 + classes]`` (v5, with objectness), boxes as centre x, centre y, width, height in
  input pixels. The image is letterboxed to ``object_input_size`` square, RGB scaled to [0, 1].

A missing or malformed file raises :class:`~m3agent.errors.ModelError` saying which file and why,
so the object stage is recorded as skipped for the clip.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from m3agent.errors import ModelError

VOC = ("background", "airplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
       "dining table", "dog", "horse", "motorbike", "person", "potted plant", "sheep", "sofa", "train", "tv monitor")
NMS_IOU = 0.45


@dataclass(frozen=True, slots=True)
class Detection:
    """One object in one image: class name, score, and box (x1, y1, x2, y2) in image pixels."""

    label: str
    score: float
    box: tuple[float, float, float, float]


class ObjectDetector(Protocol):
    """Finds objects in one RGB ``uint8`` image; returns detections at or above ``min_score``."""

    def detect(self, rgb: Any, min_score: float) -> list[Detection]: ...


class MobileNetSsd:
    """MobileNet-SSD (VOC) through OpenCV's DNN module."""

    def __init__(self, prototxt: Path, model: Path) -> None:
        import cv2

        try:
            self._net = cv2.dnn.readNetFromCaffe(str(prototxt), str(model))
        except cv2.error as exc:
            raise ModelError(f"cannot load MobileNet-SSD from {model}: {exc}") from None
        self._lock = threading.Lock()

    def detect(self, rgb: Any, min_score: float) -> list[Detection]:
        import cv2

        h, w = rgb.shape[:2]
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        blob = cv2.dnn.blobFromImage(cv2.resize(bgr, (300, 300)), 1 / 127.5, (300, 300), 127.5)
        with self._lock:
            self._net.setInput(blob)
            rows = self._net.forward()[0, 0]
        out = []
        for _, cls, score, x1, y1, x2, y2 in rows.tolist():
            if score >= min_score and 0 < int(cls) < len(VOC):
                box = (max(0.0, x1 * w), max(0.0, y1 * h), min(float(w), x2 * w), min(float(h), y2 * h))
                out.append(Detection(VOC[int(cls)], float(score), box))
        return out


class OnnxYolo:
    """A user-supplied YOLO-style ONNX detector (see the module docstring for the expected output)."""

    def __init__(self, model: Path, classes: Path, size: int) -> None:
        import onnxruntime as ort

        self.names = read_class_names(classes)
        if not model.is_file():
            raise ModelError(f"object detector {model} does not exist", hint="fix senses.object_detector")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for files that are not ONNX
            raise ModelError(f"{model} is not a loadable ONNX model: {exc}",
                             hint="export the detector to ONNX (opset 12 or later) or fix the path") from None
        self._input = self._session.get_inputs()[0].name
        self._size = size
        self._lock = threading.Lock()

    def detect(self, rgb: Any, min_score: float) -> list[Detection]:
        import numpy as np

        image, scale, (dx, dy) = _letterbox(rgb, self._size)
        with self._lock:
            raw = self._session.run(None, {self._input: image})[0]
        boxes, scores, classes = _decode(np.asarray(raw), len(self.names))
        keep = _nms(boxes, scores, min_score)
        h, w = rgb.shape[:2]
        out = []
        for i in keep:
            cx, cy, bw, bh = boxes[i]
            x1, y1 = (cx - bw / 2 - dx) / scale, (cy - bh / 2 - dy) / scale
            x2, y2 = (cx + bw / 2 - dx) / scale, (cy + bh / 2 - dy) / scale
            box = (max(0.0, float(x1)), max(0.0, float(y1)), min(float(w), float(x2)), min(float(h), float(y2)))
            out.append(Detection(self.names[int(classes[i])], float(scores[i]), box))
        return out


def read_class_names(path: Path) -> tuple[str, ...]:
    """Class names of a user detector, one per non-empty line."""
    try:
        names = tuple(ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip())
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read the class-names file {path}: {exc}",
                         hint="set senses.object_classes to a text file with one class name per line") from None
    if not names:
        raise ModelError(f"the class-names file {path} lists no classes", hint="one class name per line")
    return names


def _letterbox(rgb: Any, size: int) -> tuple[Any, float, tuple[float, float]]:
    import cv2
    import numpy as np

    h, w = rgb.shape[:2]
    scale = size / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = np.full((size, size, 3), 114, np.uint8)
    dx, dy = (size - nw) // 2, (size - nh) // 2
    canvas[dy:dy + nh, dx:dx + nw] = cv2.resize(rgb, (nw, nh))
    return canvas.transpose(2, 0, 1)[None].astype(np.float32) / 255.0, scale, (float(dx), float(dy))


def _decode(raw: Any, classes: int) -> tuple[Any, Any, Any]:
    """(boxes cx,cy,w,h; best score; best class) from a v8 ``[1, 4+C, N]`` or v5 ``[1, N, 5+C]`` output."""
    if raw.ndim != 3 or raw.shape[0] != 1:
        raise ModelError(f"the object detector output has shape {list(raw.shape)}, expected [1, 4+C, N] or "
                         "[1, N, 5+C]")
    rows = raw[0]
    if rows.shape[0] == 4 + classes:
        rows = rows.T
        class_scores = rows[:, 4:]
    elif rows.shape[1] == 5 + classes:
        class_scores = rows[:, 5:] * rows[:, 4:5]
    elif rows.shape[1] == 4 + classes:
        class_scores = rows[:, 4:]
    else:
        raise ModelError(f"the object detector outputs {list(raw.shape)} but the class-names file lists "
                         f"{classes} classes", hint="use the class-names file the model was trained with")
    best = class_scores.argmax(1)
    return rows[:, :4], class_scores.max(1), best


def _nms(boxes: Any, scores: Any, min_score: float) -> list[int]:
    import cv2

    rects = [[float(cx - w / 2), float(cy - h / 2), float(w), float(h)] for cx, cy, w, h in boxes.tolist()]
    keep = cv2.dnn.NMSBoxes(rects, scores.astype(float).tolist(), min_score, NMS_IOU)
    return [int(i) for i in (keep.flatten() if hasattr(keep, "flatten") else keep)]


@functools.lru_cache(maxsize=4)
def object_detector(spec: str, classes: Path | None, size: int) -> ObjectDetector:
    """The detector named by ``spec`` (``mobilenet-ssd`` or an ONNX path), loaded once per process."""
    if spec == "mobilenet-ssd":
        from m3agent.perception.scene.model_files import SSD, SSD_MODEL, SSD_PROTOTXT, packaged_file

        return MobileNetSsd(packaged_file(SSD, SSD_PROTOTXT), packaged_file(SSD, SSD_MODEL))
    if classes is None:
        raise ModelError(f"the object detector {spec} needs a class-names file",
                         hint="set senses.object_classes (one class name per line)")
    return OnnxYolo(Path(spec).expanduser(), Path(classes).expanduser(), size)

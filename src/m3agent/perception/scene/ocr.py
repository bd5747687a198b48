"""PP-OCRv4 text detection and recognition with ONNX Runtime (models from ``rapidocr-onnxruntime``).

Detection (DBNet) gives a text-probability map; lines are its connected regions above
``PIXEL_THRESHOLD`` with a mean probability of at least ``BOX_THRESHOLD``, each widened by the
DB "unclip" margin (area x ``UNCLIP`` / perimeter) because the network predicts shrunken regions.
Recognition (SVTR, CTC) reads each line crop at height 48; its character list is stored in the
model's metadata, with the CTC blank first and a space last. Images are BGR scaled to [-1, 1], as
the models were trained. Both sessions run on one thread (the stages already run side by side).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from m3agent.errors import ModelError

Image = Any  # a numpy uint8 image (BGR) or float32 array, as OpenCV takes them
PIXEL_THRESHOLD = 0.3
BOX_THRESHOLD = 0.5
UNCLIP = 1.6
REC_HEIGHT = 48
MIN_BOX_PX = 3
MAX_UPSCALE = 2.0  # tiny frames are enlarged at most this much for detection (cost grows with the area)


class OcrModel:
    """Detection + recognition sessions; :meth:`detect` and :meth:`recognize` are thread-safe (one lock)."""

    def __init__(self, det_path: str, rec_path: str) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self._det = ort.InferenceSession(det_path, options, providers=["CPUExecutionProvider"])
            self._rec = ort.InferenceSession(rec_path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise ModelError(f"cannot load the OCR models: {exc}") from None
        chars = self._rec.get_modelmeta().custom_metadata_map.get("character", "")
        if not chars:
            raise ModelError(f"{rec_path} has no character list in its metadata")
        self._chars = ["", *chars.splitlines(), " "]
        self._lock = threading.Lock()

    def detect(self, bgr: Image, side: int) -> list[tuple[Image, float]]:
        """Text regions of ``bgr`` as (4 corners in image pixels, score), the image scaled so its
        longer side is ``side`` (at most ``MAX_UPSCALE`` times larger; rounded to multiples of 32)."""
        import cv2
        import numpy as np

        h, w = bgr.shape[:2]
        scale = min(side / max(h, w), MAX_UPSCALE)
        nh, nw = max(32, round(h * scale / 32) * 32), max(32, round(w * scale / 32) * 32)
        x = (cv2.resize(bgr, (nw, nh)).astype(np.float32) / 127.5 - 1.0).transpose(2, 0, 1)[None]
        with self._lock:
            prob = self._det.run(None, {"x": x})[0][0, 0]
        return _regions(prob, (w / nw, h / nh))

    def recognize(self, crops: list[Image]) -> list[tuple[str, float]]:
        """Text and mean character probability of each BGR line crop (same order).

        Each crop is read on its own: a batch is padded to its widest line, and the padding both cost time
        (the debate's 112 lines: 5.9 s in batches of 6 sorted by width, 10 s as the stage batched them, 4.0 s
        one by one, on an AVX2 EPYC) and changed what the network read in the narrower lines.
        """
        import cv2
        import numpy as np

        out = []
        for crop in crops:
            width = max(8, int(np.ceil(REC_HEIGHT * crop.shape[1] / max(1, crop.shape[0]))))
            line = cv2.resize(crop, (width, REC_HEIGHT)).astype(np.float32) / 127.5 - 1.0
            with self._lock:
                probs = self._rec.run(None, {"x": line.transpose(2, 0, 1)[None]})[0]
            out.append(self._ctc(probs[0]))
        return out

    def _ctc(self, probs: Any) -> tuple[str, float]:
        best = probs.argmax(1)
        chars, scores, previous = [], [], -1
        for index, score in zip(best.tolist(), probs.max(1).tolist(), strict=True):
            if index != previous and index != 0 and index < len(self._chars):
                chars.append(self._chars[index])
                scores.append(score)
            previous = index
        text = "".join(chars).strip()
        return text, (sum(scores) / len(scores) if scores and text else 0.0)


def _regions(prob: Any, scale: tuple[float, float]) -> list[tuple[Image, float]]:
    import cv2
    import numpy as np

    mask = cv2.dilate((prob > PIXEL_THRESHOLD).astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(mask, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    out = []
    for contour in contours:
        x, y, w, h = cv2.boundingRect(contour)
        if min(w, h) < MIN_BOX_PX:
            continue
        inside = mask[y:y + h, x:x + w] > 0
        score = float(prob[y:y + h, x:x + w][inside].mean())
        if score < BOX_THRESHOLD:
            continue
        (cx, cy), (rw, rh), angle = cv2.minAreaRect(contour)
        margin = rw * rh * UNCLIP / max(1e-6, 2 * (rw + rh))
        corners: Any = cv2.boxPoints(((cx, cy), (rw + 2 * margin, rh + 2 * margin), angle))
        corners[:, 0] *= scale[0]
        corners[:, 1] *= scale[1]
        out.append((corners.astype(np.float32), score))
    return out


def line_crop(bgr: Image, corners: Image) -> Image:
    """The region inside ``corners`` warped upright (reading direction left to right)."""
    import cv2
    import numpy as np

    pts: Any = np.asarray(corners, np.float32)
    sums, diffs = pts.sum(1), np.diff(pts, axis=1)[:, 0]
    tl, br = pts[int(np.argmin(sums))], pts[int(np.argmax(sums))]
    tr, bl = pts[int(np.argmin(diffs))], pts[int(np.argmax(diffs))]
    width = max(1, int(max(np.linalg.norm(tr - tl), np.linalg.norm(br - bl))))
    height = max(1, int(max(np.linalg.norm(bl - tl), np.linalg.norm(br - tr))))
    src: Any = np.array([tl, tr, br, bl], np.float32)
    dst: Any = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    crop: Any = cv2.warpPerspective(bgr, cv2.getPerspectiveTransform(src, dst), (width, height),
                                    borderMode=cv2.BORDER_REPLICATE)
    if height > 1.5 * width:  # vertical line: read it rotated
        crop = np.ascontiguousarray(np.rot90(crop))
    return crop


@functools.lru_cache(maxsize=1)
def ocr_model() -> OcrModel:
    """The process-wide OCR model (loaded on first use from the installed wheel)."""
    from m3agent.perception.scene.model_files import OCR, OCR_DET, OCR_REC, packaged_file

    return OcrModel(str(packaged_file(OCR, OCR_DET)), str(packaged_file(OCR, OCR_REC)))

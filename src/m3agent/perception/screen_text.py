"""On-screen text of a clip: lines read on changed frames and followed over time.

Reading every sampled frame would cost more than the rest of perception, so detection runs on a
frame only when (a) a shot starts, (b) the pixels under a line being followed changed (a caption
was replaced) or strokes appeared where the frame was flat and are still there one frame later
(text stays; a moving camera's texture moves on), at most once per half ``text_interval_s``, or
(c) ``text_interval_s`` passed without a detection and the view changed since
(:func:`~m3agent.perception.shots.same_view`), or ``STALE_PERIODS`` intervals passed in any case.
On the 3-minute benchmark episode these rules cut detections from 151 (every interval, strokes
counted at once) to 108, with the same caption recall; new text is read up to one frame later. A
detected line whose pixels did not change since it was last read keeps its text without running
recognition again. Lines are followed by position and text; each followed line becomes one
:class:`~m3agent.domain.ScreenText` with the span from its first to its last sighting; spaces that
small text lost in recognition are put back (:func:`~m3agent.perception.words.respace`). Lines that
read like noise (too few common words, e.g. partly hidden background lettering:
:func:`~m3agent.perception.words.readable`) or are shorter than four characters are dropped, so a
name alone on screen is missed rather than noise remembered. Lines of one text that break off and
come back within ``REJOIN_PERIODS`` detection intervals in the clip are joined.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import BBox, Frame, ScreenText, Shot
from m3agent.perception.words import readable, respace

if TYPE_CHECKING:
    from m3agent.perception.ocr import OcrModel
    from m3agent.settings import SensesSettings, Settings

Image = Any  # a numpy uint8 image (BGR or grey) or float32 array, as OpenCV takes them
CHANGE_LEVEL = 12.0  # mean absolute grey difference (0-255) of a line's pixels that counts as changed
ROW_CELLS = 8  # cells in one row of the coarse grid, flat before, that gained strokes: a line of text appeared
FLAT = 8.0  # mean stroke strength of a coarse cell without text
EDGE_GRID = (64, 36)
SLACK_S = 0.1  # sampled frames are not exactly on the half second
SAME_BOX_IOU = 0.5
SAME_TEXT = 0.8
MIN_CHARS = 4
REJOIN_PERIODS = 2.0
THUMB = (96, 16)
STALE_PERIODS = 3.0


@dataclass
class _Line:
    box: tuple[float, float, float, float]
    start: float
    last: float
    thumb: Any
    readings: Counter[str] = field(default_factory=Counter)
    scores: list[float] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.readings.most_common(1)[0][0]

    def seen(self, time_s: float, text: str, score: float) -> None:
        self.last = time_s
        self.readings[text] += 1
        self.scores.append(score)


def read_screen_text(frames: Sequence[Frame], shots: Sequence[Shot], settings: Settings) -> tuple[ScreenText, ...]:
    """Followed text lines of ``frames`` (RGB) in order of appearance."""
    from m3agent.perception.ocr import ocr_model

    reader = _Reader(ocr_model(), settings.senses)
    pending = sorted(s.start_s for s in shots)
    for index, frame in enumerate(frames):
        shot_start = index == 0
        while pending and pending[0] <= frame.time_s + 1e-6:
            pending.pop(0)
            shot_start = True
        reader.add(frame, shot_start)
    return reader.finish()


class _Reader:
    def __init__(self, model: OcrModel, cfg: SensesSettings) -> None:
        self.model, self.cfg = model, cfg
        self.active: list[_Line] = []
        self.closed: list[_Line] = []
        self.last_detect = float("-inf")
        self.edges: Any = None
        self.view: Any = None
        self.gained: Any = None  # cells that gained strokes on the previous frame (text must stay to count)

    def add(self, frame: Frame, shot_start: bool) -> None:
        from m3agent.perception.shots import same_view, signature

        bgr, grey = _images(frame.image)
        t = frame.time_s
        changed = [line for line in self.active if _changed(line.thumb, _thumb(grey, line.box))]
        edges, view = _edges(grey), signature(frame.image)
        gained = _gained(self.edges, edges) if self.edges is not None else None
        appeared = gained is not None and self.gained is not None and _row_of_cells(gained & self.gained)
        self.gained = gained
        since = t - self.last_detect + SLACK_S
        interval = self.cfg.text_interval_s
        periodic = since >= interval and (not same_view(self.view, view) or since >= STALE_PERIODS * interval)
        due = shot_start or periodic or ((changed or appeared) and since >= interval / 2)
        if not due:
            for line in self.active:
                if line not in changed:
                    line.last = t
            return
        self.last_detect, self.edges, self.view, self.gained = t, edges, view, None
        self._detect(bgr, grey, t)

    def _detect(self, bgr: Image, grey: Image, t: float) -> None:
        from m3agent.perception.ocr import line_crop

        found = self.model.detect(bgr, self.cfg.text_side)
        kept: list[_Line] = []
        to_read: list[tuple[tuple[float, float, float, float], Any, Any]] = []
        for corners, _ in found:
            box = _box(corners, bgr.shape)
            thumb = _thumb(grey, box)
            same = next((ln for ln in self.active if ln not in kept and _iou(ln.box, box) >= SAME_BOX_IOU
                         and not _changed(ln.thumb, thumb)), None)
            if same is not None:
                same.seen(t, same.text, same.scores[-1])
                kept.append(same)
            else:
                to_read.append((box, thumb, line_crop(bgr, corners)))
        texts = self.model.recognize([crop for _, _, crop in to_read]) if to_read else []
        for (box, thumb, _), (text, score) in zip(to_read, texts, strict=True):
            if score >= self.cfg.text_min_confidence and any(c.isalnum() for c in text):
                kept.append(self._follow(box, thumb, respace(text), score, t, kept))
        self.closed += [ln for ln in self.active if ln not in kept]
        self.active = kept

    def _follow(self, box: tuple[float, float, float, float], thumb: Any, text: str, score: float, t: float,
                kept: list[_Line]) -> _Line:
        for line in self.active:
            if line not in kept and _iou(line.box, box) >= 0.3 and _similar(line.text, text):
                line.seen(t, text, score)
                line.box, line.thumb = box, thumb
                return line
        line = _Line(box=box, start=t, last=t, thumb=thumb)
        line.seen(t, text, score)
        return line

    def finish(self) -> tuple[ScreenText, ...]:
        lines = _rejoined(sorted(self.closed + self.active, key=lambda ln: ln.start),
                          REJOIN_PERIODS * self.cfg.text_interval_s)
        out = []
        for line in sorted(lines, key=lambda ln: (ln.start, ln.box[1])):
            confidence = sum(line.scores) / len(line.scores)
            if sum(c.isalnum() for c in line.text) < MIN_CHARS or not readable(line.text):
                continue
            x1, y1, x2, y2 = line.box
            out.append(ScreenText(text=line.text, start_s=line.start, end_s=line.last,
                                  confidence=round(confidence, 3), bbox=BBox(x1, y1, x2, y2),
                                  sightings=len(line.scores)))
        return tuple(out)


def _rejoined(lines: list[_Line], gap: float) -> list[_Line]:
    """Lines in start order, a line joined into an earlier one of the same text that ended at most ``gap`` before."""
    out: list[_Line] = []
    for line in lines:
        same = next((o for o in reversed(out) if o.text.casefold() == line.text.casefold()
                     and 0 <= line.start - o.last <= gap), None)
        if same is None:
            out.append(line)
            continue
        same.last = max(same.last, line.last)
        same.readings.update(line.readings)
        same.scores += line.scores
    return out


def _images(image: Any) -> tuple[Image, Image]:
    import cv2
    import numpy as np

    rgb = np.asarray(image)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or min(rgb.shape[:2]) < 8:
        raise ValueError(f"expected an RGB uint8 frame, got {rgb.dtype} {rgb.shape}")
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def _box(corners: Any, shape: tuple[int, ...]) -> tuple[float, float, float, float]:
    h, w = shape[:2]
    xs, ys = corners[:, 0], corners[:, 1]
    return (max(0.0, float(xs.min())), max(0.0, float(ys.min())), min(float(w), float(xs.max())),
            min(float(h), float(ys.max())))


def _thumb(grey: Image, box: tuple[float, float, float, float]) -> Any:
    import cv2
    import numpy as np

    x1, y1, x2, y2 = (round(v) for v in box)
    region = grey[y1:max(y2, y1 + 1), x1:max(x2, x1 + 1)]
    if region.size == 0:
        return np.zeros(THUMB[::-1], np.float32)
    return cv2.resize(region, THUMB, interpolation=cv2.INTER_AREA).astype(np.float32)


def _changed(before: Any, after: Any) -> bool:
    """Mean grey difference above ``CHANGE_LEVEL``."""
    import numpy as np

    return bool(np.abs(before - after).mean() > CHANGE_LEVEL)


def _gained(before: Any, after: Any) -> Any:
    """Cells of the coarse grid that were flat in ``before`` and hold strokes in ``after``."""
    return (before < FLAT) & (after - before > CHANGE_LEVEL)


def _row_of_cells(cells: Any) -> bool:
    """Whether a row of the grid has ``ROW_CELLS`` marked cells: text appears as a wide line on a flat
    band or box, while a moving head or hand changes cells along a contour, few per row."""
    return bool(cells.sum(axis=1).max() >= ROW_CELLS)


def _edges(grey: Image) -> Any:
    """Coarse horizontal-edge strength (text is dense in vertical strokes), one cell per ~1/64 of the width."""
    import cv2
    import numpy as np

    strokes = np.abs(cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3))
    return cv2.resize(strokes, EDGE_GRID, interpolation=cv2.INTER_AREA)


def _iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _similar(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio() >= SAME_TEXT

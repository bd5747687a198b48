"""On-screen text of a clip: lines read on changed frames and followed over time.

Reading every sampled frame would cost more than the rest of perception, so detection runs on a
frame only when (a) a shot starts, (b) the pixels under a line being followed changed (a caption
was replaced) or strokes appeared where the frame was flat and are still there one frame later
(text stays; a moving camera's texture moves on), at most once per half ``text_interval_s``, or
(c) ``text_interval_s`` passed without a detection and the view changed since
(:func:`~m3agent.perception.scene.shots.same_view`), or ``STALE_PERIODS`` intervals passed in any case.
On the 3-minute benchmark episode these rules cut detections from 151 (every interval, strokes
counted at once) to 108, with the same caption recall; new text is read up to one frame later. A
detected line whose pixels did not change since it was last read keeps its text without running
recognition again; so does a box read and rejected at the last detection (too unsure, no letters), which
stays rejected: on the debate 62 of 108 reads were the backdrop's lettering read again and rejected
again. Lines are followed by position and text; spaces that small text lost in recognition are put back
(:func:`~m3agent.perception.scene.words.respace`).

Each followed line is one reading; :func:`screen_lines` turns the readings into one
:class:`~m3agent.domain.ScreenText` per text worth remembering. The readings of one text in one shot
(read again, or broken off and back) become one line with the joined span; lines that appeared and
went together side by side or stacked ("PBS" "NEWS" "HOUR") become one line; a line contained in a
longer line read in the same shot at about the same time is folded into it. A quality floor then
keeps lines of words (too few common words, e.g. partly hidden background lettering, fails
:func:`~m3agent.perception.scene.words.readable`) of at least four characters that were read by several
detections, read cleanly, or are a sentence, so a name glimpsed once is missed rather than noise
remembered. On the shared videos and the 3-minute benchmark episode this keeps all 21 captions and 7
signs and no fragment, where 45 lines with 17 fragments (pieces of the debate's backdrop lettering, the
PBS logo as "NEWS" and "HOUR") were kept before (docs/benchmarks.md, Perception: on-screen text;
bench/screen_text_quality.py).
"""

from __future__ import annotations

import bisect
import difflib
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from m3agent.domain import BBox, Frame, ScreenText, Shot
from m3agent.perception.scene.words import common_words, readable, respace

if TYPE_CHECKING:
    from m3agent.perception.scene.ocr import OcrModel
    from m3agent.settings import SensesSettings

Image = Any  # a numpy uint8 image (BGR or grey) or float32 array, as OpenCV takes them
CHANGE_LEVEL = 12.0  # mean absolute grey difference (0-255) of a line's pixels that counts as changed
ROW_CELLS = 8  # cells in one row of the coarse grid, flat before, that gained strokes: a line of text appeared
FLAT = 8.0  # mean stroke strength of a coarse cell without text
EDGE_GRID = (64, 36)
SLACK_S = 0.1  # sampled frames are not exactly on the half second
SAME_BOX_IOU = 0.5
SAME_TEXT = 0.8
MIN_CHARS = 4
REJOIN_PERIODS = 2.0  # a line comes back across a cut at most this many detection intervals after it ended
SAME_LINE = 0.9  # letter similarity of two readings of one text (distinct debate captions: 0.49 at most)
PERSISTENT = 3  # detections reading a line that show it stays on screen
PERSISTENT_CONFIDENCE = 0.95  # a line on screen that long reads this cleanly (signs: 0.972+, hidden lettering: 0.915-)
SURE = 0.98  # mean character probability of a clean read (hidden-lettering fragments: 0.97 at most)
SENTENCE_WORDS = 4  # common words that make a line read once a caption rather than a glimpse of lettering
SENTENCE_WORD_LETTERS = 2  # ...each of 2+ letters: a stray stroke reads as "i" or "a"
TOGETHER = 0.6  # time overlap (of the union) of lines shown together
ROW_OVERLAP = 0.5  # vertical overlap (of the lower line's height) of two lines on one row
ROW_GAP = 1.0  # letter heights between the words of one row that detection split
STACK_GAP = 0.5  # letter heights between stacked lines of one block
OVERLAP_PX = 0.5  # letter heights by which the boxes of neighbouring words may overlap (the detector's margin)
SAME_HEIGHT = 0.6  # letter height ratio of lines of one block
THUMB = (96, 16)
STALE_PERIODS = 3.0


@dataclass(frozen=True, slots=True)
class _Box:
    """A detected text box and its pixels (a small grey thumbnail)."""

    box: tuple[float, float, float, float]
    thumb: Any

    def same_as(self, box: tuple[float, float, float, float], thumb: Any) -> bool:
        """The same place with the same pixels: reading it again would read the same."""
        return _iou(self.box, box) >= SAME_BOX_IOU and not _changed(thumb, self.thumb)


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

    def reading(self) -> ScreenText:
        """The line as read: its most common text, first to last sighting, mean confidence, last box."""
        x1, y1, x2, y2 = self.box
        return ScreenText(text=self.text, start_s=self.start, end_s=self.last,
                          confidence=sum(self.scores) / len(self.scores), bbox=BBox(x1, y1, x2, y2),
                          sightings=len(self.scores))


def read_screen_text(frames: Sequence[Frame], shots: Sequence[Shot], senses: SensesSettings) -> tuple[ScreenText, ...]:
    """Followed text lines of ``frames`` (RGB) in order of appearance."""
    from m3agent.perception.scene.ocr import ocr_model

    reader = _Reader(ocr_model(), senses)
    pending = sorted(s.start_s for s in shots)
    for index, frame in enumerate(frames):
        shot_start = index == 0
        while pending and pending[0] <= frame.time_s + 1e-6:
            pending.pop(0)
            shot_start = True
        reader.add(frame, shot_start)
    return reader.finish(shots)


class _Reader:
    def __init__(self, model: OcrModel, cfg: SensesSettings) -> None:
        self.model, self.cfg = model, cfg
        self.active: list[_Line] = []
        self.closed: list[_Line] = []
        self.rejected: list[_Box] = []  # boxes read and rejected at the last detection, with their pixels
        self.last_detect = float("-inf")
        self.edges: Any = None
        self.view: Any = None
        self.gained: Any = None  # cells that gained strokes on the previous frame (text must stay to count)

    def add(self, frame: Frame, shot_start: bool) -> None:
        from m3agent.perception.scene.shots import same_view, signature

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
        from m3agent.perception.scene.ocr import line_crop

        found = self.model.detect(bgr, self.cfg.text_side)
        kept: list[_Line] = []
        rejected: list[_Box] = []
        to_read: list[tuple[_Box, Any]] = []
        for corners, _ in found:
            box = _box(corners, bgr.shape)
            seen = _Box(box, _thumb(grey, box))
            same = next((ln for ln in self.active if ln not in kept and seen.same_as(ln.box, ln.thumb)), None)
            if same is not None:
                same.seen(t, same.text, same.scores[-1])
                kept.append(same)
            elif any(seen.same_as(old.box, old.thumb) for old in self.rejected):
                rejected.append(seen)
            else:
                to_read.append((seen, line_crop(bgr, corners)))
        texts = self.model.recognize([crop for _, crop in to_read]) if to_read else []
        for (seen, _), (text, score) in zip(to_read, texts, strict=True):
            if score >= self.cfg.text_min_confidence and any(c.isalnum() for c in text):
                kept.append(self._follow(seen.box, seen.thumb, respace(text), score, t, kept))
            else:
                rejected.append(seen)
        self.closed += [ln for ln in self.active if ln not in kept]
        self.active, self.rejected = kept, rejected

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

    def finish(self, shots: Sequence[Shot] = ()) -> tuple[ScreenText, ...]:
        """The followed lines worth a memory (:func:`screen_lines`)."""
        raw = [line.reading() for line in self.closed + self.active]
        return screen_lines(raw, shots, self.cfg.text_interval_s)


def screen_lines(lines: Sequence[ScreenText], shots: Sequence[Shot], interval_s: float) -> tuple[ScreenText, ...]:
    """Followed ``lines`` as memories want them, in order of appearance (in reading order at one time): the
    readings of one text in a shot as one line (:func:`_rejoined`), lines shown together on one row or in
    one block as one line (:func:`_blocks`), only lines above the quality floor (:func:`worth_keeping`),
    and lines contained in a kept line read in the same shot at about the same time folded into it
    (:func:`_folded`). ``interval_s`` is the detection interval (``senses.text_interval_s``)."""
    starts = sorted(s.start_s for s in shots)
    joined = _blocks(_rejoined(lines, starts, interval_s), interval_s)
    out = _folded(joined, [worth_keeping(line) for line in joined], starts, interval_s)
    return tuple(sorted((replace(t, confidence=round(t.confidence, 3)) for t in out),
                        key=lambda t: (t.start_s, t.bbox.y1, t.bbox.x1)))


def worth_keeping(line: ScreenText) -> bool:
    """The quality floor: ``MIN_CHARS`` letters or digits, words rather than pieces of words
    (:func:`~m3agent.perception.scene.words.readable`), and evidence that it was shown rather than glimpsed:
    read by ``PERSISTENT`` detections at ``PERSISTENT_CONFIDENCE`` (a sign, a logo), read cleanly (mean
    character probability ``SURE``), or ``SENTENCE_WORDS`` common words of ``SENTENCE_WORD_LETTERS`` letters
    (a caption shown once). Lettering partly hidden behind people reads as short runs of real words ("the
    form", "such") at lower confidence, on one or two detections or, where it stays half hidden, on several
    ("ple to alter", 0.903 over 4; "ying its found at i", 0.909 over 5), which none of the three lets through
    (docs/benchmarks.md, Perception: on-screen text)."""
    if sum(c.isalnum() for c in line.text) < MIN_CHARS or not readable(line.text):
        return False
    shown = line.sightings >= PERSISTENT and line.confidence >= PERSISTENT_CONFIDENCE
    sentence = common_words(line.text, SENTENCE_WORD_LETTERS) >= SENTENCE_WORDS
    return shown or line.confidence >= SURE or sentence


def _rejoined(lines: Sequence[ScreenText], shot_starts: Sequence[float], interval_s: float) -> list[ScreenText]:
    """Lines in start order, each joined into an earlier reading of the same text (:func:`_same_text`) when
    it comes back in the shot that reading ended in, or at most ``REJOIN_PERIODS`` intervals after it
    ended: a caption read twice, a sign hidden for a while by someone walking past."""
    out: list[ScreenText] = []
    gap = REJOIN_PERIODS * interval_s
    for line in sorted(lines, key=lambda t: t.start_s):
        index = next((k for k in reversed(range(len(out))) if _same_text(out[k].text, line.text)
                      and (_shot(out[k].end_s, shot_starts) == _shot(line.start_s, shot_starts)
                           or line.start_s - out[k].end_s <= gap)), None)
        if index is None:
            out.append(line)
        else:
            out[index] = _merged(out[index], line)
    return out


def _merged(a: ScreenText, b: ScreenText) -> ScreenText:
    """One line from two readings of it: the text and box of the one read more often (the earlier on a
    tie), the joined span, sightings added up, confidence their sighting-weighted mean."""
    main = b if b.sightings > a.sightings else a
    n = a.sightings + b.sightings
    return replace(main, start_s=min(a.start_s, b.start_s), end_s=max(a.end_s, b.end_s), sightings=n,
                   confidence=(a.confidence * a.sightings + b.confidence * b.sightings) / n)


def _blocks(lines: list[ScreenText], interval_s: float) -> list[ScreenText]:
    """``lines`` with each group shown together as one text joined into one line (rows top to bottom,
    each left to right): two lines are joined when each alone was read reliably (``PERSISTENT``
    detections or ``SURE``), they appeared and went together (:func:`_together`) and sit side by side on
    one row or stacked in one column (:func:`_adjacent`), as the words of a logo ("PBS" "NEWS" "HOUR")
    or the two lines of a caption. Detection splits such text where the gaps are wide; lines read once
    at low confidence are left apart, as hidden lettering would otherwise join into made-up sentences."""
    reliable = [k for k, t in enumerate(lines) if t.sightings >= PERSISTENT or t.confidence >= SURE]
    group = list(range(len(lines)))

    def root(k: int) -> int:
        while group[k] != k:
            k = group[k]
        return k

    for a, b in itertools.combinations(reliable, 2):
        if _together(lines[a], lines[b], interval_s) and _adjacent(lines[a].bbox, lines[b].bbox):
            group[root(b)] = root(a)
    members: dict[int, list[ScreenText]] = {}
    for k, line in enumerate(lines):
        members.setdefault(root(k), []).append(line)
    return [parts[0] if len(parts) == 1 else _block(parts) for parts in members.values()]


def _block(parts: list[ScreenText]) -> ScreenText:
    """Lines shown together as one: text in reading order, the union of spans and boxes, the most
    sightings of a part (one detection read them all), confidence the sighting-weighted mean."""
    rows: list[list[ScreenText]] = []
    for part in sorted(parts, key=lambda t: (t.bbox.y1 + t.bbox.y2) / 2):
        if rows and _row_overlap(rows[-1][0].bbox, part.bbox) >= ROW_OVERLAP:
            rows[-1].append(part)
        else:
            rows.append([part])
    text = " ".join(t.text for row in rows for t in sorted(row, key=lambda t: t.bbox.x1))
    n = sum(t.sightings for t in parts)
    return ScreenText(text=text, start_s=min(t.start_s for t in parts), end_s=max(t.end_s for t in parts),
                      confidence=sum(t.confidence * t.sightings for t in parts) / n,
                      bbox=BBox(min(t.bbox.x1 for t in parts), min(t.bbox.y1 for t in parts),
                                max(t.bbox.x2 for t in parts), max(t.bbox.y2 for t in parts)),
                      sightings=max(t.sightings for t in parts))


def _together(a: ScreenText, b: ScreenText, interval_s: float) -> bool:
    """Whether two lines appeared within one detection interval of each other and were shown over mostly
    the same time: spans, each held one interval past its last reading, overlap by ``TOGETHER`` of their union."""
    if abs(a.start_s - b.start_s) > interval_s + SLACK_S:
        return False
    overlap = min(a.end_s, b.end_s) + interval_s - max(a.start_s, b.start_s)
    union = max(a.end_s, b.end_s) + interval_s - min(a.start_s, b.start_s)
    return overlap >= TOGETHER * union


def _adjacent(a: BBox, b: BBox) -> bool:
    """Whether two line boxes of about the same letter height (``SAME_HEIGHT``) sit on one row at most
    ``ROW_GAP`` letter heights apart, or one above the other, overlapping by half the narrower width
    and at most ``STACK_GAP`` letter heights apart. Boxes grow by a margin around the letters, so
    neighbours overlap a little (``OVERLAP_PX`` letter heights); boxes overlapping more hold one text twice."""
    ha, hb = a.y2 - a.y1, b.y2 - b.y1
    if min(ha, hb) <= 0 or min(ha, hb) < SAME_HEIGHT * max(ha, hb):
        return False
    if _row_overlap(a, b) >= ROW_OVERLAP:  # side by side, not one over the other (a second read of one text)
        return -OVERLAP_PX * min(ha, hb) <= max(a.x1, b.x1) - min(a.x2, b.x2) <= ROW_GAP * max(ha, hb)
    column = min(a.x2, b.x2) - max(a.x1, b.x1)
    gap = max(a.y1, b.y1) - min(a.y2, b.y2)
    return column >= 0.5 * min(a.x2 - a.x1, b.x2 - b.x1) and gap <= STACK_GAP * min(ha, hb)


def _row_overlap(a: BBox, b: BBox) -> float:
    """Vertical overlap of two boxes as a share of the lower one's height: 1 on one row, 0 apart."""
    overlap = min(a.y2, b.y2) - max(a.y1, b.y1)
    return max(0.0, overlap) / max(1e-6, min(a.y2 - a.y1, b.y2 - b.y1))


def _folded(lines: list[ScreenText], kept: list[bool], shot_starts: Sequence[float],
            interval_s: float) -> list[ScreenText]:
    """The ``kept`` ones of ``lines`` without those contained in a longer kept line (their letters and
    digits, spaces ignored, inside its own) read in the same shot at overlapping or adjacent times (at most
    one interval apart): a caption read in part before it was read whole, one word of a sign read alone.
    Each line so contained, kept or not, widens the longest such line's span and adds its sightings when
    it was read outside that span. Shorter lines go first, so a chain of parts ends in the whole line."""
    out, alive = list(lines), list(kept)
    keys = [_letters(t.text) for t in lines]
    for i in sorted(range(len(lines)), key=lambda i: len(keys[i])):
        part = out[i]
        if len(keys[i]) < MIN_CHARS:
            continue
        near = [k for k, t in enumerate(out) if alive[k] and len(keys[k]) > len(keys[i]) and keys[i] in keys[k]
                and _shot(t.start_s, shot_starts) == _shot(part.start_s, shot_starts)
                and part.start_s <= t.end_s + interval_s + SLACK_S and part.end_s >= t.start_s - interval_s - SLACK_S]
        if not near:
            continue
        k = max(near, key=lambda k: len(keys[k]))
        into = out[k]
        outside = part.start_s < into.start_s or part.end_s > into.end_s
        out[k] = replace(into, start_s=min(into.start_s, part.start_s), end_s=max(into.end_s, part.end_s),
                         sightings=into.sightings + part.sightings if outside else into.sightings)
        alive[i] = False
    return [t for t, keep in zip(out, alive, strict=True) if keep]


def _shot(time_s: float, shot_starts: Sequence[float]) -> int:
    """Index of the shot holding ``time_s`` (0 before the first start or without shots)."""
    return max(0, bisect.bisect_right(shot_starts, time_s + 1e-6) - 1)


def _letters(text: str) -> str:
    """Letters and digits of ``text``, lower case: what two readings of one text share despite spacing."""
    return "".join(c for c in text.casefold() if c.isalnum())


def _same_text(a: str, b: str) -> bool:
    """Two readings of one text: equal letters and digits, or ``SAME_LINE`` alike (an OCR slip)."""
    ka, kb = _letters(a), _letters(b)
    return ka == kb or difflib.SequenceMatcher(None, ka, kb).ratio() >= SAME_LINE


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

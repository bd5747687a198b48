"""Who spoke when inside one clip: speaker turns with 10 ms resolution, no minimum utterance length.

Method (tuned on the reference recordings, see docs/benchmarks.md):

1. Silero VAD probabilities once; a *tight* segmentation selects clear speech,
   a *generous* one the time that is reported as speech.
2. The tight speech is concatenated (silence removed), its volume normalised to
   the encoder's training level, and embedded with 1.6 s d-vector windows every
   ``hop_s`` seconds: every window then holds speech only.
3. Windows are clustered: average-linkage agglomerative clustering on cosine
   distance with ``distance_threshold`` (0.27 errs towards splitting one voice
   rather than merging two people: cross-clip identity can re-join a split
   voice, nothing can separate a merged one); clusters with fewer than
   ``min_cluster_s`` of window starts are folded into the nearest large one, and
   windows are re-assigned to the nearest centroid a few times.
4. Every 10 ms speech frame takes the label that the windows covering it vote for
   (votes weighted towards window centres); every frame of the generous speech
   takes the label of the nearest tight-speech frame. Runs of labels become turns.

Speakers are numbered 0, 1, ... in order of first appearance. Each speaker's
embedding is the normalised mean of its windows (its voice over the whole clip).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from m3agent.perception.audio.speakers import HOP, RATE, WINDOW_FRAMES, normalise_volume
from m3agent.perception.audio.vad import GENEROUS, TIGHT, VadParams, speech_probabilities, speech_regions

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.perception.audio.speakers import SpeakerEncoder

FRAME_S = HOP / RATE  # 10 ms


@dataclass(frozen=True, slots=True)
class DiarizationParams:
    distance_threshold: float = 0.27
    min_cluster_s: float = 1.5
    reassign_rounds: int = 3
    hop_s: float = 0.25
    tight: VadParams = TIGHT
    generous: VadParams = GENEROUS


@dataclass(frozen=True, slots=True)
class SpeakerTurn:
    """A stretch of speech by one speaker, seconds from the start of the analysed audio."""

    start_s: float
    end_s: float
    speaker: int


@dataclass(frozen=True, slots=True, eq=False)
class Diarization:
    """Turns in time order and one unit embedding per speaker index."""

    turns: tuple[SpeakerTurn, ...]
    embeddings: dict[int, npt.NDArray[np.float32]] = field(default_factory=dict)
    speech: tuple[tuple[float, float], ...] = ()

    @property
    def n_speakers(self) -> int:
        return len(self.embeddings)


def diarize(
    audio: npt.NDArray[np.float32],
    encoder: SpeakerEncoder,
    params: DiarizationParams | None = None,
    probs: npt.NDArray[np.float32] | None = None,
) -> Diarization:
    """Speaker turns of 16 kHz mono ``audio``; ``probs`` reuses VAD probabilities already computed."""
    import numpy as np

    p = params or DiarizationParams()
    duration = len(audio) / RATE
    probs = speech_probabilities(audio) if probs is None else probs
    tight = speech_regions(probs, p.tight, duration)
    generous = tuple(speech_regions(probs, p.generous, duration))
    if not tight:
        return Diarization((), {}, generous)
    keep = np.concatenate([np.arange(round(a * RATE), round(b * RATE)) for a, b in tight])
    keep = keep[keep < len(audio)]
    speech = normalise_volume(audio[keep].astype(np.float32))
    hop_frames = max(1, round(p.hop_s / FRAME_S))
    windows, starts, lengths = _embed(speech, encoder, hop_frames)
    labels = cluster_windows(windows, p, hop_frames)
    labels, embeddings = _order_by_appearance(labels, windows, starts)
    frame_labels = _vote(starts, lengths, labels, n_frames=-(-len(speech) // HOP))
    frame_times = keep[np.minimum(np.arange(len(frame_labels)) * HOP, len(keep) - 1)] / RATE
    turns = _turns(generous, frame_times, frame_labels)
    return Diarization(turns, embeddings, generous)


def _embed(
    speech: npt.NDArray[np.float32], encoder: SpeakerEncoder, hop_frames: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Windows over the joined speech: embeddings, start frames, and frames each covers."""
    import numpy as np

    windows, starts = encoder.embed_windows(speech, hop_frames=hop_frames)
    n_frames = max(1, -(-len(speech) // HOP))
    return windows, starts, np.full(len(starts), min(WINDOW_FRAMES, n_frames), dtype=np.int64)


def cluster_windows(windows: npt.NDArray[np.float32], p: DiarizationParams, hop_frames: int) -> npt.NDArray[np.int64]:
    """Cluster labels for window embeddings (see the module docstring, step 3)."""
    import numpy as np

    if len(windows) < 2:
        return np.zeros(len(windows), dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering

    ahc = AgglomerativeClustering(
        n_clusters=None, distance_threshold=p.distance_threshold, metric="cosine", linkage="average"
    )
    labels = np.asarray(ahc.fit_predict(windows), dtype=np.int64)
    min_windows = max(1, round(p.min_cluster_s / (hop_frames * FRAME_S)))
    labels = _fold_small_clusters(windows, labels, min_windows)
    for _ in range(p.reassign_rounds):
        labels = _nearest_centroid(windows, labels)
    return labels


def _centroids(
    windows: npt.NDArray[np.float32], labels: npt.NDArray[np.int64], keys: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    import numpy as np

    c = np.stack([windows[labels == k].mean(axis=0) for k in keys])
    return np.asarray(c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-9), dtype=np.float32)


def _fold_small_clusters(
    windows: npt.NDArray[np.float32], labels: npt.NDArray[np.int64], min_windows: int
) -> npt.NDArray[np.int64]:
    """Windows of clusters smaller than ``min_windows`` join the most similar large cluster."""
    import numpy as np

    keys, counts = np.unique(labels, return_counts=True)
    large = keys[counts >= min_windows]
    if len(large) == 0:
        large = keys[[int(counts.argmax())]]
    centroids = _centroids(windows, labels, large)
    small = ~np.isin(labels, large)
    out = labels.copy()
    out[small] = large[(windows[small] @ centroids.T).argmax(axis=1)]
    return out


def _nearest_centroid(windows: npt.NDArray[np.float32], labels: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    import numpy as np

    keys = np.unique(labels)
    if len(keys) < 2:
        return labels
    new = keys[(windows @ _centroids(windows, labels, keys).T).argmax(axis=1)]
    return np.asarray(new, dtype=np.int64)


def _order_by_appearance(
    labels: npt.NDArray[np.int64], windows: npt.NDArray[np.float32], starts: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], dict[int, npt.NDArray[np.float32]]]:
    """Renumber speakers 0.. by first window; one unit embedding per speaker."""
    import numpy as np

    order: list[int] = []
    for k in labels[np.argsort(starts, kind="stable")].tolist():
        if k not in order:
            order.append(k)
    remap = {old: new for new, old in enumerate(order)}
    new_labels = np.asarray([remap[k] for k in labels.tolist()], dtype=np.int64)
    keys = np.arange(len(order), dtype=np.int64)
    centroids = _centroids(windows, new_labels, keys) if len(order) else np.zeros((0, windows.shape[1]))
    return new_labels, {int(k): centroids[k] for k in keys}


def _vote(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], labels: npt.NDArray[np.int64], n_frames: int
) -> npt.NDArray[np.int64]:
    """Label of each 10 ms frame: the votes of the windows covering it, weighted towards window centres."""
    import numpy as np

    n_labels = int(labels.max()) + 1 if len(labels) else 1
    votes = np.zeros((max(n_frames, 1), n_labels))
    for start, length, label in zip(starts.tolist(), lengths.tolist(), labels.tolist(), strict=True):
        offsets = np.arange(length)
        weights = np.exp(-0.5 * ((offsets - length / 2) / (length / 4)) ** 2)
        idx = start + offsets
        ok = idx < len(votes)
        votes[idx[ok], label] += weights[ok]
    return np.asarray(votes.argmax(axis=1), dtype=np.int64)


def _turns(
    regions: tuple[tuple[float, float], ...],
    frame_times: npt.NDArray[np.float64],
    frame_labels: npt.NDArray[np.int64],
) -> tuple[SpeakerTurn, ...]:
    """Label every 10 ms of the generous regions by the nearest embedded frame; merge runs into turns."""
    import numpy as np

    turns: list[SpeakerTurn] = []
    for a, b in regions:
        times = np.arange(a, b, FRAME_S)
        right = np.clip(np.searchsorted(frame_times, times), 0, len(frame_times) - 1)
        left = np.clip(right - 1, 0, len(frame_times) - 1)
        nearest = np.where(np.abs(frame_times[left] - times) < np.abs(frame_times[right] - times), left, right)
        labels = frame_labels[nearest]
        cuts = np.flatnonzero(np.diff(labels)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(times)], strict=True):
            end = b if hi == len(times) else float(times[hi])
            turns.append(SpeakerTurn(float(times[lo]), end, int(labels[lo])))
    return tuple(turns)

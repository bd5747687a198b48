"""Deterministic average-linkage clustering with a distance threshold and cannot-link pairs.

Used to merge the face tracks of one clip (tracks that share a frame are two
people and never merge) and to group photo sets into identities. Also holds
the pairwise precision/recall used to score a clustering against the truth.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def agglomerate(
    distances: Any,
    threshold: float,
    *,
    groups: Sequence[int] | None = None,
    cannot_link: Sequence[tuple[int, int]] = (),
) -> list[int]:
    """Cluster items given their (n, n) distance matrix; returns a label per item.

    Starts from ``groups`` (items with the same group id are already together;
    default: every item alone) and repeatedly merges the two clusters with the
    smallest mean pairwise item distance while it is below ``threshold``.
    ``cannot_link`` holds pairs of group ids that must stay apart, and so must
    everything merged with them. Labels are numbered by first item. Ties break
    towards the lowest indices, so the result is deterministic.
    """
    import numpy as np

    dist = np.asarray(distances, dtype=np.float64)
    n = dist.shape[0]
    group_ids = list(range(n)) if groups is None else list(groups)
    order = sorted(set(group_ids), key=group_ids.index)
    index = {g: k for k, g in enumerate(order)}
    member = np.zeros((len(order), n))
    for item, g in enumerate(group_ids):
        member[index[g], item] = 1.0
    sums = member @ dist @ member.T
    counts = member.sum(axis=1)
    blocked = np.zeros((len(order), len(order)), dtype=bool)
    for a, b in cannot_link:
        if a in index and b in index:
            blocked[index[a], index[b]] = blocked[index[b], index[a]] = True
    labels = _merge_loop(sums, counts, blocked, threshold)
    cluster_of_item = [labels[index[g]] for g in group_ids]
    return _renumber(cluster_of_item)


def _merge_loop(sums: Any, counts: Any, blocked: Any, threshold: float) -> list[int]:
    import numpy as np

    k = len(counts)
    alive = np.ones(k, dtype=bool)
    owner = list(range(k))
    while alive.sum() > 1:
        mean = sums / np.outer(counts, counts)
        mask = ~(alive[:, None] & alive[None, :]) | blocked | np.eye(k, dtype=bool)
        mean[mask] = np.inf
        flat = int(np.argmin(mean))
        a, b = sorted(divmod(flat, k))
        if not mean[a, b] < threshold:
            break
        sums[a, :] += sums[b, :]
        sums[:, a] += sums[:, b]
        counts[a] += counts[b]
        blocked[a, :] |= blocked[b, :]
        blocked[:, a] |= blocked[:, b]
        alive[b] = False
        owner = [a if o == b else o for o in owner]
    return owner


def _renumber(labels: Sequence[int]) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(label, len(seen)) for label in labels]


def euclidean_distances(vectors: Any) -> npt.NDArray[np.float64]:
    import numpy as np

    x = np.asarray(vectors, dtype=np.float64)
    sq = (x * x).sum(axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
    out: npt.NDArray[np.float64] = np.sqrt(d2)
    np.fill_diagonal(out, 0.0)
    return out


def cluster_embeddings(vectors: Any, threshold: float) -> list[int]:
    """Identity labels for face descriptors (one per photo/face), average linkage at ``threshold``
    (``settings.perception.face_photo_distance`` for photos: it depends on the face descriptor)."""
    if len(vectors) == 0:
        return []
    return agglomerate(euclidean_distances(vectors), threshold)


def pairwise_precision_recall(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> tuple[float, float]:
    """Pairwise precision and recall of a clustering against true labels (1.0 when undefined).

    Precision: of the item pairs put together, the share that truly belong
    together; recall: of the pairs that truly belong together, the share put together.
    """
    if len(predicted) != len(truth):
        raise ValueError("predicted and truth must label the same items")
    together = _pairs(Counter(predicted).values())
    same = _pairs(Counter(truth).values())
    both = _pairs(Counter(zip(predicted, truth, strict=True)).values())
    precision = both / together if together else 1.0
    recall = both / same if same else 1.0
    return precision, recall


def _pairs(sizes: Any) -> int:
    return sum(n * (n - 1) // 2 for n in sizes)

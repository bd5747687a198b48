"""Face perception: detection (MTCNN or dlib HOG), within-clip tracks, dlib ResNet embeddings.

Entry point: :func:`perceive_faces`. Models load on first use, once per process.
"""

from __future__ import annotations

from m3agent.perception.faces.cluster import agglomerate, cluster_embeddings, pairwise_precision_recall
from m3agent.perception.faces.perceive import perceive_faces, perceive_faces_timed
from m3agent.perception.faces.photos import PhotoFace, faces_in_photo, load_rgb

__all__ = [
    "PhotoFace",
    "agglomerate",
    "cluster_embeddings",
    "faces_in_photo",
    "load_rgb",
    "pairwise_precision_recall",
    "perceive_faces",
    "perceive_faces_timed",
]

"""Importers of memories made by other systems (the M3-Bench reference memory graphs).

``import_m3_graph(pkl_path, store, video_id)`` reads a released ``VideoGraph``
pickle with an allow-list unpickler (nothing in the file is executed) and
writes its entities, memories, edges and face-voice links through the store API.
"""

from __future__ import annotations

from m3agent.importers.m3graph import ImportReport, import_m3_graph
from m3agent.importers.reference_graph import ReferenceGraph, read_reference_graph

__all__ = ["ImportReport", "ReferenceGraph", "import_m3_graph", "read_reference_graph"]

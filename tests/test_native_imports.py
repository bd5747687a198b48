"""Native extensions used together in one process must not crash it, whatever the order of use."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from m3agent.store.index.ann import HnswIndex
    index = HnswIndex(8)
    index.add(np.arange(4, dtype=np.int64), np.eye(4, 8, dtype=np.float32))
    assert list(index.search(np.eye(1, 8, dtype=np.float32)[0], 1)) == [0]
    from m3agent.embed.minilm import MiniLMEmbedder
    assert MiniLMEmbedder().embed(["search first, embed second"]).shape == (1, 384)
    import torch, av, cv2, dlib, faster_whisper
    print("ok")
    """
)


def test_vector_index_then_onnxruntime_then_the_rest() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.strip().endswith("ok")

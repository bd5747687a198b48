"""Importing m3agent (every module) loads no model, reads no config and opens no socket."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import json, pkgutil, importlib, sys
    events = []
    SUSPECT = (".toml", ".onnx", ".gguf", ".pt", ".bin", ".dat", ".db", ".wav", ".mp4", ".json")
    def hook(event, args):
        if event in ("socket.connect", "socket.bind", "socket.getaddrinfo"):
            events.append([event, repr(args)[:200]])
        elif event == "open" and isinstance(args[0], str) and args[0].endswith(SUSPECT):
            events.append([event, args[0]])
    sys.addaudithook(hook)
    import m3agent
    names = [m.name for m in pkgutil.walk_packages(m3agent.__path__, "m3agent.")]
    for name in names:
        importlib.import_module(name)
    heavy = sorted(m for m in ("torch", "onnxruntime", "av", "cv2", "dlib", "faster_whisper", "llama_cpp",
                               "resemblyzer", "faiss", "usearch", "sklearn", "httpx", "numpy", "tokenizers")
                   if m in sys.modules)
    print(json.dumps({"modules": len(names), "events": events, "heavy": heavy}))
    """
)


def test_import_everything_is_inert() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["modules"] >= 10
    assert report["events"] == [], f"import-time side effects: {report['events']}"
    assert report["heavy"] == [], f"heavy modules imported at import time: {report['heavy']}"

"""Local model generation speed against threads, alone and beside one busy process (docs/benchmarks.md,
"Answer latency": threads fitted to the free cores).

Each model spec answers the same 89-token prompt with a 59-token reply (temperature 0) twice, first with the
cores free, then beside a busy Python process; the specs take turns so every one meets the same load. Prints
llama.cpp's generated tokens/s, the wall seconds and the threads the call used.

    .venv/bin/python bench/llm_threads.py "llamacpp:qwen-1.5b?adapt_threads=0" llamacpp:qwen-1.5b \\
        "llamacpp:qwen-1.5b?n_threads=1"
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

MESSAGES = [
    {"role": "system", "content": "Reply with JSON only."},
    {"role": "user", "content": 'Observations:\n[m1] <voice_3> says: "when I was a senator from New York, but that '
     'is not the point here."\n[m2] <voice_4> says: "Why did you not do it?"\nList each speaker tag and what they '
     'said as JSON {"items":[{"who":TAG,"said":TEXT}]}.'},
]


def main(specs: list[str]) -> int:
    from m3agent.llm import create_chat_model

    chats = {spec: create_chat_model(spec) for spec in specs}
    for chat in chats.values():
        chat.chat(MESSAGES, max_tokens=60, temperature=0.0)  # load the model, evaluate the prompt once
    for busy in (False, True):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        time.sleep(1.0)
        try:
            for turn in range(2):
                for spec, chat in chats.items():
                    started = time.perf_counter()
                    chat.chat(MESSAGES, max_tokens=60, temperature=0.0)
                    t = chat.timings  # type: ignore[attr-defined]
                    print(f"busy={busy:d} turn {turn} {spec:40s} load {os.getloadavg()[0]:.1f} "
                          f"wall {time.perf_counter() - started:5.1f} s "
                          f"gen {t['generated'] / t['generate_ms'] * 1000:5.2f} tokens/s threads {t.get('threads')}",
                          flush=True)
        finally:
            if hog is not None:
                hog.kill()
    for chat in chats.values():
        chat.close()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["llamacpp:qwen-1.5b?adapt_threads=0", "llamacpp:qwen-1.5b"]))

"""Model states of fixed prompt prefixes, kept on disk so that a new model process skips them.

Every prompt of m3agent starts with a fixed system text (the answer instructions, the query plan's, the
consolidation's): 250-500 tokens that llama.cpp evaluates at 40-50 tokens/s on 2 cores, 5-10 s before the first
reply of each new process (each ``m3agent ask``, each ingest run). The worker's RAM cache
(:func:`m3agent.llm.worker._lean_save_state`) saves that within one process only. Here the state of the context
holding exactly the fixed part (the chat template up to the last user message's content: the system text and a
few-shot prompt's worked example) is written once per model and setting, and loaded (milliseconds) by later processes.

A file is ``MAGIC``, one JSON header line, the prefix's tokens (int32) and llama.cpp's own state bytes
(``llama_state_get_data``: the KV cells, CPU independent); no pickle. It is named by the hash of its tokens
inside a folder named by the model file and the context settings, so a changed prompt, model, setting or
llama.cpp version never loads a stale state; a file that fails to load is deleted and the prefix evaluated
again. Used only inside the model's worker process (it needs the loaded ``llama_cpp`` module).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MAGIC = b"M3AGENT-LLAMA-STATE 1\n"
CHECKSUM_SUFFIX = ".sha256"
"""Beside a state file another runtime wrote (:mod:`m3agent.llm.xllamacpp_worker`): its size and digest."""
MIN_PREFIX_TOKENS = 32
"""A shorter fixed part costs under a second to evaluate: not worth a file."""
PROBES = ("\x01a", "\x02b")
"""Two first-user contents that differ in their first character (a byte token of its own in the models' tokenizers):
the rendered prompts agree up to where the content starts. (Probes sharing a first character, "\x01a" and "\x01b",
let that byte token into the fixed part, one token the real prompt does not have.)"""


def folder_for(root: Path, model_path: Path, settings: dict[str, Any], version: str) -> Path:
    """The folder of one model file's states under one set of context settings and one llama.cpp version."""
    stat = model_path.stat()
    key = json.dumps([str(model_path.resolve()), stat.st_size, stat.st_mtime_ns, version, settings], sort_keys=True)
    return root / f"{model_path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def fixed_prefix(messages: list[dict[str, Any]], tokens: Callable[[list[dict[str, Any]]], list[int]]) -> list[int]:
    """The tokens every prompt with these messages before the last user message shares, for a runtime whose
    ``tokens`` renders messages with the model's chat template and tokenizes them: the rendering cut where the last
    user content begins (the system text and any worked example of a few-shot prompt); [] with no earlier message."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    if last_user == 0:
        return []
    probes = [tokens([*messages[:last_user], {"role": "user", "content": probe}]) for probe in PROBES]
    return probes[0][: common_prefix(probes[0], probes[1])]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixStates:
    """The states of one model's fixed prompt prefixes under ``folder``; the folders beside it (other models and
    settings) hold at most ``capacity_bytes`` together, least recently used out."""

    def __init__(self, folder: Path, capacity_bytes: int) -> None:
        self.folder = folder
        self.capacity_bytes = capacity_bytes
        self._formatter: Any = None

    # the fixed part ---------------------------------------------------------
    def fixed_prefix(self, llama: Any, messages: list[dict[str, Any]]) -> list[int]:
        """The tokens every prompt with these messages before the last user message shares: the chat
        template's rendering of them, cut where the last user content begins (the system text and any worked
        example of a few-shot prompt); [] without a chat template."""
        formatter = self._chat_formatter(llama)
        if formatter is None:
            return []

        def tokens(shown: list[dict[str, Any]]) -> list[int]:
            result = formatter(messages=shown)
            return list(llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special,
                                       special=True))

        return fixed_prefix(messages, tokens)

    def _chat_formatter(self, llama: Any) -> Any:
        """A formatter of the model's own chat template, built as llama-cpp-python builds the one it uses."""
        if self._formatter is None:
            template = (getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template")
            if not template:
                self._formatter = False
            else:
                from llama_cpp import llama_chat_format

                eos, bos = llama.token_eos(), llama.token_bos()
                text = llama._model.token_get_text
                self._formatter = llama_chat_format.Jinja2ChatFormatter(
                    template=template, eos_token=text(eos) if eos != -1 else "",
                    bos_token=text(bos) if bos != -1 else "", stop_token_ids=[eos])
        return self._formatter or None

    # the context ------------------------------------------------------------
    def prepare(self, llama: Any, prefix: list[int]) -> str:
        """Make the context hold ``prefix``: already there (``held``), loaded from its file (``loaded``), or
        evaluated now and saved (``saved``); ``short`` when the prefix is not worth a file."""
        if len(prefix) < MIN_PREFIX_TOKENS:
            return "short"
        have = common_prefix(llama._input_ids.tolist(), prefix)
        if len(prefix) - have < MIN_PREFIX_TOKENS or self._cached_in_ram(llama, prefix):
            return "held"  # the context holds it, or all but a few tokens (a conversation's next turn)
        if self.load(llama, prefix):
            return "loaded"
        llama.n_tokens = have  # eval drops the cells after n_tokens, then evaluates the rest of the prefix
        llama.eval(prefix[have:])
        self.save(llama, prefix)
        return "saved"

    @staticmethod
    def _cached_in_ram(llama: Any, prefix: list[int]) -> bool:
        cache = getattr(llama, "cache", None)
        if cache is None:
            return False
        try:
            state = cache[prefix]
        except KeyError:
            return False
        return common_prefix(state.input_ids[: state.n_tokens].tolist(), prefix) == len(prefix)

    # files ------------------------------------------------------------------
    def path(self, prefix: Sequence[int]) -> Path:
        import numpy as np

        digest = hashlib.sha256(np.asarray(prefix, np.int32).tobytes()).hexdigest()[:24]
        return self.folder / f"{digest}.state"

    def save(self, llama: Any, prefix: list[int]) -> None:
        """Write the context's state, which must hold exactly ``prefix`` (atomic: a reader sees all or none)."""
        import ctypes

        import llama_cpp
        import numpy as np

        if llama.n_tokens != len(prefix):
            return
        size = int(llama_cpp.llama_state_get_size(llama._ctx.ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(llama._ctx.ctx, buffer, size))
        header = {"tokens": len(prefix), "state_bytes": written, "vocab": int(llama.n_vocab())}
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + json.dumps(header).encode() + b"\n")
                out.write(np.asarray(prefix, np.int32).tobytes())
                out.write(memoryview(buffer)[:written])
            os.replace(tmp, self.path(prefix))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        self._evict()

    def load(self, llama: Any, prefix: list[int]) -> bool:
        """Restore ``prefix``'s state from its file; False (and the file removed) when it is missing or unusable."""
        import llama_cpp
        import numpy as np

        path = self.path(prefix)
        try:
            with path.open("rb") as f:
                if f.readline() != MAGIC:
                    raise ValueError("not a state file")
                header = json.loads(f.readline())
                tokens = np.frombuffer(f.read(4 * int(header["tokens"])), np.int32)
                data = f.read()
            if tokens.tolist() != list(prefix) or len(data) != int(header["state_bytes"]) \
                    or int(header["vocab"]) != int(llama.n_vocab()):
                raise ValueError("state file does not match its name")
            input_ids = np.zeros(llama._n_ctx, np.intc)
            input_ids[: len(prefix)] = tokens
            state = llama_cpp.LlamaState(input_ids=input_ids, scores=np.zeros((1, llama.n_vocab()), np.single),
                                         n_tokens=len(prefix), llama_state=data, llama_state_size=len(data),
                                         seed=llama._seed)
            llama.load_state(state)  # the scores row is broadcast; a suffix is always decoded before sampling
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, RuntimeError):
            with contextlib.suppress(OSError):
                path.unlink()
            llama.n_tokens = 0
            return False
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept longest
        return True

    def _evict(self) -> None:
        evict(self.folder.parent, self.capacity_bytes)


def evict(root: Path, capacity_bytes: int) -> None:
    """Oldest state files under ``root``'s folders out until they fit ``capacity_bytes`` together (a folder left by
    an earlier model, setting or runtime empties first)."""
    files = []
    for path in root.glob("*/*.state"):
        with contextlib.suppress(OSError):
            stat = path.stat()
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= capacity_bytes:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
        with contextlib.suppress(OSError):
            (path.parent / (path.name + CHECKSUM_SUFFIX)).unlink()  # a runtime's record of the file, if any

"""Greedy decoding under a grammar that checks only the chosen token (runs in the model's worker process).

llama-cpp-python applies a grammar to the whole vocabulary before every sampled token: for Qwen2.5's 151,936
tokens that measured about 31 ms a token on 2 cores, as much again as the 0.5B model's own step (docs/
benchmarks.md, "Consolidation"). llama.cpp's own command-line sampler avoids it: it picks a token without the
grammar, asks the grammar whether that one token may follow, and only when it may not, masks the whole
vocabulary and picks again. Under greedy decoding the two ways pick the same token every time (when the best
token is allowed, masking the others cannot change the best; when it is not, both take the best allowed
one), so replies are identical, only faster.

Used only where that equivalence holds: temperature 0 with neutral penalties and no logits processor;
anything else keeps llama-cpp-python's own sampler. :func:`install` hooks a loaded ``Llama``.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

NEUTRAL = {"repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "mirostat_mode": 0}
"""Sampler settings under which greedy decoding is a plain argmax of the logits."""


class LazyGrammarSampler:
    """The argmax token the grammar allows, checking the full vocabulary only when the argmax is refused.

    Duck-types llama-cpp-python's ``LlamaSampler`` where ``Llama.generate`` uses it (``sample(ctx, idx)``);
    the grammar sampler is accepted the chosen token, as the sampler chain would."""

    def __init__(self, llama_cpp: Any, llama: Any, grammar: Any) -> None:
        import numpy as np  # here, not at the top: importing this module does nothing

        self._lib = llama_cpp
        self._n_vocab = int(llama.n_vocab())
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._grammar:
            raise RuntimeError("llama.cpp could not build the reply grammar")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(self._one, 1, -1, False)
        self._all = (llama_cpp.llama_token_data * self._n_vocab)()
        self._all_view = np.ctypeslib.as_array(self._all)  # a structured view: id, logit, p
        self._all_array = llama_cpp.llama_token_data_array(self._all, self._n_vocab, -1, False)
        self.full_checks = 0  # tokens the grammar refused first (each cost one pass over the vocabulary)

    def sample(self, ctx: Any, idx: int) -> int:
        """The next token after the logits at ``idx`` of ``ctx`` (a llama-cpp-python ``LlamaContext``)."""
        import numpy as np

        pointer = self._lib.llama_get_logits_ith(ctx.ctx, idx)
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))
        token = int(np.argmax(logits))  # a NaN anywhere is its own maximum
        if not np.isfinite(logits[token]):
            raise RuntimeError("the model computed no usable scores (NaN or infinite logits): its file looks broken; "
                               "pull or copy it again")
        if not self._allows(token):
            self.full_checks += 1
            token = self._best_allowed(logits)
        self._lib.llama_sampler_accept(self._grammar, token)
        return token

    def _allows(self, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        self._one_array.size, self._one_array.selected = 1, -1
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        return bool(math.isfinite(self._one[0].logit))

    def _best_allowed(self, logits: Any) -> int:
        import numpy as np

        view = self._all_view
        view["id"] = np.arange(self._n_vocab, dtype=view["id"].dtype)
        view["logit"] = logits
        view["p"] = 0.0
        self._all_array.size, self._all_array.selected, self._all_array.sorted = self._n_vocab, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._all_array))
        size = int(self._all_array.size)  # the grammar masks with -inf; it may also shrink the array
        masked = view["logit"][:size]
        if not np.isfinite(masked).any():
            raise RuntimeError("the reply grammar allows no token here")
        return int(view["id"][int(np.argmax(masked))])

    def __del__(self) -> None:
        grammar, self._grammar = getattr(self, "_grammar", None), None
        if grammar:
            self._lib.llama_sampler_free(grammar)


def install(llama_cpp: Any, llama: Any) -> None:
    """Make ``llama`` decode greedily under grammars with :class:`LazyGrammarSampler`; other settings unchanged."""
    original = llama._init_sampler

    @functools.wraps(original)
    def init_sampler(**settings: Any) -> Any:
        grammar = settings.get("grammar")
        lazy = (grammar is not None and settings.get("temp") == 0.0 and settings.get("logits_processor") is None
                and all(settings.get(k, v) == v for k, v in NEUTRAL.items()))
        return LazyGrammarSampler(llama_cpp, llama, grammar) if lazy else original(**settings)

    llama._init_sampler = init_sampler


def counts(llama: Any) -> dict[str, float]:
    """``grammar_rechecks``: tokens of the last reply the grammar refused first (each a pass over the whole
    vocabulary); empty when the last reply had no lazy grammar."""
    sampler = getattr(llama, "_sampler", None)
    return {"grammar_rechecks": sampler.full_checks} if isinstance(sampler, LazyGrammarSampler) else {}

"""Control: answering questions from memory with cited evidence, in three modes.

``agent`` (multi-turn search), ``baseline`` (one retrieval, one answer) and
``select`` (one retrieval; a small model or a reranker picks the answering
memory); see :mod:`m3agent.control.modes`.

Entry points (:mod:`m3agent.control.answering`): :func:`answer` answers from
:class:`~m3agent.settings.Settings` exactly as ``m3agent ask`` does
(:func:`answer_steps` yields the steps); :func:`answer_question` yields typed
steps (Thought, Action, Observation, then one Answer) for explicit models and
an :class:`AgentConfig`; :func:`run_to_answer` drains them; :func:`ask` does
both. Importing this package loads no model.
"""

from __future__ import annotations

from m3agent.control.answering import (
    MODE_STEPS,
    answer,
    answer_question,
    answer_steps,
    ask,
    config_for,
    run_to_answer,
)
from m3agent.control.config import AgentConfig
from m3agent.control.modes import MODES, Mode, default_mode
from m3agent.control.results import ClipHits, ClipRef, Hit, SearchResult
from m3agent.control.retrieval.search import MemorySearcher
from m3agent.control.run_context import RunContext
from m3agent.control.steps import Action, Answer, Evidence, Observation, Step, Thought

__all__ = [
    "MODES",
    "MODE_STEPS",
    "Action",
    "AgentConfig",
    "Answer",
    "ClipHits",
    "ClipRef",
    "Evidence",
    "Hit",
    "MemorySearcher",
    "Mode",
    "Observation",
    "RunContext",
    "SearchResult",
    "Step",
    "Thought",
    "answer",
    "answer_question",
    "answer_steps",
    "ask",
    "config_for",
    "default_mode",
    "run_to_answer",
]

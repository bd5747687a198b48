"""Control: answering questions from memory with cited evidence, in three modes.

``agent`` (multi-turn search), ``baseline`` (one retrieval, one answer) and
``select`` (one retrieval; a small model or a reranker picks the answering
memory); see :mod:`m3agent.control.modes`.

Entry points: :func:`answer_question` yields typed steps (Thought, Action,
Observation, then one Answer); :func:`run_to_answer` drains them;
:func:`ask` does both. Importing this package loads no model.
"""

from __future__ import annotations

from m3agent.control.agent import AgentConfig, answer_question, ask, run_to_answer
from m3agent.control.modes import MODES, Mode, default_mode
from m3agent.control.results import ClipHits, ClipRef, Hit, SearchResult
from m3agent.control.search import MemorySearcher
from m3agent.control.steps import Action, Answer, Evidence, Observation, Step, Thought

__all__ = [
    "MODES",
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
    "SearchResult",
    "Step",
    "Thought",
    "answer_question",
    "ask",
    "default_mode",
    "run_to_answer",
]

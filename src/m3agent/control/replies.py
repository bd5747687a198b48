"""Typed replies of the control and judge prompts, read by attribute.

Each model mirrors its prompt's reply schema (``prompts/<name>.json``); the
base :class:`~m3agent.llm.prompts.Reply` (and :meth:`Reply.read`, where an
unusable reply becomes a :class:`~m3agent.errors.MalformedReplyError`) lives in
:mod:`m3agent.llm.prompts`, shared with memorize.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from m3agent.graph.references import Kind, Place, Scene
from m3agent.llm.prompts import Content, Reply, Stripped
from m3agent.tags import without_cut_tag

AnswerText = Annotated[Content, AfterValidator(without_cut_tag)]
"""An answer the model wrote under a length limit: a tag the limit cut at its end is dropped."""


class AgentReply(Reply):
    """``control_agent``: a thought and the next action (a search with its query, or the answer)."""

    thought: Stripped
    action: Literal["search_clip", "search_memory", "who_is_at", "appearances", "shots", "answer"]
    content: Content


class AnswerReply(Reply):
    """``control_answer``: the last round and the baseline, where the only action is ``answer``."""

    thought: Stripped
    action: Literal["answer"]
    content: Content


NO_CHOICE = "none"


class SelectReply(Reply):
    """``control_select``: the number of the memory that answers (``"none"``: none does), and the few words."""

    choice: str = Field(pattern=r"^(none|[1-9][0-9]*)$")
    answer: str = Field(max_length=80)

    @property
    def number(self) -> int | None:
        """The chosen candidate, 1-based; ``None`` when the model said no memory answers."""
        return None if self.choice == NO_CHOICE else int(self.choice)


class GroundedReply(Reply):
    """``control_grounded``: the ids of the shown memories the answer uses, then the short answer."""

    used: tuple[str, ...] = Field(max_length=8)
    answer: AnswerText


class VerdictReply(Reply):
    """``judge_m3`` and ``judge_locomo``: whether the candidate answer is right."""

    verdict: Literal["yes", "no"]

    @property
    def correct(self) -> bool:
        return self.verdict == "yes"


class PlanRef(Reply):
    """A person or moment in a ``control_plan`` reply (:class:`m3agent.graph.references.Reference` once checked)."""

    kind: Kind
    place: Place
    time: str = Field(max_length=8)
    scene: Scene = "any"
    quote: str = Field("", max_length=80)
    about: str = Field("", max_length=80)


Ask = Literal["recall", "seen_again", "same_person", "when", "after", "before", "which_first", "scene",
              "who_speaks", "speaks", "ever_seen", "count_people", "count_so_far", "count_scenes",
              "voice_pitch", "position", "appearance", "still_or_live", "anyone_there"]
"""The operations of a query plan (the ``ask`` enum of ``prompts/control_plan.json``)."""


Direction = Literal["any", "before", "after"]
"""Which way in time a plan looks from its moment."""


class PlanReply(Reply):
    """``control_plan``: the operation a question asks and the people or moments it names."""

    ask: Ask
    direction: Direction
    sense: Literal["any", "seen", "heard"]
    person: PlanRef
    other: PlanRef | None = None

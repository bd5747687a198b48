"""The Python API for agents that embed m3agent: ``m3agent.open(path)`` returns an :class:`Agent`.

An :class:`Agent` calls the same functions as the CLI (``ingest``, ``ask``,
``delete``), with one :class:`~m3agent.settings.Settings` built by
:func:`~m3agent.settings.load_settings` (keyword overrides, ``M3AGENT_*``
environment, ``m3agent.toml``, defaults). Writes open the store for the call
and close it after, as the CLI does, so several processes can share one file;
``search`` and ``ask`` share one read-only store kept open until :meth:`Agent.close`
(it holds the vector index in memory and sees every commit, this process's and
others'), with the character index of each scope cached until the file changes.
The text embedder and the chat model are loaded on first use and kept.
Nothing heavy is imported until a method runs. (The handle is not called
``Memory``: :class:`m3agent.domain.Memory` is one stored memory.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.control.results import SearchResult
    from m3agent.control.steps import Answer
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.pipeline import IngestReport
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


def open(memory: str | Path = "m3agent.db", *, config: str | Path | None = None, **settings: Any) -> Agent:
    """An :class:`Agent` on the memory in ``memory`` (a file path, ``sqlite:///file.db`` or ``postgresql://...``);
    opens nothing, so a SQLite file is created by the first ingest.

    ``settings`` override any setting by name (``llm="openai://host/v1?model=M"``,
    ``media={"clip_seconds": 10}``); ``config`` names a TOML settings file.
    Raises :class:`~m3agent.errors.ConfigError` for invalid settings.
    """
    from m3agent.settings import load_settings

    return Agent(load_settings(config, memory=str(memory), **settings))


class Agent:
    """The handle on one memory store and the settings to write and query it (see the module docstring).

    Holds the loaded models and one read-only store (no transaction stays open, so several processes can
    share one file and write it meanwhile); :meth:`close` (or leaving ``with``) closes the store.
    """

    def __init__(self, settings: Settings) -> None:
        from m3agent.control.people.characters import IndexCache

        self.settings = settings
        self._embedder: Embedder | None = None
        self._chat: ChatModel | None = None
        self._reader: MemoryStore | None = None
        self._indexes = IndexCache()

    def __repr__(self) -> str:
        return f"Agent({str(self.settings.memory)!r})"

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the read store and drop the loaded models (a later call opens and loads them again)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        self._embedder = None
        self._chat = None

    def ingest(self, source: str | Path, *, video_id: str | None = None, max_clips: int | None = None,
               perception_only: bool = False, progress: bool = False) -> IngestReport:
        """Watch ``source`` (file, URL, device) into the memory; calling again resumes after the last stored clip.

        Failed clips are listed in the report (and retried by the next call), not raised.
        """
        from m3agent.pipeline import ingest_source

        return ingest_source(self.settings, str(source), video_id=video_id, perception_only=perception_only,
                             max_clips=max_clips, show_progress=progress)

    def ask(self, question: str, *, video_id: str | None = None, before_clip: int | None = None,
            mode: str | None = None, rounds: int | None = None) -> Answer:
        """Answer ``question`` from the memory, with cited evidence (``mode`` as ``m3agent ask --mode``)."""
        from m3agent.control import AgentConfig, answer_question, run_to_answer
        from m3agent.llm.spec import NO_LLM

        config = AgentConfig.from_settings(self.settings.control, self.settings.llm or NO_LLM, mode=mode)
        store = self._store()
        steps = answer_question(store, self._text_embedder(store), self._chat_model(), question,
                                video_id=video_id, before_clip=before_clip, rounds=rounds, config=config,
                                index=self._character_index(store, video_id, before_clip),
                                max_frame_side=self.settings.media.max_frame_side)
        return run_to_answer(steps)

    def search(self, query: str, k: int = 10, *, video_id: str | None = None,
               before_clip: int | None = None) -> SearchResult:
        """The ``k`` memories that best match ``query`` (hybrid vector + keyword ranking), grouped by clip.

        ``before_clip`` (inclusive) hides later clips; names and ``<character_N>`` tags in the query
        restrict the search to that person, as the agent's ``search_memory`` tool does.
        """
        from m3agent.control import MemorySearcher
        from m3agent.store.location import change_stamp

        store = self._store()
        searcher = MemorySearcher(store, self._text_embedder(store), video_id=video_id, before_clip=before_clip,
                                  index=self._character_index(store, video_id, before_clip),
                                  clips=self._indexes.clips(change_stamp(self.settings.memory.path)))
        return searcher.search("search_memory", query, k)

    def forget(self, *, video: str | None = None, entity: int | None = None, memory: int | None = None) -> None:
        """Delete one video, entity or memory and everything derived from it (crops, snippets, links).

        Exactly one of the three must be given; an unknown id raises :class:`~m3agent.errors.NotFoundError`.
        """
        from m3agent.errors import ConfigError
        from m3agent.store import open_memory

        given = [name for name, value in (("video", video), ("entity", entity), ("memory", memory))
                 if value is not None]
        if len(given) != 1:
            raise ConfigError(f"forget takes exactly one of video=, entity=, memory= (got {len(given)})",
                              hint="e.g. agent.forget(video='interview')")
        with open_memory(self.settings, create=False) as store:
            if video is not None:
                store.delete_video(video)
            elif entity is not None:
                store.delete_entity(entity)
            elif memory is not None:
                store.delete_memory(memory)

    # models and store, loaded on first use --------------------------------------
    def _store(self) -> MemoryStore:
        """The memory, read-only, opened as the CLI opens it (the settings' link acceptance and pool) on first
        use and kept: its vector index stays loaded and catches up with new commits at each search."""
        from m3agent.store import open_memory

        if self._reader is None:
            self._reader = open_memory(self.settings, readonly=True, create=False)
        return self._reader

    def _character_index(self, store: MemoryStore, video_id: str | None, before_clip: int | None) -> CharacterIndex:
        """The scope's character index, reused until the memory file changes."""
        from m3agent.store.location import change_stamp

        if video_id is not None:
            store.get_video(video_id)  # an unknown video is reported as such, not as an empty index
        return self._indexes.get(store, video_id, before_clip, change_stamp(self.settings.memory.path))

    def _text_embedder(self, store: MemoryStore) -> Embedder:
        """The embedder of the store's recorded model (queries must match the stored vectors)."""
        from m3agent.embed import embedder_for_store

        recorded = store.embedding_model()
        if self._embedder is None or (recorded is not None and recorded != (self._embedder.name,
                                                                            self._embedder.dim)):
            self._embedder = embedder_for_store(recorded, self.settings.embedder)
        return self._embedder

    def _chat_model(self) -> ChatModel | None:
        """The control LLM of the settings, or ``None`` for ``llm="none"`` (select mode reranks)."""
        from m3agent.llm import chat_model_from_settings
        from m3agent.llm.spec import uses_llm

        if self._chat is None and uses_llm(self.settings.llm):
            self._chat = chat_model_from_settings(self.settings)
        return self._chat

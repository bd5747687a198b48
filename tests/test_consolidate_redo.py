"""``m3agent consolidate --redo`` on a real SQLite memory with the real MiniLM embedder and the scripted model.

The conversation of test_consolidate (Ann's name in clips 1 and 2, her tea, then "Eve"), with the name
the perception writer stored when she introduced herself in clip 1 ("I'm Ann"). Consolidation reinforces
that name twice and weakens it once (Eve); a redo must take all of it back, keep the name, and give the
same memory as the first consolidation, however often it is redone or wherever it was interrupted.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.domain import Clip, Memory, MemoryKind
from m3agent.memorize.writers.perception import PROVENANCE
from m3agent.settings import load_settings
from m3agent.store import open_store
from test_consolidate import ann_replies, fact, scripted, semantic, write_talk
from test_memorize_world import VIDEO, minilm

SELF_NAME = "<voice_1>'s name is Ann."


def _self_name(clip: Clip) -> list[Memory]:
    if clip.index != 1:
        return []
    return [Memory(MemoryKind.SEMANTIC, SELF_NAME, VIDEO, 1, clip.start_s + 3, clip.start_s + 5, (1,),
                   confidence=0.7, provenance=PROVENANCE)]


@pytest.fixture
def talk(tmp_path: Path) -> Iterator[Path]:
    """test_consolidate's conversation plus the self-stated name of clip 1 (entities 1-3: voices of clip 0)."""
    yield write_talk(tmp_path, _self_name)


def consolidate(db: Path, chat: Any, *, redo: bool = False) -> Any:
    from m3agent.memorize.consolidation.run import consolidate_store

    with open_store(str(db)) as store:
        (report,) = consolidate_store(store, load_settings(memory=str(db), llm="none"), chat, minilm(), [VIDEO],
                                      redo=redo, show_progress=False)
    return report


def test_redo_takes_back_what_consolidation_did_and_does_it_again(talk: Path) -> None:
    before = semantic(talk)
    assert before == [(SELF_NAME, 1, 1, 1.0, 0.7, PROVENANCE, ())]
    first = consolidate(talk, scripted(*ann_replies()))
    assert (first.facts_written, first.reinforced, first.contradicted) == (2, 2, 1) and first.forgotten is None
    once = semantic(talk)
    name = next(row for row in once if row[0] == SELF_NAME)
    assert name[2:4] == (2, 2.5) and name[5] == PROVENANCE, "reinforced in clips 1 and 2, weakened by Eve"
    with open_store(str(talk)) as store, store.video_lock(VIDEO):
        forgotten = store.forget_consolidation(VIDEO)
    assert (forgotten.facts, forgotten.clips, forgotten.restored) == (2, 4, 1)
    assert semantic(talk) == before, "only the self-stated name stays, as it was before consolidation"
    again = consolidate(talk, scripted(*ann_replies()))
    assert semantic(talk) == once and again.clips_consolidated == 4
    redone = consolidate(talk, scripted(*ann_replies()), redo=True)
    assert redone.forgotten is not None and redone.forgotten.facts == 2 and redone.clips_already == 0
    assert semantic(talk) == once, "redoing twice weighs the name no more than doing it once"


def test_an_interrupted_redo_is_continued_by_a_plain_run(talk: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole.db"
    shutil.copy(talk, whole)
    consolidate(whole, scripted(*ann_replies()))
    consolidate(talk, scripted(*ann_replies()))

    def killed(_messages: Any) -> str:
        raise KeyboardInterrupt  # a kill during the second unit's model call

    with pytest.raises(KeyboardInterrupt):
        consolidate(talk, scripted(ann_replies()[0], killed), redo=True)
    with open_store(str(talk), readonly=True, create=False) as store:
        assert sorted(store.consolidated_clips(VIDEO)) == [0, 1]
    resumed = consolidate(talk, scripted(*ann_replies()[1:]))
    assert resumed.clips_already == 2 and resumed.clips_consolidated == 2
    assert semantic(talk) == semantic(whole)


def test_the_command_redoes_with_a_report(talk: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from m3agent.cli.main import main

    with open_store(str(talk), readonly=True, create=False) as store:
        morning = next(m.id for m in store.memories(VIDEO) if "Good morning Ann" in m.text)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"facts": [fact("<voice_1>", "name", "Ann", [f"m{morning}"])]}, {"facts": []},
                                   {"facts": []}]))
    runner = CliRunner()
    args = ["consolidate", "--memory", str(talk), "--llm", f"scripted:{replies}"]
    assert runner.invoke(main, args).exit_code == 0
    out = runner.invoke(main, [*args, "--redo", "--json"])
    assert out.exit_code == 0, out.output
    (report,) = json.loads(out.stdout)["videos"]
    assert report["forgotten"] == {"video_id": VIDEO, "facts": 0, "clips": 4, "restored": 1}
    assert report["clips_consolidated"] == 4 and report["reinforced"] == 1
    assert [row[2:4] for row in semantic(talk)] == [(1, 2.0)], "reinforced once, not twice"
    text = runner.invoke(main, [*args, "--redo"])
    assert text.exit_code == 0 and "forgot 0 facts of 4 clips" in text.output
    missing = runner.invoke(main, [*args, "--redo", "--video", "nope"])
    assert missing.exit_code != 0 and "no video 'nope'" in missing.output and "Traceback" not in missing.output

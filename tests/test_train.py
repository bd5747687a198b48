"""Training the control policy: the split, the reward, the rollout's tokens, a CPU smoke run of GRPO that
resumes, the GGUF export, and the exported model answering through the normal ``--llm llamacpp:PATH`` path.

One module fixture trains once (1 step, then resumed to 2; a group of 2 one-round rollouts of one question,
8 tokens a reply) on a two-conversation LoCoMo cut from the real file (first session only), with the real
packaged qwen-0.5b (dequantised once into the cache), the real store and search; the other tests read what
it left. Marked ``slow``: the model's load and the step are minutes on a busy 2-core machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from m3agent.bench.locomo_data import load_locomo
from m3agent.settings import Settings, TrainSettings, load_settings
from m3agent.train.episodes import split_by_conversation
from m3agent.train.reward import leaks_internal_id, reward, set_f1

TRAIN_CONV, HELD_CONV = "conv-26", "conv-30"
NAME = "smoke-grpo"


def _locomo(data_dir: Path) -> Path:
    path = data_dir / "locomo" / "locomo10.json"
    if not path.is_file():
        pytest.skip(f"LoCoMo not found at {path}")
    return path


# split and reward (no model) ----------------------------------------------------------------------------


def test_the_split_is_by_conversation_and_never_by_question(data_dir: Path) -> None:
    samples = load_locomo(_locomo(data_dir))
    split = split_by_conversation(samples, ["conv-48", "conv-49", "conv-50"], [1, 2, 3, 4], max_train=50,
                                  max_held_out=20)  # fmt: skip
    assert {e.video_id for e in split.held_out} <= {"conv-48", "conv-49", "conv-50"}
    assert not {e.video_id for e in split.train} & {"conv-48", "conv-49", "conv-50"}
    assert set(split.train_conversations).isdisjoint(split.held_out_conversations)
    assert len(split.train) == 50 and len(split.held_out) == 20
    assert all(e.evidence and e.category in (1, 2, 3, 4) for e in split.train)
    with pytest.raises(Exception, match="unknown LoCoMo conversation"):
        split_by_conversation(samples, ["conv-99"], [1])


def test_the_reward_pays_answers_and_citations_and_charges_format_errors_and_leaks() -> None:
    weights = TrainSettings()
    right = reward(weights, answer="7 May 2023", gold="7 May 2023", category=2, cited_evidence=["D1:3"],
                   gold_evidence=["D1:3"], format_errors=0)  # fmt: skip
    assert right.f1 == 1.0 and right.evidence_f1 == 1.0 and right.total == pytest.approx(1.5)
    cited = ["D1:3", "D1:4", "D2:1", "D2:2"]
    sloppy = reward(weights, answer="<voice_2> on 7 May 2023", gold="7 May 2023", category=2,
                    cited_evidence=cited, gold_evidence=["D1:3"], format_errors=2)  # fmt: skip
    assert sloppy.leaked and sloppy.format_errors == 2 and 0 < sloppy.evidence_f1 < 0.5
    assert sloppy.total < right.total - 1.0
    nothing = reward(weights, answer="", gold="Paris", category=5, cited_evidence=[], gold_evidence=[],
                     format_errors=0)  # fmt: skip
    assert nothing.total == 0.0  # no answer, no search bonus: an empty rollout earns nothing
    assert leaks_internal_id("at CLIP_3") and leaks_internal_id("see [m12]") and not leaks_internal_id("Caroline")
    assert set_f1(["a", "b"], ["b"]) == pytest.approx(2 / 3) and set_f1([], ["a"]) == 0.0


# the trained run (one module fixture) -------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    settings: Settings
    data: Path
    store: Path
    first: Any
    resumed: Any
    first_seconds: float
    first_cpu: float
    model: Path
    load: str


def _tiny_locomo(source: Path, out: Path) -> Path:
    """The two conversations' first sessions and two of their questions answered there (real text)."""
    raw = json.loads(source.read_text(encoding="utf-8"))
    kept = []
    for item in raw:
        if item["sample_id"] not in (TRAIN_CONV, HELD_CONV):
            continue
        conv = item["conversation"]
        small = {k: conv[k] for k in ("speaker_a", "speaker_b", "session_1", "session_1_date_time")}
        small["session_1"] = conv["session_1"][:12]
        turns = {t["dia_id"] for t in small["session_1"]}
        qa = [q for q in item["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")
              and all(e in turns for e in q["evidence"])][:2]  # fmt: skip
        kept.append({"sample_id": item["sample_id"], "conversation": small, "qa": qa})
    out.write_text(json.dumps(kept), encoding="utf-8")
    return out


def _linked_cache(real: Settings, cache: Path) -> None:
    """A fresh cache that shares the packaged GGUF and its dequantised copy with the real one (read only)."""
    from m3agent.llm import packaged
    from m3agent.train.model import base_dir, prepare_base

    model = packaged.lookup("qwen-0.5b")
    gguf = packaged.gguf_path(model, real.resolved_cache_dir())
    (cache / "models").mkdir(parents=True)
    for path in (gguf, gguf.with_name(gguf.name + ".verified")):
        (cache / "models" / path.name).symlink_to(path)
    (cache / "train" / "base").mkdir(parents=True)
    base = prepare_base(real, "qwen-0.5b")
    base_dir(load_settings(cache_dir=cache), "qwen-0.5b").symlink_to(base)


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("trl", reason="the train extra is not installed (pip install 'm3agent[train]')")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from m3agent.llm import packaged
    from m3agent.train import service

    real = Settings()
    if packaged.state(packaged.lookup("qwen-0.5b"), real.resolved_cache_dir()) == "missing":
        pytest.skip("qwen-0.5b is not pulled (m3agent models pull qwen-0.5b; scripts/setup.sh does it)")
    root = tmp_path_factory.mktemp("train")
    _linked_cache(real, root / "cache")
    data = _tiny_locomo(_locomo(data_dir), root / "locomo.json")
    # the least that is still a GRPO step: one question, a group of 2 one-round rollouts (the seed search's
    # 2 memories, then the answer), 8 tokens a reply, no activation recomputation (a short sequence fits)
    small = {"held_out": [HELD_CONV], "steps": 1, "questions_per_step": 1, "group": 2, "rounds": 1,
             "max_new_tokens": 8, "max_context_tokens": 1024, "save_every": 1, "gradient_checkpointing": False}
    settings = load_settings(cache_dir=root / "cache", train=TrainSettings(**small), control={"search_k": 2})
    the_plan = service.plan(settings, data=data, store_path=root / "locomo.db")
    started, cpu = time.perf_counter(), time.process_time()
    first = service.train(the_plan, NAME, show_progress=False)
    first_seconds, first_cpu = time.perf_counter() - started, time.process_time() - cpu
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    resumed_settings = settings.model_copy(update={"train": settings.train.model_copy(update={"steps": 2})})
    resumed = service.train(service.plan(resumed_settings, data=data, store_path=root / "locomo.db"), NAME,
                            show_progress=False)  # fmt: skip
    model = service.export(resumed_settings, NAME)
    return Run(resumed_settings, data, root / "locomo.db", first, resumed, first_seconds, first_cpu, model, load)


@pytest.mark.slow
def test_a_cpu_smoke_run_trains_records_and_plots(run: Run) -> None:
    from m3agent.train.curve import read_steps

    print(f"smoke run (load, 1 step, save): {run.first_seconds:.1f} s wall, {run.first_cpu:.1f} CPU s "
          f"(load average {run.load})")
    assert run.first.steps == 1 and (run.first.run_dir / "checkpoints" / "checkpoint-1").is_dir()
    steps = read_steps(run.first.run_dir)
    assert [s["step"] for s in steps] == [1, 2]
    first = steps[0]
    assert first["sampled_tokens"] > 0 and first["loss"] is not None
    assert -10 < first["reward"] <= 1.5 and 0 <= first["f1"] <= 1
    assert (run.first.run_dir / "curve.png").stat().st_size > 1000
    assert (run.resumed.adapter / "adapter_config.json").is_file()


@pytest.mark.slow
def test_a_stopped_run_resumes_from_its_checkpoint(run: Run) -> None:
    assert run.resumed.steps == 2, "the second call continued from checkpoint-1 to step 2"
    assert (run.resumed.run_dir / "checkpoints" / "checkpoint-2").is_dir()
    facts = json.loads((run.resumed.run_dir / "run.json").read_text())
    assert facts["held_out_conversations"] == [HELD_CONV] and facts["train_conversations"] == [TRAIN_CONV]


@pytest.mark.slow
def test_a_rollout_keeps_the_chat_template_and_masks_what_the_policy_did_not_say(run: Run) -> None:
    """Replayed replies (a malformed one, a search, an answer) through the real frame, store and search: the
    trajectory's tokens are the template's rendering of the conversation, and only the replies are trained."""
    from m3agent.embed import create_embedder
    from m3agent.store import open_store
    from m3agent.train.model import base_dir, load_model
    from m3agent.train.rollout import ChatFrame, Rollout
    from m3agent.train.service import plan, rollout

    _, tokenizer = load_model(base_dir(run.settings, "qwen-0.5b"), 2)
    frame = ChatFrame.of(tokenizer)
    end = tokenizer.convert_tokens_to_ids(frame.end_of_turn)
    replies = ["not json at all",
               '{"thought": "I need the date.", "action": "search_memory", "content": "support group"}',
               '{"thought": "It was [m1].", "action": "answer", "content": "7 May 2023"}']  # fmt: skip

    class Replay:
        def __init__(self) -> None:
            self.left = list(replies)

        def generate(self, ids: Any, max_new_tokens: int, temperature: float) -> list[int]:
            return [*tokenizer.encode(self.left.pop(0), add_special_tokens=False), end]

    settings = run.settings.model_copy(update={"train": run.settings.train.model_copy(update={"rounds": 3})})
    episode = plan(settings, data=run.data, store_path=run.store).split.train[0]
    with open_store(str(run.store)) as store:
        environment: Rollout = rollout(settings, store, create_embedder(settings.embedder), tokenizer)
        trajectory = environment.play(episode, Replay())
    assert trajectory.rounds == 3 and trajectory.format_errors == 1 and trajectory.answer is not None
    assert trajectory.answer.answered and trajectory.reward is not None
    sampled = [t for t, m in zip(trajectory.completion_ids, trajectory.env_mask, strict=True) if m]
    assert tokenizer.decode(sampled) == "".join(r + frame.end_of_turn for r in replies)
    assert 0 in trajectory.env_mask and len(trajectory.env_mask) == len(trajectory.completion_ids)
    whole = tokenizer.decode(trajectory.prompt_ids + trajectory.completion_ids)
    users = [t.removeprefix("[user] ") for t in trajectory.transcript if t.startswith("[user] ")]
    system = whole.split("<|im_start|>system\n", 1)[1].split(frame.end_of_turn, 1)[0]
    messages = [{"role": "system", "content": system}]
    for user, reply in zip(users, replies, strict=True):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert whole == rendered.rstrip("\n"), "the rollout is the runtime template's rendering, token for token"
    assert "Searched knowledge" in users[2] and "could not be used" in users[1]


@pytest.mark.slow
@pytest.mark.llm
def test_the_exported_gguf_answers_through_the_normal_llm_path(run: Run) -> None:
    import gguf

    from m3agent.control import AgentConfig, ask
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.store import open_store
    from m3agent.train.service import plan

    base = gguf.GGUFReader(str(run.settings.resolved_cache_dir() / "models" / "qwen-0.5b.gguf"))
    exported = gguf.GGUFReader(str(run.model))
    assert [t.name for t in exported.tensors] == [t.name for t in base.tensors]
    assert str(exported.fields["tokenizer.chat_template"].contents()) == str(
        base.fields["tokenizer.chat_template"].contents())
    assert "Q8_0" in {t.tensor_type.name for t in exported.tensors}
    card = run.model.with_suffix(".md").read_text()
    assert "GRPO" in card and HELD_CONV in card and "steps: 2" in card
    spec = f"llamacpp:{run.model}"
    chat = chat_model_from_settings(run.settings, spec)
    episode = plan(run.settings, data=run.data, store_path=run.store).split.held_out[0]
    config = AgentConfig.from_settings(run.settings.control, spec, mode="agent", rounds=2, max_tokens=96)
    try:
        with open_store(str(run.store)) as store:
            answer = ask(store, create_embedder(run.settings.embedder), chat, episode.question,
                         video_id=episode.video_id, config=config)  # fmt: skip
    finally:
        chat.close()  # type: ignore[attr-defined]
    assert answer.failure is None and answer.answered and answer.text, answer.raw_text
    assert answer.usage.total_tokens > 0, "the exported model itself answered"


@pytest.mark.slow
def test_models_list_shows_the_trained_model_beside_the_packaged_ones(run: Run) -> None:
    from click.testing import CliRunner

    from m3agent.cli.main import main

    result = CliRunner().invoke(main, ["models", "list", "--json"],
                                env={"M3AGENT_CACHE_DIR": str(run.settings.resolved_cache_dir())})  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)["models"]}
    assert rows[NAME]["kind"] == "trained" and rows[NAME]["spec"] == f"llamacpp:{run.model}"
    assert "2 GRPO steps" in rows[NAME]["title"] and rows["qwen-0.5b"]["kind"] == "packaged"

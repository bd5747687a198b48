"""Expert iteration: one tiny iteration end to end through ``m3agent train control --method expert`` (sample with
the llama.cpp runtime, keep, fine-tune with TRL's SFTTrainer, export the GGUF), resumed after an interruption,
then the exported model answering through the normal ``--llm llamacpp:PATH`` path.

The run trains the packaged SmolLM2-135M (a GGUF path, as tests/test_train.py) at one thread on the same
two-conversation LoCoMo cut: two training questions, one greedy and two sampled rollouts each of up to two
rounds, 12 tokens a reply, every sampled rollout eligible (``keep = threshold`` at -10: a 135M model rarely earns
a reward, and the test is of the mechanics), one SFT epoch. The rollouts file is made to look interrupted
before the run: the first question done (a hand-made record), a second line cut short.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llm_server import smollm2_path
from m3agent.settings import Settings, TrainSettings, load_settings
from m3agent.train.expert import QuestionRollouts, Sample, kept
from test_train import HELD_CONV, TRAIN_CONV, _linked_cache, _locomo, _tiny_locomo

NAME = "smoke-expert"
DONE_QID, TODO_QID = f"{TRAIN_CONV}#0", f"{TRAIN_CONV}#1"


def _sample(reward: float, completion: tuple[int, ...] = (5, 6, 7), mask: tuple[int, ...] = (1, 1, 1)) -> Sample:
    return Sample((1, 2, 3, 4), completion, mask, reward, max(0.0, reward), 0.0, 0, 1, "x")


# the filter (no model) ------------------------------------------------------------------------------------


def test_kept_rollouts_beat_the_greedy_one_or_a_threshold_best_first_without_duplicates() -> None:
    rollouts = QuestionRollouts("q", _sample(0.5), (
        _sample(0.4, (8,)), _sample(0.9, (9,)), _sample(0.9, (9,)), _sample(0.7, (10,)), _sample(0.2, (11,))),
        1.0)  # fmt: skip
    beat = TrainSettings(keep="beat_greedy", keep_min_reward=0.25, keep_per_question=3)
    assert [s.reward for s in kept(rollouts, beat)] == [0.9, 0.7], "above greedy's 0.5, the duplicate 0.9 once"
    one = beat.model_copy(update={"keep_per_question": 1})
    assert [s.completion_ids for s in kept(rollouts, one)] == [(9,)], "the best one"
    fixed = TrainSettings(keep="threshold", keep_min_reward=0.3, keep_per_question=5)
    assert [s.reward for s in kept(rollouts, fixed)] == [0.9, 0.7, 0.4], "the threshold alone: greedy ignored"
    failing = QuestionRollouts("q", _sample(1.5), (_sample(0.2), _sample(-0.25)), 1.0)
    assert kept(failing, beat) == [] and kept(failing, fixed) == []
    assert QuestionRollouts.from_json(rollouts.to_json()) == rollouts, "a rollouts line reads back as written"


def test_progress_without_a_terminal_is_a_line_a_question_with_the_time_left(capsys: pytest.CaptureFixture[str]
                                                                             ) -> None:  # fmt: skip
    """Under ``nohup`` (stderr a file) a rich bar prints nothing until the iteration's rollouts are all done."""
    from m3agent.train.expert import _bar

    with _bar(4, 1, 2, True) as advance:
        advance(QuestionRollouts("q1", _sample(0.0), (_sample(0.5), _sample(0.25)), 1.0))
        advance(QuestionRollouts("q2", _sample(0.0), (_sample(0.0), _sample(0.25)), 1.0))
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("iteration 2: rollouts 2/4 (reward 0.375), about ") and lines[0].endswith(" min left")
    assert lines[1].startswith("iteration 2: rollouts 3/4 (reward 0.250)")
    with _bar(4, 0, 1, False) as advance:  # progress off: nothing at all
        advance(QuestionRollouts("q1", _sample(0.0), (_sample(0.5),), 1.0))
    assert capsys.readouterr().err == ""


def test_an_iteration_samples_with_the_last_policy_that_was_fine_tuned(tmp_path: Path) -> None:
    from m3agent.train.expert import Iteration, latest_trained

    def make(number: int, trained: bool) -> Iteration:
        iteration = Iteration.at(tmp_path, number)
        iteration.folder.mkdir(parents=True)
        if trained:
            iteration.adapter.mkdir()
            (iteration.adapter / "adapter_config.json").write_text("{}")
            iteration.policy.write_bytes(b"GGUF")
        return iteration

    assert latest_trained(tmp_path, 1) is None, "the first iteration samples with the base"
    first, _, third = make(1, True), make(2, False), make(3, True)
    assert latest_trained(tmp_path, 3) == first, "iteration 2 kept nothing: iteration 3 samples with 1's policy"
    assert latest_trained(tmp_path, 4) == third
    third.policy.unlink()  # an export cut short: its adapter alone is not a policy yet
    assert latest_trained(tmp_path, 4) == first


# the runtime's token continuation (the packaged SmolLM2) ---------------------------------------------------


@pytest.mark.llm
def test_the_runtime_continues_a_token_sequence_reproducibly_and_stops_after_the_end_of_turn() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    pytest.importorskip("transformers", reason="the train extra is not installed (pip install 'm3agent[train]')")
    from transformers import AutoTokenizer

    from m3agent.llm.llamacpp import LlamaCppChat
    from m3agent.train.model import prepare_base, resolve_base

    tokenizer: Any = AutoTokenizer.from_pretrained(prepare_base(resolve_base(Settings(), str(smollm2_path()))))
    end = int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    prompt = list(tokenizer.apply_chat_template([{"role": "user", "content": "Name three colours."}],
                                                tokenize=True, add_generation_prompt=True)["input_ids"])  # fmt: skip
    def worker() -> LlamaCppChat:
        return LlamaCppChat(smollm2_path(), n_ctx=512, n_threads=1, n_threads_batch=1, prompt_cache_mb=0)

    first, second = worker(), worker()
    try:
        sampled = [w.continue_tokens(prompt, max_tokens=24, temperature=1.0, stop_tokens=[end], seed=7)
                   for w in (first, second)]  # fmt: skip
        greedy = first.continue_tokens(prompt, max_tokens=48, temperature=0.0, stop_tokens=[end], seed=1)
        other = second.continue_tokens(prompt, max_tokens=24, temperature=1.0, stop_tokens=[end], seed=8)
        cut = second.continue_tokens(prompt, max_tokens=3, temperature=1.0, stop_tokens=[end], seed=9)
    finally:
        first.close()
        second.close()
    for out in (greedy, *sampled, other):
        assert out[-1] == end or len(out) in (24, 48), "a reply stops at its end of turn or at the limit"
        assert end not in out[:-1], "and not later"
    assert str(tokenizer.decode(greedy)).strip(), "the greedy reply says something"
    assert sampled[0] == sampled[1], "one seed, one prompt: a fresh worker draws the same tokens (the seed is used)"
    assert other != sampled[0], "another seed draws others (temperature 1)"
    assert len(cut) == 3, "max_tokens cuts the reply"


def test_a_continuation_under_the_agents_reply_grammar_is_a_reply_the_agent_reads() -> None:
    """Rollouts are sampled under the agent's reply schema, as the product answers: at temperature 1 every draw of
    the 135M model is JSON of the schema (without the grammar it mostly is not: issue 46's 0.5B run).

    On the compiled runtime: the caps assume two characters a token, which the 135M model's noise at temperature 1
    does not always keep (the prebuilt runtime's draws for the same seeds are others, and one of six ran into the
    token limit at 1.5 characters a token)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    pytest.importorskip("transformers", reason="the train extra is not installed (pip install 'm3agent[train]')")
    from transformers import AutoTokenizer

    from m3agent.llm.llamacpp import LlamaCppChat
    from m3agent.llm.schema import parse_reply
    from m3agent.train.model import prepare_base, resolve_base
    from m3agent.train.rollout import rollout_schema

    tokenizer: Any = AutoTokenizer.from_pretrained(prepare_base(resolve_base(Settings(), str(smollm2_path()))))
    end = int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    limit = Settings().train.max_new_tokens
    schema = rollout_schema(False, limit)
    assert schema["properties"]["thought"]["maxLength"] == limit - 24 and "who_is_at" not in str(schema)
    prompt = list(tokenizer.apply_chat_template(
        [{"role": "user", "content": "Find out where Dana lives. Reply with JSON: thought, action, content."}],
        tokenize=True, add_generation_prompt=True)["input_ids"])  # fmt: skip
    chat = LlamaCppChat(smollm2_path(), n_ctx=1024, n_threads=1, n_threads_batch=1, prompt_cache_mb=0,
                        runtime="llama-cpp-python")
    try:
        draws = [chat.continue_tokens(prompt, max_tokens=limit, temperature=1.0, stop_tokens=[end], seed=seed,
                                      schema=schema) for seed in range(6)]  # fmt: skip
    finally:
        chat.close()
    for draw in draws:
        text = str(tokenizer.decode(draw, skip_special_tokens=True))
        parsed, error = parse_reply(text, schema)
        assert error is None and parsed is not None, f"not JSON of the schema: {text!r} ({error}, {len(draw)} tokens)"
        assert parsed["action"] in schema["properties"]["action"]["enum"]
    assert len({tuple(d) for d in draws}) > 1, "still sampled: the grammar only removes what it forbids"


# one iteration, resumed, through the CLI (one module fixture) ----------------------------------------------


@dataclass(frozen=True)
class Run:
    settings: Settings
    data: Path
    report: dict[str, Any]
    folder: Path
    seconds: float
    planted: QuestionRollouts


def _planted(tokenizer: Any) -> QuestionRollouts:
    """A finished first question as an interrupted run left it: a greedy rollout and one sampled that beats it."""
    prompt = tuple(tokenizer.apply_chat_template([{"role": "user", "content": "When?"}], tokenize=True,
                                                 add_generation_prompt=True)["input_ids"])  # fmt: skip
    reply = tuple(tokenizer.encode('{"thought": "t", "action": "answer", "content": "May"}<|im_end|>',
                                   add_special_tokens=False))  # fmt: skip
    good = Sample(prompt, reply, (1,) * len(reply), 1.0, 1.0, 0.0, 0, 1, "May")
    return QuestionRollouts(DONE_QID, Sample(prompt, reply[:3], (1, 1, 1), 0.0, 0.0, 0.0, 0, 1, ""), (good,), 0.5)


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("trl", reason="the train extra is not installed (pip install 'm3agent[train]')")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from click.testing import CliRunner
    from transformers import AutoTokenizer

    from m3agent.cli.main import main
    from m3agent.train.catalogue import run_dir
    from m3agent.train.model import resolve_base

    source = smollm2_path()
    root = tmp_path_factory.mktemp("expert")
    cache = root / "cache"
    _linked_cache(Settings(), cache, source)
    data = _tiny_locomo(_locomo(data_dir), root / "locomo.json")
    small = {"keep": "threshold", "keep_min_reward": -10, "sft_epochs": 1, "sft_accumulation": 1, "threads": 1,
             "max_context_tokens": 1024}  # fmt: skip
    env = {"M3AGENT_CACHE_DIR": str(cache), "M3AGENT_CONTROL__SEARCH_K": "1",
           **{f"M3AGENT_TRAIN__{k.upper()}": str(v) for k, v in small.items()}}  # fmt: skip
    settings = load_settings(cache_dir=cache, train=TrainSettings(base=str(source), held_out=[HELD_CONV],
                                                                  max_questions=2, **small))  # fmt: skip
    folder = run_dir(cache, NAME)
    planted = _planted(AutoTokenizer.from_pretrained(resolve_base(settings, str(source)).folder))
    rollouts = folder / "iterations" / "1" / "rollouts.jsonl"
    rollouts.parent.mkdir(parents=True)
    rollouts.write_text(planted.to_json() + "\n" + planted.to_json()[:40], encoding="utf-8")  # cut mid-line
    args = ["train", "control", "--method", "expert", "--name", NAME, "--base", str(source), "--data", str(data),
            "--held-out", HELD_CONV, "--iterations", "1", "--samples", "2", "--rounds", "2", "--max-new-tokens", "12",
            "--max-questions", "2", "--json"]  # fmt: skip
    started = time.perf_counter()
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return Run(settings, data, report, folder, time.perf_counter() - started, planted)


@pytest.mark.slow
@pytest.mark.llm
def test_one_iteration_samples_keeps_fine_tunes_and_exports(run: Run) -> None:
    from m3agent.train.curve import read_steps
    from m3agent.train.expert import Iteration, read_rollouts

    print(f"one tiny expert iteration through the CLI (ingest, 1 question rolled out, SFT, export): "
          f"{run.seconds:.1f} s wall")
    assert run.report["method"] == "expert" and run.report["steps"] == 1
    iteration = Iteration.at(run.folder, 1)
    done = read_rollouts(iteration.rollouts)
    assert [q.qid for q in done] == [DONE_QID, TODO_QID], "the planted question was not rolled out again"
    assert done[0] == run.planted, "and its record is as it was; the cut line was dropped"
    fresh = done[1]
    assert len(fresh.sampled) == 2 and fresh.greedy.rounds >= 1
    assert fresh.sampled[0].completion_ids != fresh.sampled[1].completion_ids, "sampled at temperature 1"
    for sample in (fresh.greedy, *fresh.sampled):
        assert len(sample.env_mask) == len(sample.completion_ids) and sample.trained_tokens > 0
    record = read_steps(run.folder)[-1]
    chosen = kept(run.planted, run.settings.train) + kept(fresh, run.settings.train)
    assert record["kept"] == 2 == len(chosen), "one kept per question (every rollout eligible at -10)"
    assert record["sft_tokens"] == sum(s.trained_tokens for s in chosen) > 0
    assert record["questions"] == 2 and record["rollouts"] == 5 and record["sft_loss"] is not None
    assert record["rollout_s"] == pytest.approx(run.planted.seconds + fresh.seconds, abs=0.2), \
        "the iteration's sampling time counts the planted question's, sampled by an earlier call"
    assert iteration.trained() and iteration.policy.is_file() and iteration.done
    assert (run.folder / "curve.png").stat().st_size > 1000
    assert (run.folder / "adapter" / "adapter_config.json").is_file()
    model = Path(run.report["model"])
    assert model.read_bytes()[:4] == b"GGUF" and model.stat().st_size == iteration.policy.stat().st_size
    card = model.with_suffix(".md").read_text()
    assert "expert iteration" in card and "iteration 1: reward" in card and "kept 2 rollouts" in card


@pytest.mark.slow
@pytest.mark.llm
def test_the_fine_tuning_loss_sees_only_the_policys_tokens(run: Run) -> None:
    """A rollout with a malformed reply, a search and an answer (three replies, two observations between them)
    through the real frame, store and search: TRL's labels are the replies' tokens, -100 everywhere else."""
    from transformers import AutoTokenizer

    from m3agent.embed import create_embedder
    from m3agent.store import open_store
    from m3agent.train.expert import Sample
    from m3agent.train.model import load_model, resolve_base
    from m3agent.train.session import plan, rollout
    from m3agent.train.sft import _adapted, _trainer

    folder = resolve_base(run.settings, run.settings.train.base).folder
    tokenizer: Any = AutoTokenizer.from_pretrained(folder)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    replies = ["not json at all",
               '{"thought": "I need the date.", "action": "search_memory", "content": "support group"}',
               '{"thought": "It was [m1].", "action": "answer", "content": "7 May 2023"}']  # fmt: skip

    class Replay:
        def __init__(self) -> None:
            self.left = list(replies)

        def generate(self, ids: Any, max_new_tokens: int, temperature: float, schema: Any = None) -> list[int]:
            return [*tokenizer.encode(self.left.pop(0), add_special_tokens=False), end]

    settings = run.settings.model_copy(update={"train": run.settings.train.model_copy(update={"rounds": 3})})
    the_plan = plan(settings, data=run.data)
    with open_store(str(the_plan.store_path)) as store:
        trajectory = rollout(settings, store, create_embedder(settings.embedder), tokenizer).play(
            the_plan.split.train[0], Replay())  # fmt: skip
    sample = Sample.of(trajectory)
    model, tokenizer = load_model(folder, 1)
    model, lora = _adapted(model, settings.train, None)
    trainer = _trainer(settings.train, model, tokenizer, lora, [sample], Path(run.folder) / "mask-check")
    row = trainer.train_dataset[0]
    assert row["input_ids"] == [*sample.prompt_ids, *sample.completion_ids]
    labelled = [t for t in row["labels"] if t != -100]
    assert tokenizer.decode(labelled) == "".join(r + "<|im_end|>" for r in replies), "the replies, nothing else"
    assert len(labelled) == sample.trained_tokens < len(sample.completion_ids), "the observations are masked"
    assert all(t == -100 for t in row["labels"][: len(sample.prompt_ids)]), "the prompt is masked"


@pytest.mark.slow
@pytest.mark.llm
def test_the_next_iteration_fine_tunes_the_adapter_this_one_trained(run: Run) -> None:
    from m3agent.train.expert import Iteration
    from m3agent.train.model import load_model, resolve_base
    from m3agent.train.sft import _adapted

    model, _ = load_model(resolve_base(run.settings, run.settings.train.base).folder, 1)
    model, fresh = _adapted(model, run.settings.train, Iteration.at(run.folder, 1).adapter)
    assert fresh is None, "no new LoRA: the previous adapter is trained on"
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert any(float(p.detach().abs().sum()) > 0 for n, p in trainable.items() if "lora_B" in n), \
        "its B matrices carry iteration 1's update (a fresh adapter starts them at zero)"


@pytest.mark.slow
@pytest.mark.llm
def test_the_trained_model_answers_through_the_normal_llm_path_and_is_listed(run: Run) -> None:
    from click.testing import CliRunner

    from m3agent.bench.locomo.data import load_locomo
    from m3agent.cli.main import main
    from m3agent.control import AgentConfig, ask
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.store import open_store
    from m3agent.train.episodes import ingest
    from m3agent.train.session import plan

    spec = f"llamacpp:{run.report['model']}?n_threads=1&n_threads_batch=1"
    chat = chat_model_from_settings(run.settings, spec)
    the_plan = plan(run.settings, data=run.data)
    episode = the_plan.split.held_out[0]
    config = AgentConfig.from_settings(run.settings.control, spec, mode="agent", rounds=2, max_tokens=96)
    embedder = create_embedder(run.settings.embedder)
    try:
        with open_store(str(the_plan.store_path)) as store:
            assert {v.video_id for v in store.videos()} == {TRAIN_CONV}, "training embedded its questions' only"
            ingest(store, embedder, load_locomo(run.data), run.settings.media.clip_seconds)
            answer = ask(store, embedder, chat, episode.question, video_id=episode.video_id, config=config)
    finally:
        chat.close()  # type: ignore[attr-defined]
    assert answer.failure is None and answer.answered and answer.text, answer.raw_text
    assert answer.usage.total_tokens > 0, "the trained model itself answered"
    listed = CliRunner().invoke(main, ["models", "list", "--json"],
                                env={"M3AGENT_CACHE_DIR": str(run.settings.resolved_cache_dir())})  # fmt: skip
    rows = {r["name"]: r for r in json.loads(listed.output)["models"]}
    assert rows[NAME]["kind"] == "trained" and rows[NAME]["title"].endswith(", 1 expert iteration")


@pytest.mark.slow
@pytest.mark.llm
def test_held_out_scores_compare_the_loops_and_grounded_answers_and_resume(run: Run) -> None:
    """Before / after / grounded on one held-out question: each answer is kept as it comes, and a second call
    answers nothing again (its files unchanged) and scores alike."""
    from m3agent.train.catalogue import run_dir
    from m3agent.train.session import HELD_OUT, before_after, plan

    the_plan = plan(run.settings, data=run.data, max_held_out=1)
    first = before_after(the_plan, NAME)
    folder = run_dir(run.settings.resolved_cache_dir(), NAME) / HELD_OUT
    kept = {side: (folder / f"{side}.jsonl").read_text() for side in ("before", "after", "grounded")}
    assert all(len(text.splitlines()) == 1 for text in kept.values())
    assert json.loads(kept["grounded"])["mode"] == "grounded" and json.loads(kept["after"])["mode"] == "agent"
    assert first["questions"] == 1 and {"before", "after", "grounded", "difference", "after_vs_grounded"} <= set(first)
    assert first["models"]["after"].endswith(f"{NAME}.gguf")
    assert first["models"]["grounded"] == first["models"]["before"]
    again = before_after(the_plan, NAME)
    assert again == first and {s: (folder / f"{s}.jsonl").read_text() for s in kept} == kept, "nothing answered again"


@pytest.mark.slow
@pytest.mark.llm
def test_scores_added_afterwards_put_the_held_out_f1_on_the_runs_curve(run: Run) -> None:
    """A run trained without held-out answers and scored afterwards: the untrained loop's F1 is iteration 0 of its
    curve and the trained loop's its last iteration; the iteration's own numbers stay."""
    from m3agent.train.catalogue import run_dir
    from m3agent.train.curve import CURVE, read_steps
    from m3agent.train.session import add_scores, before_after, plan

    folder = run_dir(run.settings.resolved_cache_dir(), NAME)
    trained = [s for s in read_steps(folder) if s.get("iteration")]
    assert trained and all(s.get("held_out_f1") is None for s in trained)
    scores = before_after(plan(run.settings, data=run.data, max_held_out=1), NAME)
    add_scores(run.settings, NAME, scores)
    add_scores(run.settings, NAME, scores)  # twice: nothing recorded twice
    steps = read_steps(folder)
    assert [s["iteration"] for s in steps] == [0, 1]
    assert steps[0]["held_out_f1"] == scores["before"]["mean"] and steps[1]["held_out_f1"] == scores["after"]["mean"]
    assert {k: v for k, v in steps[1].items() if not k.startswith("held_out")} == \
        {k: v for k, v in trained[-1].items() if not k.startswith("held_out")}
    assert (folder / CURVE).is_file()

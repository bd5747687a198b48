"""Control policy training: an expert iteration or GRPO run on LoCoMo (split by conversation), then held-out F1.

``--method expert`` (the default, :mod:`m3agent.train.expert`) trains or resumes ``--iterations`` iterations and
writes the section "Control policy training: expert iteration": the measured cost of each iteration (rollouts
sampled by llama.cpp, kept examples, SFT tokens, minutes of each stage, CPU seconds with the llama.cpp worker's),
the projection to larger runs, and, when the run stopped mid-iteration (``--no-train`` after an interrupted call),
the partial measurement from the rollouts checkpointed so far. ``--method grpo`` is described below.

Trains (or resumes) run ``--name`` with ``m3agent train control``'s own functions, exports the merged GGUF,
answers ``--eval-questions`` held-out questions with the base and the trained model in the agent loop
through llama.cpp (the product's path), and writes the "Control policy training" section of
docs/benchmarks.md: machine, load, commit, command, steps, time per step, the curve (copied to
docs/train_control_curve.png) and F1 before / after with bootstrap intervals. ``--eval-questions 0`` skips the
evaluation and reports the measured cost per step and the projected time of a longer run.

    .venv/bin/python bench/train_control.py --method grpo --steps 20 --eval-questions 30
    .venv/bin/python bench/train_control.py --iterations 1 --samples 4 --max-questions 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SECTION = "Control policy training"
EXPERT_SECTION = "Control policy training: expert iteration"
PROJECTED_QUESTIONS = (50, 100, 200)
"""Training questions per iteration to project from the measured cost per question and per kept rollout."""
CURVE = REPO / "docs" / "train_control_curve.png"
PROJECTED_STEPS = (200, 1000)
"""Run lengths to project from the measured cost per step (GRPO papers train for hundreds of steps)."""


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import TrainSettings, load_settings
    from m3agent.train import session as service
    from m3agent.train.catalogue import run_dir
    from m3agent.train.curve import read_steps

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("expert", "grpo"), default="expert")
    parser.add_argument("--name", default=None, help="default control-<base>-<method>")
    parser.add_argument("--base", default=None, help="qwen-0.5b (default), qwen-1.5b, smollm2 or a .gguf path")
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other train setting (a JSON value or text), e.g. --set sft_epochs=1")
    parser.add_argument("--time-limit", type=float, default=None, metavar="MIN",
                        help="stop training after MIN minutes and report what was measured (resumable)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--group", type=int, default=None)
    parser.add_argument("--questions-per-step", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--eval-questions", type=int, default=0, help="held-out questions before / after")
    parser.add_argument("--no-train", action="store_true", help="report the run as it stands (no new steps)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    settings = load_settings(shared_dir=SHARED)
    chosen = {k: v for k, v in {"steps": args.steps, "group": args.group, "rounds": args.rounds,
                                "questions_per_step": args.questions_per_step, "method": args.method,
                                "base": args.base, "iterations": args.iterations, "samples": args.samples,
                                "max_questions": args.max_questions, "threads": args.threads,
                                "max_new_tokens": args.max_new_tokens}.items() if v is not None}  # fmt: skip
    chosen |= {k: _value(v) for k, v in (item.split("=", 1) for item in args.set)}
    settings = settings.model_copy(update={"train": TrainSettings.model_validate(
        {**settings.train.model_dump(), **chosen})})  # fmt: skip
    name = args.name or f"control-{settings.train.base}-{settings.train.method}"
    the_plan = service.plan(settings, max_held_out=args.eval_questions or None)
    timing: dict[str, Any] = {}
    if not args.no_train:
        timing = timed_training(settings, the_plan, name, args.time_limit)
    run = run_dir(settings.resolved_cache_dir(), name)
    if settings.train.method == "expert":
        return expert_report(args, argv, settings, the_plan, name, run, load, environment, timing)
    steps = read_steps(run)
    report: dict[str, Any] = {"run": str(run), "steps": len(steps), "cost": cost(steps, settings.train.threads)}
    if args.eval_questions:
        service.export(settings, name)
        report["scores"] = service.before_after(the_plan, name)
        service.add_scores(settings, name, report["scores"])
    print(json.dumps(report, indent=2), flush=True)
    if not args.no_write:
        if (run / "curve.png").is_file():
            shutil.copyfile(run / "curve.png", CURVE)
        command = "python bench/train_control.py " + " ".join(sys.argv[1:] if argv is None else argv)
        write_section(report, steps, settings, environment(embedder=settings.embedder), load, command)
    return 0


def _value(text: str) -> Any:
    """A ``--set`` value: JSON (numbers, lists, true/false), else the text itself (``keep=threshold``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def timed_training(settings: Any, the_plan: Any, name: str, limit_min: float | None) -> dict[str, Any]:
    """Train (or resume) with the wall time of the whole call and of preparing the base (dequantising its GGUF
    the first time); ``limit_min`` stops the call (SIGALRM) and says so: the run resumes from its checkpoints."""
    import signal
    import time

    from m3agent.train import session as service
    from m3agent.train.model import prepare_base, resolve_base

    class TimeUp(BaseException):
        """Raised by the alarm; a BaseException, so that no ``except OSError`` (a worker pipe's) takes it."""

    def stop(signum: int, frame: Any) -> None:
        raise TimeUp(f"--time-limit {limit_min} min reached")

    started = time.perf_counter()
    timing: dict[str, Any] = {"stopped": None}
    if limit_min:
        signal.signal(signal.SIGALRM, stop)
        signal.alarm(max(1, int(limit_min * 60)))
    try:
        prepare_base(resolve_base(settings, settings.train.base))
        timing["base_s"] = round(time.perf_counter() - started, 1)
        service.train(the_plan, name)
    except TimeUp as exc:
        timing["stopped"] = str(exc)
    finally:
        signal.alarm(0)
    timing["call_s"] = round(time.perf_counter() - started, 1)
    return timing


def expert_report(args: argparse.Namespace, argv: list[str] | None, settings: Any, the_plan: Any, name: str,
                  run: Path, load: float, environment: Any, timing: dict[str, Any]) -> int:  # fmt: skip
    """Report (and write the section of) an expert iteration run: finished iterations, and the partial one."""
    from m3agent.train import session as service
    from m3agent.train.curve import read_steps

    iterations = [s for s in read_steps(run) if s.get("minutes") is not None]
    report: dict[str, Any] = {"run": str(run), "timing": timing, "iterations": iterations,
                              "partial": partial_iteration(run), "projection": projection(iterations)}  # fmt: skip
    if args.eval_questions and iterations:
        service.export(settings, name)
        report["scores"] = service.before_after(the_plan, name)
        service.add_scores(settings, name, report["scores"])
    print(json.dumps(report, indent=2), flush=True)
    if not args.no_write:
        command = "python bench/train_control.py " + " ".join(sys.argv[1:] if argv is None else argv)
        write_expert_section(report, settings, environment(embedder=settings.embedder), load, command)
    return 0


def partial_iteration(run: Path) -> dict[str, Any] | None:
    """The iteration under way (rollouts checkpointed, no record yet): questions done and seconds a question."""
    from m3agent.train.expert import ITERATIONS, Iteration, read_rollouts

    numbers = sorted(int(p.name) for p in (run / ITERATIONS).glob("*") if p.name.isdigit() and int(p.name) > 0)
    for number in reversed(numbers):
        iteration = Iteration.at(run, number)
        if iteration.done:
            return None
        done = read_rollouts(iteration.rollouts)
        if not done:
            continue
        sampled = [s for q in done for s in q.sampled]
        return {"iteration": number, "questions_done": len(done),
                "s_per_question": round(sum(q.seconds for q in done) / len(done), 1),
                "rollouts": len(sampled) + len(done),
                "reward": round(sum(s.reward for s in sampled) / max(1, len(sampled)), 4),
                "greedy_reward": round(sum(q.greedy.reward for q in done) / len(done), 4),
                "sampled_tokens": sum(s.trained_tokens for q in done for s in (q.greedy, *q.sampled)),
                "sft_started": iteration.adapter.with_name("adapter.work").exists() or iteration.trained()}  # fmt: skip
    return None


def projection(iterations: list[dict[str, Any]]) -> dict[str, float]:
    """Minutes of an iteration of N questions at the last iteration's measured rates (same K, rounds, tokens):
    rollouts per question, SFT per kept rollout at its keep rate, the export once."""
    if not iterations:
        return {}
    last = iterations[-1]
    per_question = last["rollout_s"] / max(1, last["questions"])
    keep_rate = last["kept"] / max(1, last["questions"])
    per_kept = last["sft_s"] / max(1, last["kept"])
    return {f"minutes_{n}_questions": round((n * (per_question + keep_rate * per_kept) + last["export_s"]) / 60, 1)
            for n in PROJECTED_QUESTIONS}  # fmt: skip


def write_expert_section(report: dict[str, Any], settings: Any, env: dict[str, Any], load: float, command: str
                         ) -> None:  # fmt: skip
    from m3agent.bench.results_io import replace_section, run_line

    train = settings.train
    lines = [run_line(env, command, load), "",
             f"Expert iteration (`--method expert`, m3agent/train/expert.py) from the packaged `{train.base}`: per "
             f"training question one greedy and {train.samples} sampled rollouts (temperature {train.temperature}) "
             f"of the agent loop (up to {train.rounds} rounds, {train.max_new_tokens} tokens a reply) sampled by the "
             f"llama.cpp runtime ({train.threads} thread(s)) on the real LoCoMo store; kept: the best "
             f"{train.keep_per_question} a question with reward >= {train.keep_min_reward}"
             f"{' beating the greedy rollout' if train.keep == 'beat_greedy' else ''}; LoRA r={train.lora_r} "
             f"fine-tuned by TRL's SFTTrainer ({train.sft_epochs} epochs, lr {train.sft_learning_rate}, loss on "
             f"the policy's tokens only); merged and exported as a Q8_0 GGUF for the next iteration. CPU s include "
             f"the llama.cpp worker's.", "",
             "| iteration | questions | rollouts | reward (sampled) | reward (greedy) | kept "
             "| SFT tokens (in sequences) | rollouts s | SFT s | export s | minutes | CPU s | held-out F1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for it in report["iterations"]:
        held = it.get("held_out_f1")
        lines.append(f"| {it['iteration']} | {it['questions']} | {it['rollouts']} | {it['reward']:.3f} | "
                     f"{it['greedy_reward']:.3f} | {it['kept']} | {it['sft_tokens']} ({it['sft_sequence_tokens']}) | "
                     f"{it['rollout_s']:.0f} | {it['sft_s']:.0f} | {it['export_s']:.0f} | {it['minutes']:.1f} | "
                     f"{it['cpu_s']:.0f} | {'n/a' if held is None else f'{held:.3f}'} |")  # fmt: skip
    timing = report.get("timing") or {}
    if timing:
        lines += ["", f"This call: {timing['call_s']} s wall in all, of which {timing.get('base_s', 'n/a')} s "
                  "preparing the base (dequantising its GGUF into transformers the first time); the rest not in the "
                  "table is the LoCoMo ingest of the drawn questions' conversations (once per store) and model loading."
                  + (f" Stopped: {timing['stopped']}." if timing.get("stopped") else "")]  # fmt: skip
    partial = report.get("partial")
    if partial:
        lines += ["", f"Partial (the call stopped in iteration {partial['iteration']}): {partial['questions_done']} "
                  f"questions rolled out ({partial['rollouts']} rollouts, {partial['sampled_tokens']} sampled tokens), "
                  f"{partial['s_per_question']} s a question; mean reward {partial['reward']:.3f} sampled, "
                  f"{partial['greedy_reward']:.3f} greedy; fine-tuning started: {partial['sft_started']}."]  # fmt: skip
    if report.get("projection"):
        lines += ["", "Projected minutes of one iteration at these rates (same K, rounds, reply length; SFT per "
                  "kept rollout at the measured keep rate): " + ", ".join(
                      f"{k.split('_')[1]} questions {v}" for k, v in report["projection"].items()) + "."]  # fmt: skip
    lines += score_lines(report.get("scores"))
    replace_section(REPO / "docs" / "benchmarks.md", EXPERT_SECTION, "\n".join(lines))


def cost(steps: list[dict[str, Any]], threads: int) -> dict[str, float]:
    """Seconds per step: wall (on the shared machine) and the idle estimate (CPU seconds / threads), with the
    share of rollouts and the projected hours of longer runs at the idle estimate."""
    if not steps:
        return {}

    def per_step(key: str) -> float:
        gaps = [b[key] - a[key] for a, b in pairwise(steps) if b[key] > a[key]]
        gaps = gaps or [steps[0][key]]
        return float(sum(gaps) / len(gaps))

    idle = per_step("cpu_s") / threads
    return {"s_per_step": round(per_step("elapsed_s"), 1), "idle_s_per_step": round(idle, 1),
            "rollout_s_per_step": round(sum(s["rollout_s"] for s in steps) / len(steps), 1),
            "idle_rollout_s_per_step": round(sum(s["rollout_cpu_s"] for s in steps) / len(steps) / threads, 1),
            **{f"projected_h_{n}_steps": round(n * idle / 3600, 1) for n in PROJECTED_STEPS}}  # fmt: skip


def write_section(report: dict[str, Any], steps: list[dict[str, Any]], settings: Any, env: dict[str, Any],
                  load: float, command: str) -> None:  # fmt: skip
    from m3agent.bench.results_io import replace_section, run_line

    train = settings.train
    c = report["cost"]
    lines = [run_line(env, command, load), "",
             f"GRPO (TRL, loss `{train.loss}`, beta {train.beta}, clip-higher {train.epsilon_high}) with LoRA "
             f"r={train.lora_r} on the packaged `{train.base}` (dequantised from its GGUF), on the CPU. Each step: "
             f"{train.questions_per_step} training questions x a group of {train.group} rollouts of the agent loop "
             f"(up to {train.rounds} rounds, {train.max_new_tokens} tokens a reply, temperature "
             f"{train.temperature}) over the real LoCoMo store. Held out (never trained on): "
             f"{', '.join(train.held_out)}. Reward: m3agent/train/reward.py.", "",
             f"- steps recorded: {len(steps)}; a step took {c.get('s_per_step', 'n/a')} s wall on the shared machine "
             f"(rollouts {c.get('rollout_s_per_step', 'n/a')} s); idle 2-core estimate (CPU seconds / "
             f"{train.threads} threads): {c.get('idle_s_per_step', 'n/a')} s a step, rollouts "
             f"{c.get('idle_rollout_s_per_step', 'n/a')} s",
             f"- projected at the idle estimate: {c.get('projected_h_200_steps', 'n/a')} h for 200 steps, "
             f"{c.get('projected_h_1000_steps', 'n/a')} h for 1000 steps",
             "", "![reward and F1 per step](train_control_curve.png)", "",
             "| step | reward | answer F1 | evidence F1 | format errors / rollout | s (elapsed) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {s['step']} | {s['reward']:.3f} | {s['f1']:.3f} | {s['evidence_f1']:.3f} | "
              f"{s['format_errors']:.2f} | {s['elapsed_s']:.0f} |" for s in steps]  # fmt: skip
    lines += score_lines(report.get("scores"))
    replace_section(REPO / "docs" / "benchmarks.md", SECTION, "\n".join(lines))


def score_lines(scores: dict[str, Any] | None) -> list[str]:
    """The held-out table: the base and trained models in the agent loop, the base model's grounded answers, and
    the paired differences (none when the run was not scored)."""
    if not scores:
        return []
    rows = [("before: base model, agent loop", scores["before"]), ("after: trained model, agent loop", scores["after"]),
            ("base model, grounded (one shot)", scores.get("grounded")),
            ("after - before (paired)", scores["difference"]),
            ("after - grounded (paired)", scores.get("after_vs_grounded"))]  # fmt: skip
    lines = ["", f"Held-out F1 through llama.cpp ({scores['questions']} questions of "
             f"{', '.join(scores['conversations'])}, up to {scores['rounds']} rounds; base "
             f"`{scores['models']['before']}`; 95 % bootstrap over questions):", "",
             "| model | F1 | 95 % CI |", "|---|---|---|"]  # fmt: skip
    signed = {"after - before (paired)", "after - grounded (paired)"}
    return lines + [f"| {name} | {row['mean']:{'+' if name in signed else ''}.3f} | {row['ci95']} |"
                    for name, row in rows if row is not None]


if __name__ == "__main__":
    raise SystemExit(main())

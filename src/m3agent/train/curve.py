"""The run's record beside it: one JSON line per step or expert iteration (``metrics.jsonl``) and the reward/F1
plot (``curve.png``).

A resumed run appends to the same file; a step recorded twice (a run stopped after logging a step but before
its checkpoint) keeps its last record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS = "metrics.jsonl"
CURVE = "curve.png"


def append_step(run_dir: Path, record: dict[str, Any]) -> None:
    with (run_dir / METRICS).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def read_steps(run_dir: Path) -> list[dict[str, Any]]:
    """The per-step records, one per step (the last written wins), in step order."""
    path = run_dir / METRICS
    if not path.is_file():
        return []
    by_step = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            by_step[int(record["step"])] = record
    return [by_step[s] for s in sorted(by_step)]


def plot(run_dir: Path) -> Path | None:
    """Draw mean reward and answer F1 per step (with a 5-step moving mean), or per iteration of an expert
    iteration run (with the held-out F1), to ``curve.png``; ``None`` when matplotlib (the ``bench`` extra) is
    missing or nothing was recorded yet."""
    steps = read_steps(run_dir)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not steps:
        return None
    if any("iteration" in s for s in steps):
        return _plot_iterations(run_dir, steps, plt)
    x = [s["step"] for s in steps]
    figure, axis = plt.subplots(figsize=(7, 3.5))
    for key, label in (("reward", "reward"), ("f1", "answer F1"), ("evidence_f1", "evidence F1")):
        y = [float(s[key]) for s in steps]
        line = axis.plot(x, y, alpha=0.35, marker=".", label=f"{label} (step mean)")[0]
        axis.plot(x, _moving(y, 5), color=line.get_color(), label=f"{label} (5-step mean)")
    axis.set_xlabel("step")
    return _save(run_dir, figure, axis, f"control policy GRPO: {run_dir.name}", plt)


def _moving(values: list[float], window: int) -> list[float]:
    return [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
            for i in range(len(values))]  # fmt: skip


def _plot_iterations(run_dir: Path, records: list[dict[str, Any]], plt: Any) -> Path:
    """Per iteration: the sampled and the greedy rollouts' mean reward, and the held-out F1 (iteration 0: the
    base model) where it was measured."""
    figure, axis = plt.subplots(figsize=(7, 3.5))
    series = (("reward", "reward (sampled rollouts)"), ("greedy_reward", "reward (greedy rollouts)"),
              ("f1", "answer F1 (sampled)"), ("held_out_f1", "held-out answer F1 (agent loop, llama.cpp)"))
    for key, label in series:
        points = [(s["iteration"], float(s[key])) for s in records if s.get(key) is not None]
        if points:
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    axis.set_xlabel("iteration (0: the base model)")
    axis.set_xticks(sorted({int(s["iteration"]) for s in records}))
    return _save(run_dir, figure, axis, f"control policy, expert iteration: {run_dir.name}", plt)


def _save(run_dir: Path, figure: Any, axis: Any, title: str, plt: Any) -> Path:
    """The figure with its title, grid and legend written to the run's :data:`CURVE`."""
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    out = run_dir / CURVE
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out

"""The "LoCoMo retrieval" section of docs/benchmarks.md, rendered from a ``run_locomo`` result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m3agent.bench.results_io import replace_section

SECTION = "LoCoMo retrieval"


def write_locomo_section(doc: Path, result: dict[str, Any], command: str) -> None:
    """Replace (or add) the LoCoMo retrieval section of ``doc`` with ``result``."""
    replace_section(doc, SECTION, render_locomo(result, command))


def render_locomo(result: dict[str, Any], command: str) -> str:
    setup, env = result["setup"], result["environment"]
    ks = [str(k) for k in setup["ks"]]
    reference = setup["reference"]
    lines = [
        "Evidence recall on LoCoMo (`locomo10.json`, 10 conversations) without any LLM: for each",
        "question with evidence, the fraction of its evidence turns (`dia_id`) among the memories a search",
        "returns, next to the mean number of memories returned (the context cost). *Ours*: `search_memory`",
        "(hybrid vector + BM25, RRF) at k memories. *Reference*: M3-Agent's clip search re-implemented (each",
        f"session a clip, clip score = best cosine of its memories, threshold {reference['threshold']}, top "
        f"{reference['top_clips']} clips, all their memories returned), on the same vectors.",
        "",
        f"Command: `{command}`",
        "",
        _table_header(ks),
        "|" + "---|" * (2 + 2 * len(ks) + 2),
    ]
    rows = [("all (1-4)", result["overall"])]
    rows += [(f"{c} {row['name']}", row) for c, row in result["by_category"].items()]
    rows.append(("5 adversarial", result["adversarial"]))
    lines += [_row(name, row, ks) for name, row in rows if row.get("n")]
    lines += ["", *_notes(result, ks), "", *_environment_lines(setup, env, result)]
    return "\n".join(lines)


def _table_header(ks: list[str]) -> str:
    recall = " | ".join(f"recall@{k}" for k in ks)
    returned = " | ".join(f"returned@{k}" for k in ks)
    return f"| category | n | {recall} | {returned} | reference recall | reference returned |"


def _row(name: str, row: dict[str, Any], ks: list[str]) -> str:
    recall = " | ".join(f"{row[f'recall_at_{k}']:.3f}" for k in ks)
    returned = " | ".join(f"{row['mean_returned'][k]:.1f}" for k in ks)
    ref = row["reference"]
    return f"| {name} | {row['n']} | {recall} | {returned} | {ref['recall']:.3f} | {ref['mean_returned']:.1f} |"


def _notes(result: dict[str, Any], ks: list[str]) -> list[str]:
    overall = result["overall"]
    ours = ", ".join(f"k={k}: {overall['recall_per_returned'][k]:.4f}" for k in ks)
    ref = overall["reference"]["recall_per_returned"]
    lines = [f"Recall per returned memory (categories 1-4): ours {ours}; reference {ref:.4f}."]
    for name, variant in overall.items():
        if name.startswith("reference_threshold_"):
            threshold = name.removeprefix("reference_threshold_")
            lines.append(
                f"Reference with threshold {threshold} (always two clips): recall {variant['recall']:.3f} at "
                f"{variant['mean_returned']:.1f} memories ({variant['recall_per_returned']:.4f} per memory)."
            )
    naming, by_other = result["setup"].get("adversarial_naming_one_speaker_and_evidence_by_other", (0, 0))
    lines.append(
        f"Adversarial questions (category 5) ask about one speaker what the other said (in {by_other} of the "
        f"{naming} naming one speaker, every evidence turn is the other speaker's). Our search restricts a question "
        "naming a person to that person's memories, so it rarely returns those turns: low recall is the intended "
        "outcome there (the answer is that the conversation does not say)."
    )
    targets = result["targets"]
    met = ", ".join(f"{k} {'met' if v['met'] else 'NOT met'}" for k, v in targets.items())
    lines.append(f"Targets (recall@10 >= 0.55, recall@20 >= 0.65, better recall per memory at every k): {met}.")
    latency = result["latency_ms"]
    ours_ms, ref_ms = latency["ours_per_query"], latency["reference_per_query"]
    lines.append(f"Search latency per query: ours {ours_ms} ms, reference {ref_ms} ms.")
    return lines


def _environment_lines(setup: dict[str, Any], env: dict[str, Any], result: dict[str, Any]) -> list[str]:
    machine = env["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v != "not installed")
    ingest = setup["ingest"]
    models = env["models"]
    return [
        f"- Questions with evidence: {setup['questions_with_evidence']} "
        f"({setup['questions_without_evidence']} without evidence skipped; "
        f"{setup['dropped_evidence_ids']} evidence ids naming no turn dropped).",
        f"- Embedder: {models['embedder']} ({models['embedding_dim']}-d); "
        f"store `{Path(setup['store']).name}` "
        f"(ingest {ingest['seconds']} s for {len(ingest['ingested'])} conversations, "
        f"{len(ingest['reused'])} reused).",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB RAM, "
        f"{machine['os']}, Python {machine['python']}.",
        f"- Packages: {packages}.",
        f"- Commit: {env['git_commit']}; date {env['date']}.",
    ]

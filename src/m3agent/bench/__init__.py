"""Benchmarks: LoCoMo retrieval recall / QA and the M3-Bench runner.

- :func:`m3agent.bench.locomo.run.run_locomo` ingests LoCoMo into a store and
  measures evidence recall against context cost (LLM-free), and QA accuracy
  with an LLM and a judge.
- :func:`m3agent.bench.m3.run.run_m3` answers M3-Bench questions on stored
  memories with the control agent, judges them with the published protocol
  and writes a resumable JSONL plus a Markdown report with a chart.

Submodules import their heavy dependencies (numpy, matplotlib) lazily.
"""

"""The M3-Bench runner: annotations, one question answered and judged, Ray tasks, the report."""

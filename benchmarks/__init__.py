"""Benchmark scripts that print figures (DESIGN section 8); they assert nothing.

Run them all with ``python -m benchmarks.run_all`` from the repository root, or one with
``python -m benchmarks.<name>``. Results and how to read them: ``docs/performance.md``.
"""

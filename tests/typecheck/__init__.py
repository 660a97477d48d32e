"""Modules checked by ``mypy --strict`` (tests/unit/test_types.py), not collected by pytest."""

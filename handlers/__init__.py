"""Thin Lambda entry points; ``bootstrap`` is the one place that reads the environment."""

"""Lambda entry points of the bundled SAM application (``template.yaml``).

Each module is one line of wiring; ``bootstrap`` is the composition root and the only
place that reads the environment.
"""

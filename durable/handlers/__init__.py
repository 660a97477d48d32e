"""The Lambda entry points, shipped with the library: ``durable.handlers.worker.handler``,
``api``, ``sweeper``, ``events``, ``purge``. A project's template points at them (or at
one-line modules of its own that import them); the workflows come from ``DURABLE_APP``.
``bootstrap`` is the composition root, the one place that reads the environment.
"""

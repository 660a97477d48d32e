"""Operator tools over a running deployment: the deploy gate (``deploy_gate``), readable
tables and timelines (``render``), and the handlers' Powertools logging, metrics and
tracing (``observability``).

May import: ``durable.engine``, ``durable.core``, ``durable.settings`` and the root's
low modules. Never the API or the local stack.
"""

"""What starts or wakes a run from outside HTTP: the worker's and the run-start events the
non-HTTP handlers accept (``triggers``), and EventBridge events and SQS batches
(``event_sources``, with Powertools' parser and batch utilities).

May import: ``durable.errors`` and the standard library. The engine does not import it.
"""

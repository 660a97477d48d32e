"""The replay engine: one invocation replays a run from its ledger and moves it on.

``engine.Engine`` starts runs, drives invocations and reads the ledger; ``execution``
replays one invocation (the ``cursor`` of positions, the ``turns`` of branch threads, the
lease it keeps); each durable call has its module (``steps``, ``waits``, ``events``,
``children``, ``distributed``, ``fanout``, ``sagas``, ``effects``), ``endings`` writes
how an invocation ends, ``admission`` applies flow limits, ``sweeper`` finds what was
late, ``operations`` and ``deploy_check`` are the operator's decisions. The authoring
surface is here too, because it is a facade over one execution: ``registry`` (``App``),
``context`` (``Context``), ``step_context`` and ``active``; users import them from
``durable``.

The collaborators take narrow protocols (``engine_parts.EngineParts``,
``execution_parts.ExecutionParts``) instead of importing ``Engine`` or ``Execution`` back.
May import: ``durable.core``, ``durable.errors``, ``durable.hooks``, ``durable.aio``.
Never the adapters, the API, the local stack, nor any AWS SDK (``make lint`` checks it).
"""

"""The ledger's rules and value types: what every layer shares, and what imports no layer.

Runs, steps and signals as values (``model``), the ports the engine asks of storage and the
outside (``ports``), the pure rules every ledger applies the same way (``leases``,
``retention``, ``limits``), identifiers and callback tokens (``ids``, ``tokens``), encoding
and sealing (``serde``, ``codecs``, ``secrets``), the one boundary every write crosses
(``write_boundary``, ``claim_check``), the declared policies a step or workflow carries
(``retry``, ``flow``, ``completion``, ``recurrence``, ``callables``), time as a port
(``clock``), the engine's knobs (``config``) and what a run costs (``usage``).

May import: ``durable.errors``, ``durable.hooks`` and the standard library, pydantic and
cryptography. Never the engine, the adapters or any AWS SDK (``make lint`` checks it).
"""

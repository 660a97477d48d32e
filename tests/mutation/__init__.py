"""Mutation testing of the engine core: does the unit tier notice when the code is wrong?

``python -m tests.mutation --module durable/core/retry.py`` (or ``make mutation
MODULE=durable/core/retry.py``) makes small faults in one module (a flipped comparison, ``and``
for ``or``, a negated condition, a changed constant, a deleted statement, a return of None,
``+`` for ``-``), runs the unit tests that cover each changed line against it, and reports
how many of them a test caught. docs/testing.md explains the figures and the equivalents
policy.

The modules, each small:

* ``targets``: which modules (and which of their functions) are mutated.
* ``operators``: the AST mutation operators and the mutants' stable ids.
* ``trace`` / ``selection``: the coverage pass (one context per test) and test selection.
* ``hook``: serves a mutated module to the test process through an import hook, so the
  working tree is never written.
* ``runner``: runs each mutant's tests in a forked child with a timeout.
* ``results``: the result cache under ``.mutation/``, equivalents and the report table.
* ``__main__``: the command line.

This package must not import ``durable``: the runner forks a fresh test session per
mutant from a process that has imported the test dependencies but not the engine.
"""

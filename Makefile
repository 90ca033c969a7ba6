# modelscale — every target a newcomer or CI needs. `make test` installs what the
# tests need (venv, cluster binaries built from Go modules, Prometheus) and runs all.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Debian's own python3.11: Triton's Python-backend stub links Debian's libpython, and a
# venv from another 3.11 build (pyenv's) makes model loading fail (docs/field-notes.md).
PYTHON_BASE ?= /usr/bin/python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(PYTHON_BASE):
	apt-get update -qq && apt-get install -y -qq python3.11 python3.11-venv python3.11-dev

$(STAMP): pyproject.toml | $(PYTHON_BASE)
	test -x $(PY) || $(PYTHON_BASE) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(STAMP) ## create .venv with the package and dev tools

.PHONY: lint
lint: $(STAMP) ## ruff and the import-linter layering contracts
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

.PHONY: typecheck
typecheck: $(STAMP) ## mypy --strict on the package
	$(PY) -m mypy

.PHONY: unit
unit: $(STAMP) helm ## unit tests: no servers, no Kubernetes build (the install-file tests run the pinned helm)
	$(PY) -m pytest -q tests/unit

.PHONY: helm
helm: ## build only the pinned helm (≈ 4 min cold), what `make unit` needs
	bash e2e/tools/build.sh helm

.PHONY: docs
docs: $(STAMP) ## regenerate docs/reference.md from the pydantic models
	$(PY) -m modelscale.api.reference > docs/reference.md

.PHONY: demo
demo: $(STAMP) cluster-tools prometheus-install ## watch the operator scale a real Triton deployment ahead of a replayed trace (≈ 5 min)
	PYTHONPATH=e2e $(PY) -m demo $(DEMO_ARGS)

.PHONY: demo-down
demo-down: ## remove what `make demo` left running (release, namespace, local cluster)
	@if [ -x $(PY) ]; then PYTHONPATH=e2e $(PY) -m demo down && $(CLUSTER) down; fi

CRD_FILE := crds/modeldeployments.modelscale.dev.yaml
.PHONY: crds
crds: $(STAMP) ## regenerate the CRD from the pydantic models (and the chart's copy, docs/reference.md)
	$(PY) -m modelscale crd > $(CRD_FILE)
	mkdir -p charts/modelscale/files/crds && cp $(CRD_FILE) charts/modelscale/files/crds/
	$(PY) -m modelscale.api.reference > docs/reference.md

include e2e/e2e.mk
include charts/chart.mk
-include bench/bench.mk

.PHONY: test
test: $(STAMP) cluster-tools prometheus-install ## everything but KEDA: lint, types, unit, integration and e2e tests
	$(MAKE) lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider -m "not keda"

.PHONY: test-keda
test-keda: $(STAMP) cluster-tools keda-tools prometheus-install ## KEDA and HPA beside modelscale on the local cluster (builds KEDA first: 26 min cold measured on a loaded 2-core machine)
	$(PY) -m pytest -q -p no:cacheprovider -m keda e2e/tests

# Targets for the local test cluster (issue: real local test cluster).
MODELSCALE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/modelscale
export MODELSCALE_CACHE
CLUSTER := PYTHONPATH=e2e $(PY) -m harness.cluster

.PHONY: cluster-tools
cluster-tools: ## build the pinned kube-apiserver, controller-manager, scheduler, kubectl, etcd, helm
	bash e2e/tools/build.sh

.PHONY: prometheus-install
prometheus-install: ## install Debian's prometheus when missing (starts no service)
	command -v prometheus >/dev/null || (apt-get update -qq && apt-get install -y -qq prometheus)

.PHONY: cluster-up
cluster-up: $(STAMP) cluster-tools prometheus-install $(if $(KEDA),keda-tools) ## start the local cluster (root; no Docker): prints KUBECONFIG and the Prometheus URL; KEDA=1 also installs KEDA
	$(CLUSTER) up $(if $(KEDA),--keda)

.PHONY: keda-tools
keda-tools: ## build KEDA's operator and metrics API server from the pinned module (cold: see docs/keda.md)
	bash e2e/tools/build.sh keda

.PHONY: keda-up
keda-up: $(STAMP) keda-tools ## install KEDA (pinned release manifests) on the running local cluster
	$(CLUSTER) keda-up

.PHONY: keda-down
keda-down: ## uninstall KEDA from the local cluster
	$(CLUSTER) keda-down

.PHONY: cluster-down
cluster-down: ## stop the local cluster (refused while a pytest session uses it): nothing left behind
	$(CLUSTER) down

.PHONY: cluster-status
cluster-status: ## is the local cluster running?
	$(CLUSTER) status

.PHONY: e2e
e2e: $(STAMP) cluster-tools keda-tools prometheus-install ## the cluster acceptance and e2e tests on the local cluster
	$(PY) -m pytest -q -p no:cacheprovider -m cluster e2e/tests

.PHONY: e2e-kind
e2e-kind: ## the same suite on kind (needs Docker + kind; NOT runnable on the no-Docker dev machine)
	bash e2e/kind/run.sh

.PHONY: bench-overload
bench-overload: $(STAMP) cluster-tools prometheus-install ## overload at maxReplicas with and without spec.serving, 2 min per run (figures per class)
	OVERLOAD_SECONDS=$${OVERLOAD_SECONDS:-120} $(PY) -m pytest -q -s -p no:cacheprovider e2e/tests/test_overload_e2e.py

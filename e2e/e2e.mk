# Targets for the local test cluster (issue: real local test cluster).
MODELSCALE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/modelscale
export MODELSCALE_CACHE

.PHONY: cluster-tools
cluster-tools: ## build the pinned kube-apiserver, controller-manager, scheduler, kubectl, etcd, helm
	bash e2e/tools/build.sh

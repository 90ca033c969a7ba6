# Targets for the Helm chart, the rendered install manifests and the operator image
# (included by the Makefile). HELM defaults to the pinned helm that `make cluster-tools` builds.
HELM ?= $(shell bash e2e/tools/build.sh 2>/dev/null | tail -n 1)/helm
CHART_VERSION = $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/modelscale/Chart.yaml)
IMAGE ?= ghcr.io/modelscale/modelscale-operator:$(CHART_VERSION)
# Tried in this order; the first found on PATH builds the image.
IMAGE_BUILDERS ?= docker podman buildah

.PHONY: chart
chart: crds ## lint the Helm chart (strict, default and non-default values)
	$(HELM) lint --strict charts/modelscale
	$(HELM) lint --strict charts/modelscale --set 'watchNamespaces={team-a,team-b}' \
	  --set serviceMonitor.enabled=true --set podMonitor.enabled=true \
	  --set grafanaDashboard.enabled=true

.PHONY: manifests
manifests: crds ## render manifests/install.yaml from the chart and refresh the samples' model ConfigMap
	HELM=$(HELM) bash charts/render-manifests.sh
	$(PY) charts/render-samples.py

.PHONY: image
image: ## build the operator image $(IMAGE) with docker, podman or buildah
	@IMAGE='$(IMAGE)' IMAGE_BUILDERS='$(IMAGE_BUILDERS)' bash charts/build-image.sh

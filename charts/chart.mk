# Targets for the Helm chart and the rendered install manifests (included by the Makefile).
# HELM defaults to the pinned helm that `make cluster-tools` builds.
HELM ?= $(shell bash e2e/tools/build.sh 2>/dev/null | tail -n 1)/helm

.PHONY: chart
chart: crds ## lint the Helm chart (strict, default and non-default values)
	$(HELM) lint --strict charts/modelscale
	$(HELM) lint --strict charts/modelscale --set 'watchNamespaces={team-a,team-b}' --set serviceMonitor.enabled=true

.PHONY: manifests
manifests: crds ## render manifests/install.yaml from the chart (with the CRD and a Namespace)
	HELM=$(HELM) bash charts/render-manifests.sh

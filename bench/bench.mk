# Autoscaling benchmark (issue 6): included from the Makefile.

.PHONY: bench
bench: $(STAMP) ## every autoscaling policy on the benchmark traces (< 2 min)
	$(PY) bench/run.py

.PHONY: bench-sweep
bench-sweep: $(STAMP) ## sweep each policy's target: cost vs SLO curves and the goal check
	$(PY) bench/sweep.py

# Peers run from their own code (docs/peers.md): the `peers` extra, and NVIDIA Dynamo's
# planner from its wheel without its dependencies (`aisimulate` is a stub that downloads
# from NVIDIA's own index; the planner modules the peer uses do not need it).
PEERS_STAMP := $(VENV)/.peers-installed
$(PEERS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[peers]'
	$(PY) -m pip install -q --no-deps 'ai-dynamo==1.6.1'
	touch $@

bench bench-sweep: $(PEERS_STAMP)

.PHONY: bench-peers-test
bench-peers-test: $(PEERS_STAMP) ## the Dynamo planner peer's tests (they need the peers extra)
	$(PY) -m pytest -q -p no:cacheprovider bench/tests

# Autoscaling benchmark (issue 11): included from the Makefile.
SEEDS ?= 1
# Cases run in parallel processes (≈ 0.5 GB each at most).
BENCH_WORKERS ?= 2

.PHONY: bench
bench: $(STAMP) ## every policy at defaults on every benchmark trace, both tables (75 cases on 2 processes; SEEDS=3 took 2 h 31 min for 72 on a slow 2-core machine); bench/tables.py prints the summary tables
	$(PY) bench/run.py --seeds $(SEEDS) --workers $(BENCH_WORKERS)

.PHONY: bench-ours
bench-ours: $(STAMP) ## after a change to ours alone: ours' rows re-run on every case, every other row kept from the last `make bench` (refused if the replay changed; CACHE=DIR keeps the prepared cases)
	$(PY) bench/run.py --only modelscale --seeds $(SEEDS) --workers $(BENCH_WORKERS) $(if $(CACHE),--cache $(CACHE))

.PHONY: bench-smooth
bench-smooth: $(STAMP) ## the aggregate tuning cases with the rate linear between 10-minute window centres instead of steps: how much of the result is the replay's steps (bench-smooth.json/.md)
	$(PY) bench/run.py --smooth --seeds $(SEEDS) --workers $(BENCH_WORKERS)

.PHONY: bench-present
bench-present: $(STAMP) ## the present-knowing reference on every tuning case: what reacting perfectly, with no forecast, costs (CACHE=DIR keeps the prepared cases: ≈ 2 min with them, ≈ 10 min more to prepare them)
	$(PY) bench/present.py --workers $(BENCH_WORKERS) $(if $(CACHE),--cache $(CACHE))

.PHONY: bench-sweep
bench-sweep: $(STAMP) ## sweep every policy's target on one grid: best at 99 %, goal check
	$(PY) bench/sweep.py

# Peers run from their own code (docs/peers.md): the `peers` extra, and NVIDIA Dynamo's
# planner from its wheel without its dependencies (`aisimulate` is a stub that downloads
# from NVIDIA's own index; the planner modules the peer uses do not need it).
PEERS_STAMP := $(VENV)/.peers-installed
$(PEERS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[peers]'
	$(PY) -m pip install -q --no-deps 'ai-dynamo==1.6.1'
	touch $@

bench bench-sweep bench-smooth: $(PEERS_STAMP)

.PHONY: bench-peers-test
bench-peers-test: $(PEERS_STAMP) ## the Dynamo planner peer's tests (they need the peers extra)
	$(PY) -m pytest -q -p no:cacheprovider bench/tests

.PHONY: bench-serving
bench-serving: $(STAMP) ## the simulator's serving policy at max replicas on a trace burst, with vs without (< 1 min)
	$(PY) bench/serving_policy.py
	$(PY) bench/serving_policy.py --rate-scale 2.5 --interactive-share 0.3

.PHONY: bench-live
bench-live: $(STAMP) cluster-tools keda-tools prometheus-install ## modelscale vs the real KEDA and HPA on the local cluster: 5 policies on the same trace segments (~20 min)
	$(PY) bench/live.py

.PHONY: bench-scale
bench-scale: $(STAMP) cluster-tools prometheus-install ## 1,000 ModelDeployments on one operator (API-only pods): pass time, RSS, API calls/min, soak (SOAK_SECONDS=600; ≈ 25 min)
	$(PY) bench/scale.py

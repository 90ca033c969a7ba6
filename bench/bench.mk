# Autoscaling benchmark (issue 6): included from the Makefile.

.PHONY: bench
bench: $(STAMP) ## every autoscaling policy on the benchmark traces (< 2 min)
	$(PY) bench/run.py

.PHONY: bench-sweep
bench-sweep: $(STAMP) ## sweep each policy's target: cost vs SLO curves and the goal check
	$(PY) bench/sweep.py

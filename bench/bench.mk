# Autoscaling benchmark (issue 11): included from the Makefile.
SEEDS ?= 1

.PHONY: bench
bench: $(STAMP) ## every policy at defaults on every benchmark trace, both tables (~5 min)
	$(PY) bench/run.py --seeds $(SEEDS)

.PHONY: bench-sweep
bench-sweep: $(STAMP) ## sweep every policy's target on one grid: best at 99 %, goal check
	$(PY) bench/sweep.py

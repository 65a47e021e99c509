# Development entry points; everything runs inside .venv (scripts/bootstrap.sh).
.PHONY: venv test demo bench clean

VENV ?= .venv
PYTHON := $(VENV)/bin/python
# Keep test nodes on this machine and apart from other ROS graphs: the test workers use
# ROS_DOMAIN_ID, ROS_DOMAIN_ID + 1, ... (test/workers.py).
ROS_DOMAIN_ID ?= 77
# pytest-xdist worker processes (0: none, the tests run in pytest's own process). One more than
# the cores: many tests wait on node processes and discovery, and a third worker uses that time
# (docs/performance.md).
TEST_WORKERS ?= 3
PYTEST_ARGS ?=

venv:
	VENV="$(abspath $(VENV))" ./scripts/bootstrap.sh

test: venv
	ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=$(ROS_DOMAIN_ID) \
		$(PYTHON) -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

demo: venv
	$(PYTHON) -m direction_up_ik.demo

# Benchmarks (benchmarks/, not part of the package) run with single-threaded BLAS: after a
# numpy/scipy BLAS call, OpenBLAS's idle worker threads spin for a while and take CPU from the
# solver being timed (docs/performance.md).
BENCH_ENV := OPENBLAS_NUM_THREADS=1

bench: venv
	$(BENCH_ENV) $(PYTHON) benchmarks/bench.py

# Side-by-side with KDL, roboticstoolbox and ikpy (installed by benchmarks/setup_peers.sh,
# never by requirements/*.txt). Figures go to build/bench_peers/.
.PHONY: bench-peers
BENCH_PEERS_ARGS ?= --json build/bench_peers/bench_peers.json --plot build/bench_peers/bench_peers.png
bench-peers: venv
	VENV="$(abspath $(VENV))" ./benchmarks/setup_peers.sh
	mkdir -p build/bench_peers
	$(BENCH_ENV) $(PYTHON) benchmarks/bench_peers.py $(BENCH_PEERS_ARGS)

# The ROS path: ~/solve round trip vs the in-process solve, ~/target -> command lag
# (benchmarks/bench_ros.py; starts the node on dual_arm_torso). BENCH_ROS_ARGS e.g. --json out.json.
.PHONY: bench-ros
BENCH_ROS_ARGS ?=
bench-ros: venv
	$(BENCH_ENV) ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=$(ROS_DOMAIN_ID) \
		$(PYTHON) benchmarks/bench_ros.py $(BENCH_ROS_ARGS)

clean:
	rm -rf $(VENV) build install log .pytest_cache .hypothesis *.egg-info
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

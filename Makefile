# Development entry points; everything runs inside .venv (scripts/bootstrap.sh).
.PHONY: venv test demo bench clean

VENV ?= .venv
PYTHON := $(VENV)/bin/python
# Keep test nodes on this machine and apart from other ROS graphs.
ROS_DOMAIN_ID ?= 77
PYTEST_ARGS ?=

venv:
	VENV="$(abspath $(VENV))" ./scripts/bootstrap.sh

test: venv
	ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=$(ROS_DOMAIN_ID) \
		$(PYTHON) -m pytest -q $(PYTEST_ARGS)

demo: venv
	$(PYTHON) -m direction_up_ik.demo

bench: venv
	$(PYTHON) -m direction_up_ik.bench

clean:
	rm -rf $(VENV) build install log .pytest_cache .hypothesis *.egg-info
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

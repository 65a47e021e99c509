"""Shared fixtures: bundled robot models (fresh per test: tests may move their joints) and helpers.

``make test`` runs the suite on several pytest-xdist workers, each in a ROS domain of its own
(``workers.py``).
"""

from __future__ import annotations

import pytest

import workers


# Before any test module reads ROS_DOMAIN_ID (node_harness.domain_id, the rclpy contexts).
workers.set_worker_domain()

from direction_up_ik.core.backend import KERNELS_READY, kernel_state, warm_up_backend  # noqa: E402
from direction_up_ik.robots import load_robot  # noqa: E402


def needs_kernels(item) -> bool:
    """False for a test marked without_kernels and for one parametrized to solve with the numpy
    reference only (``backend="numpy"``)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "numpy":
        return False
    return item.get_closest_marker("without_kernels") is None


def pytest_collection_modifyitems(items):
    """Each worker starts with its share of the tests marked slow (a colcon build, the driver
    smoke runs), which then overlap the rest of the suite instead of running alone at its end,
    then with its share of the tests that need no kernels, which on a fresh clone run while the
    kernels compile. Every worker orders alike; worksteal hands each one a contiguous block
    (:func:`workers.first_blocks`) and balances the rest."""
    def kind(item):  # 0: slow, 1: needs no kernels, 2: the rest
        return 0 if item.get_closest_marker("slow") is not None else 1 if not needs_kernels(item) else 2

    count = workers.worker_count()
    heads = [[] for _ in range(count)]
    for wanted in (0, 1):  # whole modules to a worker: they may share a module fixture
        modules = {}
        for item in items:
            if kind(item) == wanted:
                modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        for k, module in enumerate(modules.values()):
            heads[k % count] += module
    rest = [item for item in items if kind(item) == 2]
    ordered, taken = [], 0
    for head, size in zip(heads, workers.first_blocks(len(items), count)):
        fill = max(0, size - len(head))
        ordered += head + rest[taken:taken + fill]
        taken += fill
    items[:] = ordered + rest[taken:]


@pytest.fixture(autouse=True)
def compiled_kernels(request):
    """The compiled kernels, ready before each test: "auto" solves with them in the test
    process (a cold cache compiles them here, once, or waits for the process compiling them;
    core/backend.py). A test that needs none (:func:`needs_kernels`) starts at once, so on a
    fresh clone it runs while the kernels compile instead of waiting for them."""
    if needs_kernels(request.node) and kernel_state() != KERNELS_READY:
        warm_up_backend()


@pytest.fixture
def panda():
    return load_robot("panda_like")


@pytest.fixture
def ur5():
    return load_robot("ur5_like")


@pytest.fixture
def dual_arm():
    return load_robot("dual_arm_torso")

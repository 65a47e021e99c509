"""Shared fixtures: bundled robot models (fresh per test: tests may move their joints) and helpers.

``make test`` runs the suite on several pytest-xdist workers, each in a ROS domain of its own
(``workers.py``).
"""

from __future__ import annotations

import pytest

import cold_install
import workers

#: Tests that need the cold install's kernels (test/cold_install.py), whose compile starts in the
#: background as soon as one of them is collected.
COLD_INSTALL_TESTS = ("test_cold_start.py::test_an_unwritable_install_caches_the_kernels_per_user",)


# Before any test module reads ROS_DOMAIN_ID (node_harness.domain_id, the rclpy contexts).
workers.set_worker_domain()

from direction_up_ik.core.backend import warm_up_backend  # noqa: E402
from direction_up_ik.robots import load_robot  # noqa: E402


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the run's main process: before the workers start
        cold_install._shared()


def pytest_collection_finish(session):
    if any(item.nodeid.endswith(COLD_INSTALL_TESTS) for item in session.items):
        cold_install.start()


def pytest_sessionfinish(session, exitstatus):
    if not hasattr(session.config, "workerinput"):
        cold_install.cleanup()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """The compiled kernels, ready before the first test: "auto" solves with them in the test
    process from the start (a cold cache compiles them here, once; core/backend.py)."""
    return warm_up_backend()


@pytest.fixture
def panda():
    return load_robot("panda_like")


@pytest.fixture
def ur5():
    return load_robot("ur5_like")


@pytest.fixture
def dual_arm():
    return load_robot("dual_arm_torso")

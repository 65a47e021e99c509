"""Shared fixtures: bundled robot models (fresh per test: tests may move their joints) and helpers."""

from __future__ import annotations

import pytest

import cold_install
from direction_up_ik.core.backend import warm_up_backend
from direction_up_ik.robots import load_robot

#: Tests that need the cold install's kernels (test/cold_install.py), whose compile starts in the
#: background as soon as one of them is collected.
COLD_INSTALL_TESTS = ("test_cold_start.py::test_an_unwritable_install_caches_the_kernels_per_user",)


def pytest_collection_finish(session):
    if any(item.nodeid.endswith(COLD_INSTALL_TESTS) for item in session.items):
        cold_install.start()


def pytest_sessionfinish(session, exitstatus):
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

"""Shared fixtures: bundled robot models (fresh per test: tests may move their joints) and helpers."""

from __future__ import annotations

import pytest

from direction_up_ik.robots import load_robot


@pytest.fixture
def panda():
    return load_robot("panda_like")


@pytest.fixture
def ur5():
    return load_robot("ur5_like")


@pytest.fixture
def dual_arm():
    return load_robot("dual_arm_torso")

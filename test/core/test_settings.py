"""The settings schema (core/settings.py): one rule per field, one validator, memoised construction."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from direction_up_ik.core.errors import InputTypeError, InputValidationError
from direction_up_ik.core.settings import (DAMPING_MODES, JACOBIANS, SEARCH_SOLVER_DEFAULTS, SEEDINGS, SELECTIONS,
                                           STEP_SCALES, Rule, SearchSettings, SolverSettings, check, defaults, rules,
                                           search_settings, solver_settings)


@pytest.mark.parametrize("cls", [SolverSettings, SearchSettings])
def test_every_field_has_a_rule_with_a_description(cls):
    for field in dataclasses.fields(cls):
        rule = field.metadata.get("rule")
        assert isinstance(rule, Rule), field.name
        assert rule.kind in ("number", "integer", "choice", "seed") and len(rule.description) > 15, field.name
        assert rule.unit in ("", "m", "rad", "s", "rad or m"), field.name
        if field.default is not dataclasses.MISSING:  # every default obeys its own rule
            assert check(rule, field.name, field.default) == field.default, field.name


def test_the_defaults_are_the_spec_s_and_the_search_s():
    assert defaults(SolverSettings) == dict(
        max_iters=32, position_tol=1e-3, frame_tol_rad=1e-2, position_weight=1.0, rotation_weight=1.0,
        damping=1e-3, max_step_norm=0.25, jacobian="finite_difference", stall_window=0,
        num_step_scales=len(STEP_SCALES), damping_mode="constant", periodic_joints="as_solved")
    assert "max_position_error" not in defaults(SolverSettings)  # required (spec section 3)
    assert defaults(SearchSettings) == dict(num_seeds=4, time_budget=None, max_rounds=None, min_successes=1,
                                            selection="least_motion", random_seed=0, seeding="nearest")
    assert set(SEARCH_SOLVER_DEFAULTS) <= set(rules(SolverSettings))
    SolverSettings(max_position_error=0.03, **SEARCH_SOLVER_DEFAULTS)  # valid


def test_choices_are_the_module_s_tuples():
    assert rules(SolverSettings)["jacobian"].choices == JACOBIANS
    assert rules(SolverSettings)["damping_mode"].choices == DAMPING_MODES
    assert rules(SearchSettings)["selection"].choices == SELECTIONS
    assert rules(SearchSettings)["seeding"].choices == SEEDINGS


@pytest.mark.parametrize("rule, value, expected", [
    (Rule("number", "x"), 2, 2.0),
    (Rule("number", "x"), np.float32(0.5), 0.5),
    (Rule("number", "x", optional=True), None, None),
    (Rule("integer", "x", minimum=0), np.int64(3), 3),
    (Rule("integer", "x", minimum=1, maximum=8), 8, 8),
    (Rule("seed", "x", optional=True), None, None),
    (Rule("choice", "x", choices=("a", "b")), "b", "b"),
])
def test_the_validator_normalises_valid_values(rule, value, expected):
    got = check(rule, "field", value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("rule, value, error, message", [
    (Rule("number", "x"), 0.0, InputValidationError, "field: must be a finite positive number, got 0.0"),
    (Rule("number", "x"), math.inf, InputValidationError, "field: must be a finite positive number, got inf"),
    (Rule("number", "x"), "1", InputTypeError, "field: must be a finite positive number, got '1'"),
    (Rule("number", "x"), None, InputTypeError, "field: must be a finite positive number, got None"),
    (Rule("number", "x", optional=True), -1.0, InputValidationError,
     "field: must be None or a finite positive number, got -1.0"),
    (Rule("integer", "x", minimum=1), 0, InputValidationError, "field: must be a positive integer, got 0"),
    (Rule("integer", "x", minimum=0), True, InputTypeError, "field: must be an integer >= 0, got True"),
    (Rule("integer", "x", minimum=1, maximum=8), 9, InputValidationError,
     r"field: must be an integer in \[1, 8\], got 9"),
    (Rule("seed", "x"), -1, InputValidationError, "field: must be an integer >= 0, got -1"),
    (Rule("choice", "x", choices=("a", "b")), "c", InputValidationError,
     r"field: must be one of \['a', 'b'\], got 'c'"),
    (Rule("choice", "x", choices=("a", "b")), 1, InputTypeError, r"field: must be one of \['a', 'b'\], got 1"),
])
def test_the_validator_names_the_field_and_the_rule(rule, value, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        check(rule, "field", value)


def test_settings_validate_on_construction_and_replace():
    settings = SolverSettings(max_position_error=1)
    assert settings.max_position_error == 1.0 and type(settings.max_position_error) is float
    with pytest.raises(InputValidationError, match="damping: must be a finite positive number"):
        settings.replace(damping=-1.0)
    with pytest.raises(InputValidationError, match="random_seed: must be None or an integer >= 0, got -3"):
        SearchSettings(random_seed=-3)
    assert SearchSettings(time_budget=1).time_budget == 1.0


def test_memoised_construction_tells_types_apart():
    assert solver_settings(max_position_error=0.03) is solver_settings(max_position_error=0.03)
    assert search_settings(num_seeds=2) is search_settings(num_seeds=2)
    with pytest.raises(InputTypeError):
        search_settings(num_seeds=2.0)  # not the cached num_seeds=2
    assert search_settings(random_seed=None).random_seed is None

"""TargetBatch: many targets as arrays, the same request as tuples of DirectionUpTarget."""

import numpy as np
import pytest

from direction_up_ik import (DirectionUpTarget, DirectionValidationError, InputTypeError, InputValidationError,
                             LocalAxisConfigurationError, TargetBatch, build_problem,
                             robo_search_ik_direction_up, robo_solve_ik_direction_up_multi_batch)
from direction_up_ik.core.kinematics import mid_range, random_in_limits
from direction_up_ik.core.settings import solver_settings
from direction_up_ik.core.targets import full_pose_candidates

TARGET_FIELDS = ("ee_ids", "local_direction", "local_up", "target_position", "target_direction", "target_up",
                 "has_direction", "has_up")
LOCAL_AXES = {"default": {}, "tcp": dict(local_direction=None, local_up=None),
              "given": dict(local_direction=[[0.0, 0.0, 2.0], [1.0, 0.0, 0.0]],
                            local_up=[[0.0, 3.0, 0.1], [0.0, 0.0, 1.0]])}


def _rows(seed: int, b: int):
    """Positions, directions and ups (b, 2, 3), the axes of any length from 1e-300 to 1e300."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-300, 300, size=(b, 2, 1))
    return rng.normal(size=(b, 2, 3)), rng.normal(size=(b, 2, 3)) * scale, rng.normal(size=(b, 2, 3)) * scale[::-1]


def _bits(a: np.ndarray) -> bytes:
    return a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()


@pytest.mark.parametrize("local", sorted(LOCAL_AXES))
@pytest.mark.parametrize("mode", ["full", "axis", "position"])
def test_the_problem_is_the_one_of_the_same_targets_as_objects_bit_for_bit(dual_arm, mode, local):
    positions, directions, ups = _rows(7, 300)
    directions = None if mode == "position" else directions
    ups = ups if mode == "full" else None
    axes = LOCAL_AXES[local]
    batch = TargetBatch([0, 1], positions, directions, ups, **axes)
    candidates = [tuple(DirectionUpTarget(
        e, positions[b, e], None if directions is None else directions[b, e], None if ups is None else ups[b, e],
        **({k: v[e] for k, v in axes.items()} if local == "given" else axes)) for e in range(2))
        for b in range(len(positions))]
    assert batch.mode == candidates[0][0].mode and batch.num_candidates == 300 and batch.num_targets == 2
    settings = solver_settings(max_position_error=0.03)
    from_batch = build_problem(dual_arm, batch, settings=settings)
    from_objects = build_problem(dual_arm, candidates, settings=settings)
    for field in TARGET_FIELDS:
        assert _bits(getattr(from_batch, field)) == _bits(getattr(from_objects, field)), field


def test_solves_and_searches_answer_the_batch_as_they_answer_the_tuples(ur5):
    rng = np.random.default_rng(3)
    poses = ur5.tcp_transforms(random_in_limits(ur5, rng, 24))
    batch = TargetBatch.from_tcp_poses(poses)
    assert batch.mode == "full" and batch.uses_tcp_convention and batch.ee_ids.tolist() == [0]
    candidates = full_pose_candidates(poses)
    ur5.joint_q[:] = mid_range(ur5)
    for call in (lambda c: robo_solve_ik_direction_up_multi_batch(ur5, c, max_position_error=0.03),
                 lambda c: robo_search_ik_direction_up(ur5, c, max_position_error=0.03, max_rounds=2).result):
        a, b = call(candidates), call(batch)
        assert a.success.any()
        assert np.array_equal(a.joint_q, b.joint_q) and np.array_equal(a.success, b.success)
        assert np.array_equal(a.cost, b.cost, equal_nan=True) and a.best_index == b.best_index


def test_one_end_effector_takes_rows_of_three_and_the_arrays_are_read_only():
    batch = TargetBatch(1, [[0.3, 0.0, 0.4], [0.2, 0.1, 0.5]], [[0.0, 0.0, -2.0]] * 2)
    assert batch.position.shape == (2, 1, 3) and batch.mode == "axis" and batch.up is None
    assert batch.ee_ids.tolist() == [1]
    np.testing.assert_array_equal(batch.direction[:, 0], [[0.0, 0.0, -1.0]] * 2)
    for array in (batch.ee_ids, batch.position, batch.direction, batch.local_direction, batch.local_up):
        with pytest.raises(ValueError):
            array[0] = 0
    with pytest.raises(AttributeError):
        batch.mode = "full"


BAD = {
    "non-finite position": (dict(positions=[[[0.0, np.nan, 0.0]], [[0.0, 0.0, 0.0]]]), DirectionValidationError,
                            r"candidate 0.*positions: every component must be finite"),
    "zero direction": (dict(directions=[[[1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]]]), DirectionValidationError,
                       r"candidate 1.*directions: must be a non-zero vector"),
    "parallel up": (dict(directions=[[[1.0, 0.0, 0.0]]] * 2, ups=[[[0.0, 1.0, 0.0]], [[-3.0, 0.0, 0.0]]]),
                    DirectionValidationError, r"candidate 1.*directions/ups: .*parallel"),
    "ups without directions": (dict(ups=[[[0.0, 1.0, 0.0]]] * 2), DirectionValidationError, r"directions: is None"),
    "shape": (dict(positions=np.zeros((2, 2, 3))), InputTypeError, r"positions: expected shape \(B, 1, 3\)"),
    "directions' shape": (dict(directions=np.ones((3, 1, 3))), InputTypeError, r"directions: expected the shape"),
    "text": (dict(positions=[["a", "b", "c"]]), InputTypeError, r"positions: expected .* real numbers"),
    "ragged": (dict(positions=[[1.0, 2.0, 3.0], [1.0]]), InputTypeError, r"positions: expected"),
    "empty": (dict(positions=np.zeros((0, 1, 3))), InputValidationError, r"positions: must contain at least one"),
    "negative ee id": (dict(ee_ids=-1), InputValidationError, r"ee_ids: must be >= 0"),
    "repeated ee ids": (dict(ee_ids=[0, 0], positions=np.zeros((2, 2, 3))), InputValidationError,
                        r"ee_ids: must be distinct"),
    "float ee id": (dict(ee_ids=0.5), InputTypeError, r"ee_ids: expected an integer"),
    "one local axis None": (dict(local_direction=None), LocalAxisConfigurationError, r"local_direction/local_up"),
    "local axes' shape": (dict(local_direction=[1.0, 0.0], local_up=[0.0, 1.0]), InputTypeError,
                          r"local_direction/local_up: expected shape"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arrays_raise_errors_naming_the_field_the_rule_and_the_target(case):
    changes, error, pattern = BAD[case]
    args = dict(ee_ids=0, positions=np.zeros((2, 1, 3)))
    args.update(changes)
    with pytest.raises(error, match=pattern):
        TargetBatch(**args)


def test_poses_of_the_wrong_shape_are_named():
    with pytest.raises(InputTypeError, match=r"tcp: expected shape \(B, E, 4, 4\)"):
        TargetBatch.from_tcp_poses(np.zeros((3, 4, 4)))


def test_an_end_effector_the_robot_lacks_is_named_when_the_problem_is_built(ur5):
    batch = TargetBatch([0, 1], np.zeros((1, 2, 3)))
    with pytest.raises(InputValidationError, match=r"ee_ids: \[0, 1\]: not all end effectors of the robot"):
        build_problem(ur5, batch, settings=solver_settings(max_position_error=0.03))

"""The node's message -> core conversions and joint-state store, without a running node.

They sit on the per-request path, so they are written for speed (float64 arrays into the
core, the core's shared default local axes, no settings copy when nothing is overridden,
vectorised checks); these tests pin their results to the straightforward construction.
"""

from __future__ import annotations

import array
import math

import numpy as np
import pytest

from direction_up_ik.core import DirectionUpTarget, SolverSettings, TargetBatch, build_problem
from direction_up_ik.core.settings import solver_settings
from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget as TargetMsg, SolverOverrides
from direction_up_ik.ros.config import EndEffectorConfig, config_from_values
from direction_up_ik.ros.conversions import (BATCH_MIN_CANDIDATES, RequestError, search_options,
                                             settings_with_overrides, streaming_request, targets_from_candidates)
from direction_up_ik.robots import load_robot
from direction_up_ik.ros.joint_state import JointStateError, JointStateStore
from direction_up_ik.srv import SolveDirectionUpIK

Response = SolveDirectionUpIK.Response
EES = (EndEffectorConfig("left", "l", (0.0, 0.0, 0.1), (0.0, 0.0, 0.0), "tcp"),
       EndEffectorConfig("right", "r", (0.0, 0.0, 0.1), (0.0, 0.0, 0.0), "x_y"))
ROT = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # 90 deg about z
FRAMES = {"": np.eye(4), "turned": np.block([[ROT, np.array([[0.1], [0.2], [0.3]])],
                                             [np.zeros((1, 3)), np.ones((1, 1))]])}
ARRAYS = ("position_world", "direction_world", "up_world", "local_direction", "local_up")


def target(name, mode=TargetMsg.MODE_FULL, local_axes=TargetMsg.LOCAL_AXES_DEFAULT, frame_id="",
           position=(0.4, -0.1, 1.2), direction=(1.0, 0.2, -0.1), up=(0.0, 0.1, 1.0)):
    t = TargetMsg(end_effector=name, frame_id=frame_id, mode=mode, local_axes=local_axes)
    t.position.x, t.position.y, t.position.z = position
    t.direction.x, t.direction.y, t.direction.z = direction
    t.up.x, t.up.y, t.up.z = up
    t.local_direction.x, t.local_direction.y, t.local_direction.z = (0.0, 0.0, 2.0)
    t.local_up.x, t.local_up.y, t.local_up.z = (0.0, 3.0, 0.5)
    return t


def reference(msg, ee_id):
    """The core target a message stands for, built the plain way (tuples, explicit axes)."""
    frame = FRAMES[msg.frame_id]
    rot, trans = frame[:3, :3], frame[:3, 3]
    vec = lambda v: np.array([v.x, v.y, v.z])  # noqa: E731
    mode = msg.local_axes
    if mode == TargetMsg.LOCAL_AXES_CONFIGURED:
        mode = TargetMsg.LOCAL_AXES_TCP if EES[ee_id].local_axes == "tcp" else TargetMsg.LOCAL_AXES_DEFAULT
    local = {TargetMsg.LOCAL_AXES_DEFAULT: ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
             TargetMsg.LOCAL_AXES_TCP: (None, None),
             TargetMsg.LOCAL_AXES_EXPLICIT: (tuple(vec(msg.local_direction)), tuple(vec(msg.local_up)))}[mode]
    d = tuple(rot @ vec(msg.direction)) if msg.mode != TargetMsg.MODE_POSITION else None
    u = tuple(rot @ vec(msg.up)) if msg.mode == TargetMsg.MODE_FULL else None
    return DirectionUpTarget(ee_id, tuple(rot @ vec(msg.position) + trans), d, u, *local)


@pytest.mark.parametrize("frame_id", ["", "turned"])
@pytest.mark.parametrize("mode", [TargetMsg.MODE_FULL, TargetMsg.MODE_AXIS, TargetMsg.MODE_POSITION])
@pytest.mark.parametrize("local_axes", [TargetMsg.LOCAL_AXES_DEFAULT, TargetMsg.LOCAL_AXES_TCP,
                                        TargetMsg.LOCAL_AXES_EXPLICIT, TargetMsg.LOCAL_AXES_CONFIGURED])
def test_targets_equal_the_plain_construction(frame_id, mode, local_axes):
    msgs = [target("left", mode, local_axes, frame_id),
            target("right", mode, local_axes, frame_id, position=(0.4, 0.1, 1.1), direction=(0.0, 0.0, -1.0),
                   up=(1.0, 0.0, 0.0))]
    (got,) = targets_from_candidates([DirectionUpCandidate(targets=msgs)], EES, FRAMES)
    for ee_id, (mine, msg) in enumerate(zip(got, msgs)):
        ref = reference(msg, ee_id)
        assert (mine.ee_id, mine.mode, mine.uses_tcp_convention) == (ref.ee_id, ref.mode, ref.uses_tcp_convention)
        for field in ARRAYS:
            a, b = getattr(mine, field), getattr(ref, field)
            assert (a is None) == (b is None), field
            if a is not None:
                assert np.array_equal(a, b), (field, a, b)


@pytest.mark.parametrize("field, value, words", [
    ("position", (math.nan, 0.0, 1.0), "position: every component must be finite"),
    ("direction", (0.0, math.inf, 1.0), "direction: every component must be finite"),
    ("up", (0.0, 0.0, 0.0), "must be a non-zero vector"),
    ("local_direction", (math.nan, 0.0, 0.0), "local_direction"),
])
def test_bad_vectors_name_the_field(field, value, words):
    msg = target("left", local_axes=TargetMsg.LOCAL_AXES_EXPLICIT)
    v = getattr(msg, field)
    v.x, v.y, v.z = value
    with pytest.raises(RequestError) as info:
        targets_from_candidates([DirectionUpCandidate(targets=[msg])], EES, FRAMES)
    assert info.value.code == Response.INVALID_REQUEST
    assert str(info.value).startswith("candidates[0].targets[0].")
    assert words in str(info.value)


def _many(mode, local_axes, count=BATCH_MIN_CANDIDATES + 2, changes=None):
    """``count`` two-target candidates at spread poses; ``changes[(b, k)]``: target()'s keywords."""
    changes = changes or {}
    out = []
    for b in range(count):
        msgs = []
        for k, name in enumerate(("left", "right")):
            kwargs = dict(position=(0.4, 0.1 * b - 0.2 * k, 1.1 + 0.01 * b), direction=(1.0, 0.1 * b, -0.3 * k),
                          up=(0.05 * b, 0.1, 1.0))
            kwargs.update(changes.get((b, k), {}))
            msgs.append(target(name, mode, local_axes, **kwargs))
        out.append(DirectionUpCandidate(targets=msgs))
    return out


TARGET_FIELDS = ("ee_ids", "local_direction", "local_up", "target_position", "target_direction", "target_up",
                 "has_direction", "has_up")


@pytest.mark.parametrize("mode", [TargetMsg.MODE_FULL, TargetMsg.MODE_AXIS, TargetMsg.MODE_POSITION])
@pytest.mark.parametrize("local_axes", [TargetMsg.LOCAL_AXES_DEFAULT, TargetMsg.LOCAL_AXES_TCP,
                                        TargetMsg.LOCAL_AXES_CONFIGURED])  # configured: tcp and x_y mixed
def test_many_candidates_pack_as_one_batch_with_the_targets_one_by_one(mode, local_axes):
    candidates = _many(mode, local_axes)
    batch = targets_from_candidates(candidates, EES, FRAMES)
    assert isinstance(batch, TargetBatch) and batch.num_candidates == len(candidates)
    one_by_one = [targets_from_candidates([c], EES, FRAMES)[0] for c in candidates]
    robot, settings = load_robot("dual_arm_torso"), solver_settings(max_position_error=0.03)
    packed, reference = build_problem(robot, batch, settings=settings), build_problem(robot, one_by_one, settings=settings)
    for field in TARGET_FIELDS:
        a, b = getattr(packed, field), getattr(reference, field)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), field


@pytest.mark.parametrize("case", ["few", "frame", "explicit axes", "modes mixed", "order", "unknown"])
def test_requests_the_batch_does_not_take_go_target_by_target(case):
    changes = {"frame": {(2, 1): dict(frame_id="turned")},
               "explicit axes": {(3, 0): dict(local_axes=TargetMsg.LOCAL_AXES_EXPLICIT)},
               "modes mixed": {(0, 1): dict(mode=TargetMsg.MODE_AXIS)}}.get(case, {})
    mode, axes = TargetMsg.MODE_FULL, TargetMsg.LOCAL_AXES_DEFAULT
    candidates = _many(mode, axes, BATCH_MIN_CANDIDATES - 1 if case == "few" else BATCH_MIN_CANDIDATES + 2)
    for (b, k), kwargs in changes.items():
        msg = candidates[b].targets[k]
        for key, value in kwargs.items():
            setattr(msg, key, value)
    if case == "order":
        candidates[4].targets = list(reversed(candidates[4].targets))
    if case == "unknown":
        candidates[0].targets[1].end_effector = "third"
        with pytest.raises(RequestError, match=r"candidates\[0\]\.targets\[1\]\.end_effector: unknown"):
            targets_from_candidates(candidates, EES, FRAMES)
        return
    if case == "order":
        with pytest.raises(RequestError, match=r"candidates\[4\]\.targets\[\*\]\.end_effector"):
            targets_from_candidates(candidates, EES, FRAMES)
        return
    got = targets_from_candidates(candidates, EES, FRAMES)
    assert isinstance(got, list) and len(got) == len(candidates)
    assert all(isinstance(t, DirectionUpTarget) for c in got for t in c)


@pytest.mark.parametrize("field, value, words", [
    ("position", (math.nan, 0.0, 1.0), "position: every component must be finite"),
    ("up", (2.0, 0.4, -0.6), "Direction and Up must not be parallel"),
])
def test_a_bad_value_in_a_many_candidate_request_is_named_as_ever(field, value, words):
    candidates = _many(TargetMsg.MODE_FULL, TargetMsg.LOCAL_AXES_DEFAULT,
                       changes={(5, 1): {field: value, "direction": (1.0, 0.2, -0.3)}})
    with pytest.raises(RequestError) as info:
        targets_from_candidates(candidates, EES, FRAMES)
    assert info.value.code == Response.INVALID_REQUEST
    assert str(info.value).startswith("candidates[5].targets[1].") and words in str(info.value), str(info.value)


def test_settings_without_overrides_are_the_parameters_and_overrides_apply():
    base = SolverSettings(max_position_error=0.03, max_iters=20)
    assert settings_with_overrides(base, SolverOverrides()) == base
    changed = settings_with_overrides(base, SolverOverrides(max_iters=7, damping=0.01))
    assert (changed.max_iters, changed.damping, changed.position_tol) == (7, 0.01, base.position_tol)
    # The same overrides give the same object: the core keeps its one-candidate arrays per
    # settings object, so a client that always sends them does not rebuild those.
    assert settings_with_overrides(base, SolverOverrides(max_iters=7, damping=0.01)) is changed
    with pytest.raises(RequestError):
        settings_with_overrides(base, SolverOverrides(damping=-1.0))


def test_search_overrides_say_node_default_off_or_a_value():
    """0 = the node's search.* parameter, -1 = off, a positive value = that value
    (SolverOverrides.msg); the node searches by default."""
    config = config_from_values({})
    default = search_options(config, SolverOverrides())
    assert default["num_seeds"] == 4 and default["time_budget"] == 0.1 and default["max_rounds"] is None
    assert search_options(config, SolverOverrides(num_seeds=-1)) is None  # the spec's single start
    assert search_options(config, SolverOverrides(num_seeds=7))["num_seeds"] == 7
    no_budget = search_options(config, SolverOverrides(time_budget=-1.0, max_rounds=3))
    assert no_budget["time_budget"] is None and no_budget["max_rounds"] == 3
    assert search_options(config, SolverOverrides(time_budget=-1.0))["max_rounds"] == config.search.max_rounds
    assert search_options(config, SolverOverrides(time_budget=0.5))["time_budget"] == 0.5
    spec_node = config_from_values({"search.num_seeds": 0})
    assert search_options(spec_node, SolverOverrides()) is None
    assert search_options(spec_node, SolverOverrides(num_seeds=4))["num_seeds"] == 4
    for fields, words in ((dict(num_seeds=-2), "overrides.num_seeds"), (dict(time_budget=-0.5), "overrides.time_budget"),
                          (dict(time_budget=math.nan), "overrides.time_budget"),
                          (dict(max_rounds=-1), "overrides.max_rounds"),
                          (dict(time_budget=4000.0), "overrides.time_budget")):
        with pytest.raises(RequestError) as raised:
            search_options(config, SolverOverrides(**fields))
        assert raised.value.code == Response.INVALID_REQUEST and words in str(raised.value)


def test_joint_state_store_merges_rejects_and_names_missing_joints_in_order():
    names = ("a", "b", "c", "d")
    store = JointStateStore(names, np.full(4, -1.0), np.full(4, 1.0))
    assert store.update(["c", "x", "a"], [0.5, 9.0, -0.25]) == []       # unknown names ignored
    warnings = store.update(["a", "b", "d"], [math.nan, 1e39, 0.125])     # per joint
    assert len(warnings) == 2 and "non-finite" in warnings[0] and "float32" in warnings[1]
    with pytest.raises(JointStateError) as info:
        store.initial_state()
    assert info.value.kind == "missing" and "['b']" in str(info.value)
    q, notes = store.initial_state(["b"], [1.0005])                       # clamped onto the limit
    assert q.tolist() == [-0.25, 1.0, 0.5, 0.125] and len(notes) == 1
    with pytest.raises(JointStateError) as info:
        store.initial_state(["b"], [math.inf])
    assert info.value.kind == "invalid"


def test_a_start_of_every_joint_in_model_order_is_taken_as_by_name():
    """A streamed solve names every joint in model order: the same start, clamps and errors as
    the same values named in another order."""
    names = ("a", "b", "c", "d")
    store = JointStateStore(names, np.full(4, -1.0), np.full(4, 1.0))
    store.update(names, [0.0, 0.0, 0.0, 0.0])
    for values in ([0.5, -0.25, 1.0005, 0.125], [0.5, 1.5, 0.0, 0.0], [0.5, math.nan, 0.0, 0.0],
                   [0.5, 0.0, 1e39, 0.0]):
        answers = []
        for order in ((0, 1, 2, 3), (3, 2, 1, 0)):
            try:
                q, notes = store.initial_state([names[i] for i in order], array.array("d", [values[i] for i in order]))
                answers.append((q.tolist(), notes))
            except JointStateError as exc:
                answers.append((exc.kind, str(exc)))
        assert answers[0] == answers[1], values


# ----------------------------------------------------------------------------- collisions (issue 24)
def _batch(success, stop_reason, cost, best_index):
    from direction_up_ik.core import IKBatchResult
    b = len(success)
    return IKBatchResult(joint_q=np.zeros((b, 2), np.float32), success=np.array(success, np.int32),
                         cost=np.array(cost, float), best_index=best_index, position_error=np.zeros((b, 1)),
                         direction_error=np.zeros((b, 1)), up_error=np.zeros((b, 1)),
                         iterations=np.ones(b, np.int32), stop_reason=tuple(stop_reason), active_dof_ids=(0, 1))


def test_with_collisions_fails_the_colliding_successes_and_picks_the_best_free_one():
    from direction_up_ik.core import CollisionReport
    from direction_up_ik.ros.conversions import with_collisions
    result = _batch([1, 1, 0, 1], ["converged", "converged", "max_iters", "converged"], [0.1, 0.2, np.inf, 0.3], 0)
    report = CollisionReport(collision_free=np.array([False, True, False, True]),
                             clearance=np.array([-0.01, 0.02, -0.5, 0.1]),
                             closest_pair=(("a", "b"), ("a", "c"), ("a", "d"), ("a", "e")))
    judged = with_collisions(result, report)
    assert judged.success.tolist() == [0, 1, 0, 1] and judged.best_index == 1
    assert judged.cost.tolist() == [np.inf, 0.2, np.inf, 0.3]
    # only a converged state in collision is "in_collision"; an unreached one keeps its reason
    assert judged.stop_reason == ("in_collision", "converged", "max_iters", "converged")
    none_free = CollisionReport(np.zeros(4, bool), np.full(4, -0.1), (("a", "b"),) * 4)
    judged = with_collisions(result, none_free)
    assert judged.best_index is None and judged.success.sum() == 0
    assert judged.stop_reason == ("in_collision", "in_collision", "max_iters", "in_collision")
    all_free = CollisionReport(np.ones(4, bool), np.full(4, 0.1), (("a", "b"),) * 4)
    assert with_collisions(result, all_free) is result


def test_fill_response_reports_the_collision_check():
    from direction_up_ik.core import CollisionReport
    from direction_up_ik.ros.conversions import fill_response
    result = _batch([1, 0], ["converged", "in_collision"], [0.1, np.inf], 0)
    report = CollisionReport(np.array([True, False]), np.array([0.02, -0.003]), (("l1", "l3"), ("hand", "box")))
    response = fill_response(Response(), result, ["j1", "j2"], ["tool"], report=report)
    assert response.collisions_checked
    assert [(r.collision_free, r.clearance, list(r.closest_pair)) for r in response.results] == [
        (True, 0.02, ["l1", "l3"]), (False, -0.003, ["hand", "box"])]
    unchecked = fill_response(Response(), result, ["j1", "j2"], ["tool"])
    assert not unchecked.collisions_checked
    assert all(not r.collision_free and math.isnan(r.clearance) and list(r.closest_pair) == []
               for r in unchecked.results)


def test_streamed_requests_carry_what_the_node_reads():
    """A streamed target's request (not a rosidl message, see StreamedRequest): the spec's single
    start unless ``search``, the start state as floats by name, nothing else set."""
    candidate = DirectionUpCandidate(targets=[target("left")])
    config = config_from_values({})
    request = streaming_request(candidate, True, ("a", "b"), np.array([0.5, -1.0]))
    assert request.candidates == [candidate] and request.publish is True
    assert request.ignore_collisions is False and list(request.active_joints) == []
    assert list(request.initial_state.name) == ["a", "b"] and request.initial_state.position == [0.5, -1.0]
    assert all(type(v) is float for v in request.initial_state.position)
    assert search_options(config, request.overrides) is None  # the spec's single start
    assert settings_with_overrides(config.solver, request.overrides) is config.solver
    searched = streaming_request(candidate, False, search=True)
    assert searched.publish is False and searched.initial_state == ([], [])
    assert search_options(config, searched.overrides)["num_seeds"] == config.search.num_seeds

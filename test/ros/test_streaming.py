"""Streaming without joint jumps (ros/streaming.py and the node's ``stream``): ~/target solves
start from the last command while the joint states lag; a solution that would move a joint
farther than ``streaming.max_joint_step`` is approached a step per command, or held (counted)
when no continuous step exists, and the stream recovers."""

from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from direction_up_ik.robots import load_robot  # noqa: E402
from direction_up_ik.ros.config import ConfigError  # noqa: E402
from direction_up_ik.ros.node import DirectionUpIKNode  # noqa: E402
from direction_up_ik.ros.streaming import (CommandMemory, approach_steps, first_jump, slerp,  # noqa: E402
                                           step_limits)
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from node_harness import (assert_reaches, candidate_at, to_parameters, wait_until,  # noqa: E402
                          yaml_parameters)

Response = SolveDirectionUpIK.Response
MODEL = load_robot("ur5_like")
START = np.array([0.2, -1.2, 1.4, -1.6, -1.5, 0.3])  # away from the stretched-arm singularity
ORDER = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
         "wrist_3_joint")  # config/ur5_like.yaml command.joint_order = the model's order


# ----------------------------------------------------------------------------- pure rules
def test_step_limits_one_value_or_one_per_joint():
    np.testing.assert_array_equal(step_limits([0.1], 3), [0.1, 0.1, 0.1])
    np.testing.assert_array_equal(step_limits((0.1, 0.2, 0.3), 3), [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"1 value or one per joint \(3\), got 2"):
        step_limits([0.1, 0.2], 3)


def test_first_jump_names_the_joint_most_beyond_its_limit():
    limits = np.array([0.1, 0.5, 0.1])
    assert first_jump(np.zeros(3), np.array([0.1, -0.5, -0.09]), limits) is None  # at the limit: kept
    jump = first_jump(np.zeros(3), np.array([0.15, -0.9, 0.3]), limits)
    assert (jump.joint, jump.step, jump.limit) == (2, 0.3, 0.1)  # 3x its limit beats 1.8x and 1.5x
    assert first_jump(np.zeros(3), np.array([0.0, 0.0, 1e9]), np.array([0.1, 0.1, np.inf])) is None


def test_first_jump_matches_the_array_definition():
    """The joint of the largest |step| / limit above 1 (argmax: the first of equals), None when
    none is above: random states, steps at and on either side of their limits, ties, .inf limits."""
    rng = np.random.default_rng(7)
    for trial in range(500):
        d = int(rng.integers(1, 17))
        limits = rng.choice([0.05, 0.1, 0.3, np.inf], size=d)
        start = rng.uniform(-3.0, 3.0, d)
        ratio = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0], size=d) * rng.choice([-1.0, 1.0], size=d)
        solution = start + ratio * np.where(np.isinf(limits), 1.0, limits)
        over = np.abs(solution - start) / limits
        i = int(over.argmax())
        jump = first_jump(start, solution, limits)
        if over[i] <= 1.0:
            assert jump is None, trial
        else:
            assert (jump.joint, jump.step, jump.limit) == (i, solution[i] - start[i], limits[i]), trial
        assert first_jump(list(start), tuple(solution), limits.tolist()) == jump  # any sequences


def test_last_command_expires_after_the_timeout():
    memory = CommandMemory()
    assert memory.last(now=0.0, timeout=1.0) is None
    memory.record(np.array([1.0, 2.0]), now=10.0)
    q, age = memory.last(now=10.5, timeout=1.0)
    np.testing.assert_array_equal(q, [1.0, 2.0])
    assert math.isclose(age, 0.5)
    assert memory.last(now=11.01, timeout=1.0) is None       # the robot had time to get there
    assert memory.last(now=1e6, timeout=0.0) is not None      # 0 = no limit
    memory.forget()
    assert memory.last(now=10.5, timeout=1.0) is None
    assert (memory.published, memory.held, memory.count_held()) == (1, 0, 1)
    assert (memory.approached, memory.count_approached()) == (0, 1)


def test_slerp_and_approach_steps():
    x, y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    np.testing.assert_allclose(slerp(x, y, 0.5), [math.sqrt(0.5), math.sqrt(0.5), 0.0], atol=1e-12)
    np.testing.assert_allclose(slerp(x, y, 1.0), y, atol=1e-12)
    half = slerp(x, -x, 0.5)  # opposite: a quarter turn about some normal axis
    assert abs(np.dot(half, x)) < 1e-12 and math.isclose(np.linalg.norm(half), 1.0)
    start = [(np.zeros(3), x, y)]
    assert approach_steps(start, [(np.zeros(3), x, y)]) == 1
    assert approach_steps(start, [(np.array([0.0, 0.0, 0.1]), x, y)]) == 10          # 1 cm each
    assert approach_steps(start, [(np.zeros(3), y, None)]) == math.ceil((math.pi / 2) / 0.03)
    assert approach_steps(start, [(np.array([50.0, 0, 0]), None, None)]) == 100       # capped


# ----------------------------------------------------------------------------- the node
def _ur5(ros, **params):
    """A ur5_like node (its config) whose joint state stays at START: nothing echoes commands."""
    node = ros.start_node("ur5_like", params=params)
    node.publish_full_state(START)
    return node


def _q(command) -> np.ndarray:
    return np.asarray(command.data, dtype=np.float64)  # joint_order is the model's order


def _spy_starts(node) -> list:
    """The initial_state positions of every solve the node runs from now on."""
    starts, real = [], node.node.solve

    def spy(req, resp):
        starts.append(np.asarray(req.initial_state.position, dtype=np.float64))
        return real(req, resp)
    node.node.solve = spy
    return starts


def test_targets_start_from_the_last_command_while_joint_states_lag(ros):
    """A stream of targets 0.05 rad apart per joint, the joint state never moving: each solve
    starts from the command before it, so every command is published and none steps more than
    the limit; from the joint states the third target would already be held."""
    node = _ur5(ros)
    assert list(node.node.get_parameter("command.joint_order").value) == list(MODEL.joint_names) == list(ORDER)
    starts = _spy_starts(node)
    path = [START + 0.05 * k for k in range(1, 7)]
    for k, q in enumerate(path, start=1):
        node.node._on_target(candidate_at(MODEL, q, ["tool"]))
        node.wait_commands(k)
    commands = [_q(c) for c in node.commands]
    np.testing.assert_allclose(starts[0], START)  # no command yet: the joint states
    for k in range(1, len(path)):
        np.testing.assert_allclose(starts[k], commands[k - 1])  # then the last command
    steps = np.abs(np.diff(np.vstack([START, commands]), axis=0))
    assert steps.max() <= 0.1 + 1e-9 and node.node.commands.held == 0
    np.testing.assert_allclose(commands[-1], path[-1], atol=2e-2)

    # From the joint states instead (live update): START -> the next target is 0.35 rad per joint,
    # too far for one command: a step toward it is published.
    assert node.set_param("streaming.start_from", "joint_states").successful
    solves = len(starts)
    outcome = node.node.stream(candidate_at(MODEL, START + 0.35, ["tool"]), True)
    np.testing.assert_allclose(starts[solves], START)
    assert outcome.approach < 1.0 and node.node.commands.approached == 1
    assert np.abs(outcome.command - START).max() <= 0.1 + 1e-9


def test_a_far_target_is_approached_a_step_per_command(ros):
    """A target whose solution is far from the last command (the wrist turned 1 rad): not
    published; the command is the farthest continuous step toward it within the limit, and
    the following commands close the rest of the way."""
    node = _ur5(ros)
    node.node._on_target(candidate_at(MODEL, START + 0.05, ["tool"]))
    (first,) = node.wait_commands(1)
    far = START + 0.05
    far[5] += 1.0
    target = candidate_at(MODEL, far, ["tool"])
    outcome = node.node.stream(target, True)
    assert outcome.response.success and outcome.published and not outcome.held
    assert 0.0 < outcome.approach < 1.0 and "approaching" in outcome.response.message
    np.testing.assert_allclose(outcome.start, _q(first))
    step = outcome.command - _q(first)
    assert np.abs(step).max() <= 0.1 + 1e-9 and step[5] > 0.05  # toward the target, within the limit
    assert node.node.commands.approached == 1 and node.node.commands.held == 0
    for _ in range(30):  # the same target again: each command one step closer, none a jump
        outcome = node.node.stream(target, True)
        if outcome.approach == 1.0:
            break
    published = node.wait_commands(node.node.commands.published)  # every one, the last included
    commands = np.vstack([_q(first)] + [_q(c) for c in published[1:]])
    assert outcome.approach == 1.0 and outcome.published
    assert np.abs(np.diff(commands, axis=0)).max() <= 0.1 + 1e-9
    # The solver's up error is the roll about the direction; the raw +Y angle adds the direction's.
    assert_reaches(MODEL, commands[-1], {0: MODEL.tcp_transforms(far)[0]}, frame_tol=2e-2)


def test_a_jump_is_held_and_the_stream_recovers(ros):
    """With a limit below the first step of any approach the far target is held: no command,
    the counter says so; the next target near the stream publishes again."""
    node = _ur5(ros, **{"streaming.max_joint_step": [0.02]})
    node.node._on_target(candidate_at(MODEL, START + 0.005, ["tool"]))
    (first,) = node.wait_commands(1)
    far = START + 0.005
    far[1] -= 0.6  # the shoulder: a centimetre of approach already moves it more than 0.02
    outcome = node.node.stream(candidate_at(MODEL, far, ["tool"]), True)
    assert outcome.response.success and outcome.held and not outcome.published
    assert (outcome.jump.joint, outcome.jump.limit) == (1, pytest.approx(0.02))
    assert "held, not published: joint 'shoulder_lift_joint'" in outcome.response.message
    assert node.node.commands.held == 1 and len(node.commands) == 1
    np.testing.assert_allclose(outcome.start, _q(first))  # held: the stream's start stays
    node.node._on_target(candidate_at(MODEL, START + 0.015, ["tool"]))
    node.wait_commands(2)
    assert np.abs(_q(node.commands[1]) - _q(first)).max() <= 0.02 + 1e-9
    # Per-joint limits: a generous shoulder lets the far target through at once.
    assert node.set_param("streaming.max_joint_step", [0.02, 2.0, 2.0, 2.0, 0.02, 0.02]).successful
    outcome = node.node.stream(candidate_at(MODEL, far, ["tool"]), True)
    assert outcome.published and outcome.approach == 1.0, outcome.response.message
    node.wait_commands(3)


@pytest.mark.parametrize("name, value, words", [
    ("streaming.max_joint_step", [0.1, 0.2], "1 value or one per joint (6), got 2"),
    ("streaming.max_joint_step", [0.0], "values > 0"),
    ("streaming.max_joint_step", [math.nan], "values > 0"),
    ("streaming.max_joint_step", [], "values > 0"),
    ("streaming.start_from", "robot", "must be one of ['last_command', 'joint_states']"),
    ("streaming.last_command_timeout", -1.0, ""),
])
def test_bad_streaming_updates_are_refused_with_the_reason(ros, name, value, words):
    node = _ur5(ros)
    result = node.set_param(name, value)
    assert not result.successful and words in result.reason, result.reason
    assert node.set_param("streaming.max_joint_step", [0.1] * 6).successful  # one per joint is fine


def test_step_limits_of_the_wrong_length_are_a_configuration_error(ros_context):
    values = {**yaml_parameters("ur5_like"), "streaming.max_joint_step": [0.1, 0.1]}
    with pytest.raises(ConfigError, match=r"parameter 'streaming.max_joint_step': needs 1 value or one per joint"):
        DirectionUpIKNode(context=ros_context, parameter_overrides=to_parameters(values))


def test_no_joint_state_and_no_command_is_reported(ros):
    node = ros.start_node("ur5_like")
    outcome = node.node.stream(candidate_at(MODEL, START, ["tool"]), True)
    assert outcome.response.error_code == Response.NO_JOINT_STATE and outcome.start is None
    node.publish_full_state(START)
    wait_until(lambda: node.node.streaming_start() is not None, what="a complete joint state")
    assert node.node.stream(candidate_at(MODEL, START + 0.02, ["tool"]), True).published

"""``bench_ros.echo_lags``: the streaming floor's commands matched to the streamed targets."""

import math

import pytest

import bench_ros
from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
from sensor_msgs.msg import JointState


def _candidate(*positions):
    targets = []
    for x, y, z in positions:
        target = DirectionUpTarget(end_effector="e")
        target.position.x, target.position.y, target.position.z = x, y, z
        targets.append(target)
    return DirectionUpCandidate(targets=targets)


def _command(*values):
    return JointState(name=[f"j{i}" for i in range(8)], position=list(values) + [0.0] * (8 - len(values)))


def test_echo_commands_match_their_targets_by_the_positions_they_copy():
    messages = [_candidate((0.1, 0.2, 0.3), (0.4, 0.5, 0.6)),
                _candidate((0.1, 0.2, 0.3), (0.4, 0.5, 0.7)),  # differs in the last value only
                _candidate((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))]
    sends = [(0, 10.0), (1, 10.01), (2, 10.02), (0, 10.03)]  # target 0 again: its first send counts
    received = [(10.004, _command(0.1, 0.2, 0.3, 0.4, 0.5, 0.6)),
                (10.013, _command(0.1, 0.2, 0.3, 0.4, 0.5, 0.7)),
                (10.05, _command(0.1, 0.2, 0.3, 0.4, 0.5, 0.8)),  # no such target
                (10.06, _command(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0))]  # what follows the positions is ignored
    lags = []
    summary = bench_ros.echo_lags(received, sends, messages, lags)
    assert lags == pytest.approx([0.004, 0.003, 0.04])
    assert summary["matched"] == 3 and summary["unmatched"] == 1
    assert summary["lag_ms"]["max"] == pytest.approx(40.0) and summary["lag_ms"]["p50"] == pytest.approx(4.0)


def test_an_echo_of_a_target_never_sent_is_unmatched():
    messages = [_candidate((0.1, 0.2, 0.3))]
    lags = []
    summary = bench_ros.echo_lags([(1.0, _command(0.1, 0.2, 0.3))], [], messages, lags)
    assert lags == [] and summary["matched"] == 0 and summary["unmatched"] == 1
    assert math.isnan(summary["lag_ms"]["p50"])

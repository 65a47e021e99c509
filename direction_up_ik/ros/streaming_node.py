"""The node's streamed solves (``~/target``, marker drags): start, step limit, approach.

:class:`StreamingSolves` is a part of :class:`~.node.DirectionUpIKNode` (a mixin; the node
class lists it first): the ``~/target`` callback and :meth:`~StreamingSolves.stream`, which
the markers' drags call too. It uses the node's ``solve``, ``publish_command``, ``commands``
(:class:`~.streaming.CommandMemory`), ``_config``, ``_robot``, ``_frames``,
``_joint_states``, ``_log_throttle`` and logger. The rules themselves, without ROS, are in
:mod:`.streaming` (docs/design.md, "Streaming").
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from direction_up_ik.msg import DirectionUpCandidate
from direction_up_ik.srv import SolveDirectionUpIK

from .config import ConfigError
from .conversions import approach_ends, candidate_between, streaming_request
from .robot_model import check_step_limits
from .streaming import StreamOutcome, approach_steps, first_jump

Response = SolveDirectionUpIK.Response


class StreamingSolves:
    """The streamed solves of :class:`~.node.DirectionUpIKNode` (see the module docstring)."""

    _kept_step_limits = None  # (config, joints, limits) of _step_limits

    def _on_target(self, msg: DirectionUpCandidate) -> None:
        """The ``~/target`` callback: :meth:`stream`, publishing per ``publish_streaming``."""
        outcome = self.stream(msg, self._config.publish_streaming)
        response = outcome.response
        if response.error_code not in (Response.SUCCESS, Response.NO_SOLUTION) \
                and self._log_throttle.due("target_rejected", 2.0):
            self.get_logger().warning(f"~/target rejected: {response.message}")

    def streaming_start(self) -> Optional[np.ndarray]:
        """(D,) start of a ~/target solve: the last published command while it is at most
        ``streaming.last_command_timeout`` old (``streaming.start_from`` last_command), else the
        joint states; None when they are incomplete (the solve then reports NO_JOINT_STATE)."""
        config = self._config
        if config.streaming_start_from == "last_command":
            last = self.commands.last(time.monotonic(), config.streaming_last_command_timeout)
            if last is not None:
                return last[0]
        q = self._joint_states.latest()
        return q if np.isfinite(q).all() else None

    def stream(self, candidate: DirectionUpCandidate, publish: bool, start: Optional[np.ndarray] = None,
               search: bool = False, approach: str = "step") -> StreamOutcome:
        """Solve one streamed candidate from ``start`` (D,) (None: :meth:`streaming_start`) and
        publish its solution when ``publish``, unless a joint would step farther than
        ``streaming.max_joint_step`` from the start. Then :meth:`_approach` the target:
        ``approach`` "step" (~/target) publishes the farthest continuous step toward it within
        the limit, "walk" (marker drags) its solution at the end of a continuous path. Without
        either the command is held (counted, warned). Never raises. ``search``: the node's
        search instead of the single start (a marker's retry)."""
        if self._robot is None:
            response = self.solve(streaming_request(candidate, False), SolveDirectionUpIK.Response())
            return StreamOutcome(response, None, None, False)
        if start is None:
            start = self.streaming_start()
        names = list(self._robot.joint_names) if start is not None else []
        request = streaming_request(candidate, False, names, start if start is not None else (), search)
        response = self.solve(request, SolveDirectionUpIK.Response())
        if not response.success or start is None:
            return StreamOutcome(response, start, None, False)
        q = np.asarray(response.results[response.best_index].joint_positions, dtype=np.float64)
        limits = self._step_limits()
        jump = first_jump(start, q, limits)
        fraction = 1.0
        if jump is not None:
            found = self._approach(candidate, start, limits, walk=approach == "walk")
            if found is not None:
                q, fraction = found
                if fraction < 1.0:
                    count = self.commands.count_approached()
                    joint = self._robot.joint_names[jump.joint]
                    response.message += (f"; approaching: {100 * fraction:.0f} % of the way (the target's "
                                         f"solution moves joint '{joint}' by {jump.step:+.3f})")
                    if self._log_throttle.due("approach", 1.0):
                        self.get_logger().warning(
                            f"streamed target too far for one command ({count} approach steps so far): joint "
                            f"'{joint}' would step {jump.step:+.3f} > streaming.max_joint_step {jump.limit:g}; "
                            "commanding steps toward it")
                jump = None
        if jump is not None:
            held = self.commands.count_held()
            joint = self._robot.joint_names[jump.joint]
            detail = (f"joint '{joint}' would step {jump.step:+.3f} (rad or m) > streaming.max_joint_step "
                      f"{jump.limit:g}")
            response.message += f"; held, not published: {detail}"
            if self._log_throttle.due("held", 1.0):
                self.get_logger().warning(f"streamed solution held ({held} so far): {detail}; the stream "
                                          "goes on from the last command")
            return StreamOutcome(response, start, jump, False)
        if publish:
            self.publish_command(q)
            response.message += "; command published"
        return StreamOutcome(response, start, None, publish, q if publish else None, fraction)

    def _step_limits(self) -> np.ndarray:
        """(D,) ``streaming.max_joint_step`` per joint of the model, built once per configuration."""
        config, joints, kept = self._config, self._robot.num_dofs, self._kept_step_limits
        if kept is None or kept[0] is not config or kept[1] != joints:
            try:
                limits = check_step_limits(config, joints)
            except ConfigError:  # cannot happen: live updates are checked against the model
                limits = np.full(joints, np.inf)
            kept = self._kept_step_limits = (config, joints, limits)
        return kept[2]

    def _approach(self, candidate: DirectionUpCandidate, start: np.ndarray, limits: np.ndarray,
                  walk: bool = False):
        """A continuous way toward ``candidate`` from ``start`` (D,): sub-targets from the TCPs at
        ``start`` to the targets (positions on the line, directions and ups on great circles, in
        each target's frame), each solved from the one before and within ``limits`` (D,) of it.
        Returns (q (D,), fraction of the way): the farthest sub-target also within the limits of
        ``start``, or with ``walk`` the target itself; None when there is none (not even the
        first sub-step, or with ``walk`` any sub-step breaks the way)."""
        tcp = self._robot.tcp_transforms(np.asarray(start, dtype=np.float64))
        starts, ends = approach_ends(candidate, tcp, self._frames, self._config.end_effectors)
        steps = approach_steps(starts, ends)
        names, best, q_prev = list(self._robot.joint_names), None, start
        for k in range(1, steps + 1):
            s = k / steps
            sub = candidate_between(candidate, starts, ends, s)
            response = self.solve(streaming_request(sub, False, names, q_prev), SolveDirectionUpIK.Response())
            if not response.success:
                break
            q = np.asarray(response.results[response.best_index].joint_positions, dtype=np.float64)
            if first_jump(q_prev, q, limits) is not None or (not walk and first_jump(start, q, limits) is not None):
                break
            best, q_prev = (q, s), q
        return best if not walk or (best is not None and best[1] == 1.0) else None

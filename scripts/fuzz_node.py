#!/usr/bin/env python3
"""Fuzz ``direction_up_ik_node``'s ``~/solve`` with random and malformed requests.

    .venv/bin/python scripts/fuzz_node.py [--requests 10000] [--seed N] [--json out.json]

Starts the node (``config/dual_arm_torso.yaml``) as a subprocess in a namespace of its own,
publishes a valid joint state and sends ``--requests`` SolveDirectionUpIK requests, one at a
time: valid ones (any mode, local axes, frame, active joints, initial state and overrides;
some candidates out of reach) mixed with malformed ones, each with one defect -- NaN / inf /
1e308 / zero / parallel vectors, far positions, unknown or duplicate end effectors,
candidates that differ in their end effectors or local axes, empty candidates, too many
candidates or targets (up to ``--huge-size``, 10^5), unknown or duplicate active joints,
bad initial states (unknown names, NaN, mismatched lengths, out of limits, beyond float32,
10^5 entries), bad frame ids, bad mode / local_axes values, bad overrides (negative, NaN,
inf, beyond the parameter's range, extreme, too many seeds).
A few requests' candidates also go to ``~/target``.

Checks (any failure is a violation; exit code 1):

* every request gets a response, with an error code among the srv's constants (never
  INTERNAL_ERROR), the code the defect calls for, and a non-empty message;
* rejected requests carry no results and best_index -1; SUCCESS / NO_SOLUTION / IN_COLLISION responses are
  re-checked against their own request with an independent FK (Pinocchio): joints within
  limits, inactive joints unchanged, every claimed success really within the tolerances,
  reported errors, cost and best_index as computed independently;
* the node process stays alive and answers a known valid request correctly at the end;
* its resident memory (VmRSS) grows by less than ``--rss-limit-mib`` (50) from the end of
  the warm-up (the first ``--warmup`` requests: every kind of request once, the 10^5-entry
  kinds ``--warmup-huge`` (5) times more) to the end of the run, both read after 20 small valid requests (rclpy
  keeps the previous request's message objects until the next one; the peak, VmHWM, is
  reported too).

Prints counts per error code and per kind of request, requests/s, latencies and RSS.

A 10^5-entry request answered after more than 15 s is a violation too; with ``--smoke`` (the CI
check, ``test/ros/test_reliability.py``) that limit is only reported (under "timing_notes"),
and a response is lost only after 300 s rather than 120 s: the smoke run fails on a lost,
wrong or crashed answer, never on a slow machine.
"""

from __future__ import annotations

import argparse
import collections
import copy
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_common import (HANG_S, NodeProcess, RosClient, close_report, finish, near,  # noqa: E402
                           percentile, print_outcome, set_vec, tcp_target, unique_namespace,
                           wait_for_joint_state)
from driver_judge import Judge  # noqa: E402

HUGE = 100_000          # entries of the largest arrays sent
SLOW_HUGE_S = 15.0      # a 10^5-entry request must be answered within this many seconds (measured
#                         1-9 s on 2 busy cores: the client's serialisation, the transport of 15 MB and
#                         rclpy's deserialisation in the node; the node's own checks take ~0.1 ms)
REQUEST_TIMEOUT_S = 120.0  # a response later than this is lost (--smoke: HANG_S)
SETTLE = 20             # small valid requests before each RSS reading of the growth check
WARMUP_HUGE = 5         # extra requests of each 10^5-entry kind in the warm-up


class Factory:
    """Random requests: ``make(kind)`` -> (request, allowed error codes)."""

    def __init__(self, judge: Judge, rng: np.random.Generator, huge: int = HUGE) -> None:
        from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
        from direction_up_ik.srv import SolveDirectionUpIK
        self.j, self.rng, self.model, self.huge = judge, rng, judge.model, huge
        self.T, self.C, self.Srv = DirectionUpTarget, DirectionUpCandidate, SolveDirectionUpIK
        self.R = SolveDirectionUpIK.Response
        R = self.R
        self.valid_codes = set(judge.outcomes)
        self.anything = {*judge.outcomes, R.INVALID_REQUEST, R.NUMERICAL_FAILURE}
        self.names = list(judge.joint_names)
        self.continuous = [i for i in range(len(self.names))
                           if not np.isfinite(judge.lower[i]) and not np.isfinite(judge.upper[i])]
        self.bounded = [i for i in range(len(self.names)) if i not in self.continuous]
        self._cache = {}
        #: kind -> (weight, builder)
        self.kinds = {
            "valid": (30, self.valid_kind),
            "valid_large_batch": (0.3, self.valid_large_batch),
            "no_candidates": (1, lambda: (self.Srv.Request(), {R.INVALID_REQUEST})),
            "empty_candidate": (2, self.empty_candidate),
            "non_finite_value": (5, self.non_finite_value),
            "extreme_finite_value": (3, self.extreme_finite_value),
            "zero_vector": (3, self.zero_vector),
            "parallel_vectors": (3, self.parallel_vectors),
            "far_position": (2, self.far_position),
            "unknown_end_effector": (3, self.unknown_end_effector),
            "ee_count_mismatch": (2, self.ee_count_mismatch),
            "ee_order_mismatch": (2, self.ee_order_mismatch),
            "duplicate_end_effector": (2, self.duplicate_end_effector),
            "local_axes_mismatch": (2, self.local_axes_mismatch),
            "too_many_candidates": (1, self.too_many_candidates),
            "too_many_targets": (1, self.too_many_targets),
            "huge_candidates": (0.1, self.huge_candidates),
            "huge_empty_candidates": (0.1, self.huge_empty_candidates),
            "huge_targets": (0.1, self.huge_targets),
            "unknown_active_joint": (2, self.unknown_active_joint),
            "duplicate_active_joint": (2, self.duplicate_active_joint),
            "huge_active_joints": (0.1, self.huge_active_joints),
            "initial_state_unknown_joint": (2, self.initial_state_unknown_joint),
            "initial_state_non_finite": (2, self.initial_state_non_finite),
            "initial_state_length_mismatch": (2, self.initial_state_length_mismatch),
            "initial_state_duplicate": (1, self.initial_state_duplicate),
            "initial_state_out_of_limits": (2, self.initial_state_out_of_limits),
            "initial_state_beyond_float32": (1, self.initial_state_beyond_float32),
            "huge_initial_state": (0.1, self.huge_initial_state),
            "bad_frame_id": (3, self.bad_frame_id),
            "bad_mode": (2, self.bad_mode),
            "bad_local_axes": (2, self.bad_local_axes),
            "bad_override": (4, self.bad_override),
            "out_of_range_override": (2, self.out_of_range_override),
            "too_many_seeds": (1, self.too_many_seeds),
            "extreme_override": (2, self.extreme_override),
        }

    # ------------------------------------------------------------------ helpers
    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def random_unit(self) -> np.ndarray:
        v = self.rng.normal(size=3)
        return v / np.linalg.norm(v)

    def garbage(self) -> tuple:
        return self.choice([(math.nan, 0.0, 0.0), (math.inf, -math.inf, 0.0), (0.0, 0.0, 0.0),
                            (1e308, 1e308, 1e308), tuple(self.rng.normal(size=3))])

    def valid(self, n_cand=None, unreachable: float = 0.1):
        """A valid request: random end effectors, modes, local axes, frames, lengths, ignored
        fields filled with garbage, initial state, active joints and overrides."""
        rng, T, j = self.rng, self.T, self.j
        req = self.Srv.Request()
        ees = self.choice([["left", "right"]] * 3 + [["right", "left"], ["left"], ["right"]])
        axes = {}
        for name in ees:
            kind = self.choice(["tcp", "default", "configured", "explicit"])
            if kind == "explicit":
                a = self.random_unit()
                b = self.random_unit()
                while abs(np.dot(a, b)) > 0.9:
                    b = self.random_unit()
                axes[name] = (T.LOCAL_AXES_EXPLICIT, (a, b))
            else:
                axes[name] = {"tcp": (T.LOCAL_AXES_TCP, None), "default": (T.LOCAL_AXES_DEFAULT, None),
                              "configured": (T.LOCAL_AXES_CONFIGURED, None)}[kind]
        if rng.random() < 0.25:  # initial state: some joints overridden
            idx = rng.choice(len(self.names), size=int(rng.integers(1, len(self.names) + 1)), replace=False)
            q = near(self.model, j.state, rng, 0.5)
            values = [float(q[i]) for i in idx]
            if rng.random() < 0.3:  # a bounded joint just beyond its limit: clamped by the node
                k = int(rng.integers(len(idx)))
                if idx[k] in self.bounded:
                    i = idx[k]
                    values[k] = float(j.upper[i] + rng.uniform(0, 9e-4) if rng.random() < 0.5
                                      else j.lower[i] - rng.uniform(0, 9e-4))
            req.initial_state.name = [self.names[i] for i in idx]
            req.initial_state.position = values
        q0 = j.initial_state(req)
        active = list(range(len(self.names)))
        if rng.random() < 0.2:
            active = sorted(rng.choice(len(self.names), size=int(rng.integers(1, len(self.names) + 1)),
                                       replace=False).tolist())
            order = list(active)
            rng.shuffle(order)
            req.active_joints = [self.names[i] for i in order]
        n_cand = n_cand or self.choice([1, 1, 1, 2, 2, 3, 4, 8])
        candidates = []
        for _ in range(n_cand):
            goal = q0.copy()
            goal[active] = near(self.model, q0, rng, self.choice([0.05, 0.2, 0.5]))[active]
            tcp = self.model.tcp_transforms(goal)
            if rng.random() < unreachable:
                tcp = tcp.copy()
                tcp[:, :3, 3] += (1.5, 0.0, 0.8)
            targets = []
            for name in ees:
                e = j.ee_names.index(name)
                mode = self.choice([T.MODE_FULL] * 3 + [T.MODE_AXIS, T.MODE_POSITION])
                frame_id = self.choice(["", "", "base_link"])
                la, local = axes[name]
                t = tcp_target(name, tcp[e], frame_id=frame_id, frame=j.frames[frame_id], mode=mode,
                               local_axes=la, local=local,
                               scale=(10 ** rng.uniform(-3, 3), 10 ** rng.uniform(-3, 3)))
                if mode == T.MODE_FULL and rng.random() < 0.3:  # up not perpendicular to direction
                    d = np.array([t.direction.x, t.direction.y, t.direction.z])
                    u = np.array([t.up.x, t.up.y, t.up.z])
                    set_vec(t.up, u / np.linalg.norm(u) + rng.uniform(-2, 2) * d / np.linalg.norm(d))
                if rng.random() < 0.5:  # fields the mode / local axes ignore: garbage
                    if mode != T.MODE_FULL:
                        set_vec(t.up, self.garbage())
                    if mode == T.MODE_POSITION:
                        set_vec(t.direction, self.garbage())
                    if la != T.LOCAL_AXES_EXPLICIT:
                        set_vec(t.local_direction, self.garbage())
                        set_vec(t.local_up, self.garbage())
                targets.append(t)
            candidates.append(self.C(targets=targets))
        req.candidates = candidates
        if rng.random() < 0.3:
            o = req.overrides
            for field, low, high in (("position_tol", 5e-4, 5e-3), ("frame_tol_rad", 5e-3, 5e-2),
                                     ("max_position_error", 0.01, 0.1), ("position_weight", 0.5, 2.0),
                                     ("rotation_weight", 0.5, 2.0), ("damping", 1e-4, 1e-2),
                                     ("max_step_norm", 0.05, 0.5)):
                if rng.random() < 0.3:
                    setattr(o, field, float(rng.uniform(low, high)))
            if rng.random() < 0.3:
                o.max_iters = int(rng.integers(1, 65))
            if rng.random() < 0.2:
                o.num_seeds = int(rng.integers(1, 5))
                o.random_seed = int(self.choice([0, -1, int(rng.integers(1, 2**62))]))
                if rng.random() < 0.5:
                    o.time_budget = float(rng.uniform(0.002, 0.05))
        req.publish = bool(rng.random() < 0.1)
        return req

    def valid_kind(self):
        return self.valid(), self.valid_codes

    def valid_large_batch(self):
        return self.valid(n_cand=int(self.rng.integers(100, 1001)), unreachable=0.05), self.valid_codes

    def pick_target(self, req):
        b = int(self.rng.integers(len(req.candidates)))
        k = int(self.rng.integers(len(req.candidates[b].targets)))
        return b, k, req.candidates[b].targets[k]

    def read_fields(self, t) -> list:
        T = self.T
        fields = ["position"]
        if t.mode != T.MODE_POSITION:
            fields.append("direction")
        if t.mode == T.MODE_FULL:
            fields.append("up")
        if t.local_axes == T.LOCAL_AXES_EXPLICIT:
            fields += ["local_direction", "local_up"]
        return fields

    def spoil(self, values):
        req = self.valid()
        _, _, t = self.pick_target(req)
        v = getattr(t, self.choice(self.read_fields(t)))
        setattr(v, self.choice("xyz"), float(self.choice(values)))
        return req

    def cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # ------------------------------------------------------------------ defects
    def empty_candidate(self):
        req = self.valid()
        req.candidates.insert(int(self.rng.integers(len(req.candidates) + 1)), self.C())
        return req, {self.R.INVALID_REQUEST}

    def non_finite_value(self):
        return self.spoil([math.nan, math.inf, -math.inf, -math.nan]), {self.R.INVALID_REQUEST}

    def extreme_finite_value(self):
        return (self.spoil([1e308, -1e308, 1.7976931348623157e308, 1e200, -1e150, 1e-308, 5e-324,
                            -5e-324]), self.anything)

    def zero_vector(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        fields = [f for f in self.read_fields(t) if f != "position"]
        if not fields:
            t.mode, fields = self.T.MODE_AXIS, ["direction"]
        set_vec(getattr(t, self.choice(fields)), (0.0, 0.0, 0.0))
        return req, {self.R.INVALID_REQUEST}

    def parallel_vectors(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        k = float(self.choice([1.0, -1.0, 3.5, -0.25, 1e-3]))
        if t.local_axes == self.T.LOCAL_AXES_EXPLICIT and self.rng.random() < 0.5:
            d = np.array([t.local_direction.x, t.local_direction.y, t.local_direction.z])
            set_vec(t.local_up, k * d)
        else:
            t.mode = self.T.MODE_FULL
            d = np.array([t.direction.x, t.direction.y, t.direction.z])
            if not np.all(np.isfinite(d)) or not np.any(d):
                d = self.random_unit()
                set_vec(t.direction, d)
            set_vec(t.up, k * d)
        return req, {self.R.INVALID_REQUEST}

    def far_position(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        p = np.array([t.position.x, t.position.y, t.position.z]) + 10 ** self.rng.uniform(2, 9) * self.random_unit()
        set_vec(t.position, p)
        # (only one target of one candidate moves away: the others may still succeed)
        return req, {*self.j.outcomes, self.R.NUMERICAL_FAILURE}

    def unknown_end_effector(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        long_name = self.cached("long_name", lambda: "x" * self.huge)
        t.end_effector = self.choice(["", "Left", "left ", " left", "middle", "left/right", "le\x00ft",
                                      "ležft", "\U0001F916", "right_hand_link", long_name,
                                      "".join(chr(int(c)) for c in self.rng.integers(33, 127, 12))])
        return req, {self.R.UNKNOWN_END_EFFECTOR}

    def multi(self, two_ees: bool):
        """A valid request with at least two candidates (and two end effectors if asked)."""
        while True:
            req = self.valid(n_cand=int(self.rng.integers(2, 6)))
            if not two_ees or len(req.candidates[0].targets) == 2:
                return req

    def ee_count_mismatch(self):
        req = self.multi(False)
        b = int(self.rng.integers(1, len(req.candidates)))
        targets = list(req.candidates[b].targets)
        if len(targets) == 2:
            targets.pop(int(self.rng.integers(2)))
        else:
            other = "right" if targets[0].end_effector == "left" else "left"
            extra = copy.deepcopy(targets[0])
            extra.end_effector = other
            targets.append(extra)
        req.candidates[b].targets = targets
        return req, {self.R.INVALID_REQUEST}

    def ee_order_mismatch(self):
        req = self.multi(True)
        b = int(self.rng.integers(1, len(req.candidates)))
        req.candidates[b].targets = list(reversed(req.candidates[b].targets))
        return req, {self.R.INVALID_REQUEST}

    def duplicate_end_effector(self):
        req = self.valid()
        b = int(self.rng.integers(len(req.candidates)))
        targets = list(req.candidates[b].targets)
        if len(targets) == 2 and self.rng.random() < 0.5:
            targets[1].end_effector = targets[0].end_effector
        else:
            targets.append(copy.deepcopy(targets[0]))
        req.candidates[b].targets = targets
        return req, {self.R.INVALID_REQUEST}

    def local_axes_mismatch(self):
        T = self.T
        req = self.multi(False)
        b = int(self.rng.integers(1, len(req.candidates)))
        t = req.candidates[b].targets[int(self.rng.integers(len(req.candidates[b].targets)))]
        old = t.local_axes
        t.local_axes = T.LOCAL_AXES_DEFAULT if old in (T.LOCAL_AXES_TCP, T.LOCAL_AXES_CONFIGURED,
                                                       T.LOCAL_AXES_EXPLICIT) else T.LOCAL_AXES_TCP
        return req, {self.R.INVALID_REQUEST}

    def too_many_candidates(self):
        req = self.valid(n_cand=1)
        req.candidates = req.candidates * int(self.rng.integers(1001, 3001))
        return req, {self.R.REQUEST_TOO_LARGE}

    def too_many_targets(self):
        req = self.valid(n_cand=1)
        targets = list(req.candidates[0].targets)
        req.candidates[0].targets = (targets * 60)[:int(self.rng.integers(9, 100))]
        return req, {self.R.REQUEST_TOO_LARGE}

    def huge_candidates(self):
        def build():
            req = self.valid(n_cand=1, unreachable=0.0)
            req.candidates = req.candidates * self.huge
            return req
        return self.cached("huge_candidates", build), {self.R.REQUEST_TOO_LARGE}

    def huge_empty_candidates(self):
        def build():
            req = self.Srv.Request()
            req.candidates = [self.C() for _ in range(self.huge)]
            return req
        return self.cached("huge_empty_candidates", build), {self.R.REQUEST_TOO_LARGE}

    def huge_targets(self):
        def build():
            req = self.valid(n_cand=1, unreachable=0.0)
            req.candidates[0].targets = list(req.candidates[0].targets[:1]) * self.huge
            return req
        return self.cached("huge_targets", build), {self.R.REQUEST_TOO_LARGE}

    def unknown_active_joint(self):
        req = self.valid()
        names = list(req.active_joints) or list(self.names[:3])
        names.insert(int(self.rng.integers(len(names) + 1)),
                     self.choice(["", "elbow", "left_elbow_joint ", "LEFT_ELBOW_JOINT", "left_hand_link",
                                  "base_link", "\U0001F916", "x" * 1000]))
        req.active_joints = names
        return req, {self.R.UNKNOWN_JOINT}

    def duplicate_active_joint(self):
        req = self.valid()
        names = list(req.active_joints) or list(self.names)
        names.append(self.choice(names))
        req.active_joints = names
        return req, {self.R.INVALID_REQUEST}

    def huge_active_joints(self):
        def build(unknown):
            req = self.valid(n_cand=1)
            req.active_joints = ([f"joint_{i}" for i in range(self.huge)] if unknown
                                 else [self.names[i % len(self.names)] for i in range(self.huge)])
            return req
        unknown = bool(self.rng.random() < 0.5)
        req = self.cached(f"huge_active_joints_{unknown}", lambda: build(unknown))
        return req, {self.R.UNKNOWN_JOINT if unknown else self.R.INVALID_REQUEST}

    def with_state(self, names, positions):
        req = self.valid()
        req.initial_state.name = list(names)
        req.initial_state.position = [float(v) for v in positions]
        return req

    def some_state(self):
        idx = self.rng.choice(len(self.names), size=int(self.rng.integers(1, 6)), replace=False)
        return [self.names[i] for i in idx], [float(self.j.state[i]) for i in idx]

    def initial_state_unknown_joint(self):
        names, values = self.some_state()
        names[int(self.rng.integers(len(names)))] = self.choice(["", "elbow", "left_hand_link", "nope",
                                                                  "torso_lift_joint "])
        return self.with_state(names, values), {self.R.UNKNOWN_JOINT}

    def initial_state_non_finite(self):
        names, values = self.some_state()
        values[int(self.rng.integers(len(values)))] = self.choice([math.nan, math.inf, -math.inf])
        return self.with_state(names, values), {self.R.INVALID_REQUEST}

    def initial_state_length_mismatch(self):
        names, values = self.some_state()
        req = self.with_state(names, values)
        if self.rng.random() < 0.5:
            req.initial_state.position = list(req.initial_state.position) + [0.0] * int(self.rng.integers(1, 4))
        else:
            req.initial_state.position = list(req.initial_state.position)[:-1]
        return req, {self.R.INVALID_REQUEST}

    def initial_state_duplicate(self):
        names, values = self.some_state()
        return self.with_state(names + names[:1], values + values[:1]), {self.R.INVALID_REQUEST}

    def initial_state_out_of_limits(self):
        i = int(self.choice(self.bounded))
        j = self.j
        beyond = float(self.choice([2e-3, 0.1, 1.0, 1e6, 1e30]))
        value = j.upper[i] + beyond if self.rng.random() < 0.5 else j.lower[i] - beyond
        return self.with_state([self.names[i]], [value]), {self.R.JOINT_STATE_OUT_OF_LIMITS}

    def initial_state_beyond_float32(self):
        """A joint (half the time a continuous one, which has no limits) at a finite value the
        solver's float32 state cannot hold."""
        i = int(self.choice(self.continuous if self.rng.random() < 0.5 else self.bounded))
        value = float(self.choice([1e39, -1e39, 1e308, -1.7976931348623157e308]))
        return self.with_state([self.names[i]], [value]), {self.R.INVALID_REQUEST}

    def huge_initial_state(self):
        kind = self.choice(["unknown", "duplicate", "mismatch"])

        def build():
            req = self.valid(n_cand=1)
            if kind == "unknown":
                req.initial_state.name = [f"joint_{i}" for i in range(self.huge)]
                req.initial_state.position = [0.0] * self.huge
            elif kind == "duplicate":
                req.initial_state.name = [self.names[i % len(self.names)] for i in range(self.huge)]
                req.initial_state.position = [float(self.j.state[i % len(self.names)]) for i in range(self.huge)]
            else:
                req.initial_state.name = list(self.names)
                req.initial_state.position = [0.0] * self.huge
            return req
        code = {"unknown": self.R.UNKNOWN_JOINT, "duplicate": self.R.INVALID_REQUEST,
                "mismatch": self.R.INVALID_REQUEST}[kind]
        return self.cached(f"huge_initial_state_{kind}", build), {code}

    def bad_frame_id(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        t.frame_id = self.choice(["nope", "/base_link", "base_link ", "BASE_LINK", "world", "map",
                                  "head_link", "left_hand_link", "torso_link", "\U0001F916", " ",
                                  "y" * 10000])
        return req, {self.R.INVALID_FRAME}

    def bad_mode(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        t.mode = int(self.rng.integers(3, 256))
        return req, {self.R.INVALID_REQUEST}

    def bad_local_axes(self):
        req = self.valid()
        _, _, t = self.pick_target(req)
        t.local_axes = int(self.rng.integers(4, 256))
        return req, {self.R.INVALID_REQUEST}

    FLOAT_OVERRIDES = ("position_tol", "frame_tol_rad", "max_position_error", "position_weight",
                       "rotation_weight", "damping", "max_step_norm", "time_budget")

    def bad_override(self):
        req = self.valid()
        # (-1 is "off" for time_budget, so -2: invalid for every field)
        setattr(req.overrides, self.choice(self.FLOAT_OVERRIDES),
                float(self.choice([-2.0, -1e-9, -1e308, math.nan, math.inf, -math.inf])))
        if self.rng.random() < 0.2:
            req.overrides.num_seeds = int(self.choice([-2, -1000, -2**31]))  # -1 = off, others invalid
        return req, {self.R.INVALID_REQUEST}

    def out_of_range_override(self):
        """Finite, positive, but beyond the range of the parameter of the same name."""
        req = self.valid()
        if self.rng.random() < 0.5:
            req.overrides.max_iters = int(self.choice([100_001, 10**7, 2**32 - 1]))
        else:
            req.overrides.num_seeds = int(self.rng.integers(1, 4))
            req.overrides.time_budget = float(self.choice([3600.5, 1e6, 1e308]))
        return req, {self.R.INVALID_REQUEST}

    def too_many_seeds(self):
        req = self.valid()
        req.overrides.num_seeds = int(self.choice([65, 1000, 10**6, 2**31 - 1]))  # an int32
        return req, {self.R.REQUEST_TOO_LARGE}

    def extreme_override(self):
        """Finite positive extremes: accepted; the solve must still be honest."""
        req = self.valid()
        field = self.choice(self.FLOAT_OVERRIDES[:-1])
        setattr(req.overrides, field, float(self.choice([5e-324, 1e-308, 1e-12, 1e12, 1e308])))
        return req, self.anything

    def make(self, kind):
        req, allowed = self.kinds[kind][1]()
        return req, set(allowed)


# ----------------------------------------------------------------------------- the run
def final_check(client, solve_client, judge: Judge, rng, timeout: float = 30.0) -> list:
    """A known valid request: both hands at FK of a nearby state; SUCCESS and FK on target."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.srv import SolveDirectionUpIK
    goal = near(judge.model, judge.state, rng, 0.3)
    tcp = judge.model.tcp_transforms(goal)
    req = SolveDirectionUpIK.Request()
    req.candidates = [DirectionUpCandidate(targets=[tcp_target(n, tcp[e]) for e, n in enumerate(judge.ee_names)])]
    response = client.call(solve_client, req, timeout=timeout)
    if response is None:
        return [f"final valid request: no response within {timeout} s"]
    if response.error_code != SolveDirectionUpIK.Response.SUCCESS:
        return [f"final valid request: error_code {response.error_code}: {response.message}"]
    problems = judge.check(req, response)
    q = np.array(response.results[0].joint_positions)
    reached = judge.fk(q)
    for e in range(len(judge.ee_names)):
        err = np.linalg.norm(reached[e, :3, 3] - tcp[e, :3, 3])
        if err >= judge.position_tol:
            problems.append(f"final valid request: end effector {e} {err} m off")
    return [f"final valid request: {p}" for p in problems]


def run(requests: int = 10_000, seed: int = 0, warmup: int = 200, rss_limit_mib: float = 50.0,
        max_seconds: float = 3600.0, target_fraction: float = 0.02, verbose: bool = False,
        allow_internal_error: bool = False, exclude: tuple = (), huge: int = HUGE,
        warmup_huge: int = WARMUP_HUGE, smoke: bool = False) -> dict:
    """One fuzz run; ``smoke``: the latency limit of the 10^5-entry requests is a note, not a
    violation, and a response is lost only after HANG_S (see the module's docstring)."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.srv import SolveDirectionUpIK
    from sensor_msgs.msg import JointState

    t_begin = time.monotonic()
    np.seterr(all="ignore")  # the requests and their re-checks overflow on purpose (1e308 ...)
    rng = np.random.default_rng(seed)
    judge = Judge()
    factory = Factory(judge, rng, huge)
    R = SolveDirectionUpIK.Response
    namespace = unique_namespace("fuzz")
    node = NodeProcess(namespace)
    client = None
    violations = []
    report = dict(requests_planned=requests, seed=seed, namespace=namespace, judge_fk=judge.fk_name,
                  huge_size=huge)
    timing_notes = [] if smoke else None
    request_timeout = HANG_S if smoke else REQUEST_TIMEOUT_S
    if smoke:
        report["smoke"] = True

    def violation(text):
        violations.append(text)
        if verbose or len(violations) <= 20:
            print("VIOLATION:", text, flush=True)

    def too_slow(text):
        """A timing limit missed: a violation, or with --smoke a note."""
        if timing_notes is None:
            violation(text)
        else:
            timing_notes.append(text)

    try:
        node.wait_ready()
        client = RosClient(f"fuzz_client_{namespace[1:]}")
        solve = client.node.create_client(SolveDirectionUpIK, f"{node.fqn}/solve")
        state_pub = client.node.create_publisher(JointState, f"{namespace}/joint_states", 10)
        target_pub = client.node.create_publisher(DirectionUpCandidate, f"{node.fqn}/target", 10)
        wait_for_joint_state(client, solve, state_pub, judge.joint_names, judge.state)
        startup_s = time.monotonic() - t_begin

        def settled_rss():
            """VmRSS after SETTLE small valid requests: rclpy frees a request's message objects
            only when the next request comes, so a 10^5-entry request (~150 MB of Python objects)
            just before a reading would count as growth; the peak is reported separately."""
            for _ in range(SETTLE):
                req = factory.valid(n_cand=1)
                response = client.call(solve, req, timeout=request_timeout)
                if response is None:
                    violation(f"settling request: no response within {request_timeout} s")
                    break
                for p in (judge.check(req, response) if response.error_code in judge.outcomes
                          else [f"settling request: {response.error_code}: {response.message}"]):
                    violation(p)
            return node.rss_kib()

        kinds = [k for k in factory.kinds if not any(k.startswith(x) for x in exclude)]
        weights = np.array([factory.kinds[k][0] for k in kinds], dtype=np.float64)
        # Warm-up: every kind once and the 10^5-entry kinds WARMUP_HUGE times more (shuffled),
        # then random kinds by weight. rclpy turns such a request into ~10^6 Python objects
        # before the node rejects it; the heap fragmentation they leave settles after a few
        # dozen of them (the node's Python-level allocations stay flat, tracemalloc shows),
        # so the warm-up takes that level in and the RSS growth check sees leaks, not it.
        plan = list(kinds) + [k for k in kinds if k.startswith("huge")] * warmup_huge
        rng.shuffle(plan)
        codes = collections.Counter()
        by_kind = collections.defaultdict(collections.Counter)
        latency = collections.defaultdict(list)
        rss_samples = [(0, node.rss_kib())]
        huge_send = []
        rss_start = None
        sent = 0
        t_loop = time.monotonic()
        for i in range(requests):
            if time.monotonic() - t_begin > max_seconds:
                violation(f"time limit of {max_seconds} s reached after {i} requests")
                break
            kind = plan[i] if i < len(plan) else kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
            req, allowed = factory.make(kind)
            if not kind.startswith("huge") and rng.random() < target_fraction and len(req.candidates):
                target_pub.publish(req.candidates[0])  # the streaming input gets the same junk
            t0 = time.monotonic()
            response = client.call(solve, req, timeout=request_timeout)
            dt = time.monotonic() - t0
            sent += 1
            latency[kind].append(dt)
            if kind.startswith("huge"):
                huge_send.append(client.last_send_s)
            if response is None:
                violation(f"#{i} {kind}: no response within {request_timeout} s "
                          f"(node alive: {node.alive()})")
                if not node.alive():
                    break
                continue
            code = response.error_code
            codes[code] += 1
            by_kind[kind][code] += 1
            where = f"#{i} {kind}"
            if code not in judge.codes:
                violation(f"{where}: error_code {code} is not a constant of the srv")
            elif code == R.INTERNAL_ERROR and not allow_internal_error:
                violation(f"{where}: INTERNAL_ERROR: {response.message[:300]}")
            elif code not in allowed:
                violation(f"{where}: error_code {judge.codes[code]} not in "
                          f"{sorted(judge.codes[c] for c in allowed)}: {response.message[:300]}")
            if not response.message.strip():
                violation(f"{where}: empty message (code {code})")
            if response.success != (code == R.SUCCESS):
                violation(f"{where}: success={response.success} with code {code}")
            if code in judge.outcomes:
                for p in judge.check(req, response):
                    violation(f"{where}: {p}")
            else:
                for p in judge.check_rejection(response):
                    violation(f"{where}: {p}")
            if kind.startswith("huge") and dt > SLOW_HUGE_S:
                too_slow(f"{where}: answered after {dt:.1f} s (limit {SLOW_HUGE_S} s)")
            if i + 1 == warmup:
                rss_start = settled_rss()
            if (i + 1) % 250 == 0 or i + 1 == requests:
                rss_samples.append((i + 1, node.rss_kib()))
                if not node.alive():
                    violation(f"the node exited (code {node.proc.returncode}) after {i + 1} requests")
                    break
                if verbose:
                    print(f"  {i + 1} requests, {sum(codes.values())} answered, RSS "
                          f"{rss_samples[-1][1]} KiB, {len(violations)} violations", flush=True)
        loop_s = time.monotonic() - t_loop
        if rss_start is None:
            rss_start = settled_rss()
        alive = node.alive()
        if not alive:
            violation(f"the node is not alive at the end (exit code {node.proc.returncode})")
        else:
            for p in final_check(client, solve, judge, rng, timeout=request_timeout if smoke else 30.0):
                violation(p)
        rss_end = settled_rss()
        growth_mib = (rss_end - rss_start) / 1024.0 if rss_end and rss_start else math.nan
        if not growth_mib < rss_limit_mib:
            violation(f"RSS grew by {growth_mib:.1f} MiB after the warm-up (limit {rss_limit_mib} MiB)")
        if node.tracebacks:
            violation(f"the node printed {node.tracebacks} traceback(s): {node.first_errors[:3]}")
        all_latency = [v for vs in latency.values() for v in vs]
        huge = [v for k, vs in latency.items() if k.startswith("huge") for v in vs]
        report.update(
            requests_sent=sent, answered=sum(codes.values()),
            codes={judge.codes.get(c, str(c)): n for c, n in sorted(codes.items())},
            by_kind={k: {judge.codes.get(c, str(c)): n for c, n in sorted(v.items())}
                     for k, v in sorted(by_kind.items())},
            latency_by_kind_ms={k: dict(n=len(v), p50=round(1e3 * percentile(v, 50), 2),
                                        max=round(1e3 * max(v), 1)) for k, v in sorted(latency.items())},
            startup_s=round(startup_s, 2), loop_s=round(loop_s, 2),
            requests_per_s=round(sent / loop_s, 1) if loop_s > 0 else None,
            latency_ms=dict(p50=round(1e3 * percentile(all_latency, 50), 2),
                            p99=round(1e3 * percentile(all_latency, 99), 2),
                            max=round(1e3 * max(all_latency, default=math.nan), 1)),
            huge_latency_ms=dict(count=len(huge), p50=round(1e3 * percentile(huge, 50), 1),
                                 max=round(1e3 * max(huge, default=math.nan), 1),
                                 client_serialisation_max=round(1e3 * max(huge_send, default=math.nan), 1)),
            rss_kib=dict(after_warmup=rss_start, end=rss_end, growth_mib=round(growth_mib, 2),
                         peak=node.peak_rss_kib(), samples=rss_samples),
            node_alive=alive, node_error_lines=node.error_lines, node_tracebacks=node.tracebacks,
        )
    except Exception as exc:  # noqa: BLE001 - reported as a violation with the node's output
        violation(f"driver error: {exc!r}")
        report["node_output_tail"] = node.output[-3000:]
    finally:
        if client is not None:
            client.close()
        close_report(report, node, t_begin, violations, timing_notes)
    return report


def print_report(report: dict) -> None:
    print(f"\nfuzz_node: {report.get('requests_sent', 0)} requests sent, {report.get('answered', 0)} answered "
          f"(seed {report['seed']}, judge FK: {report['judge_fk']})")
    print("responses per error code:")
    for code, n in report.get("codes", {}).items():
        print(f"  {code:<26} {n:>6}")
    if report.get("by_kind"):
        print("per kind of request:")
        print(f"  {'kind':<30} {'p50 ms':>8} {'max ms':>8}  codes")
        for kind, counts in report["by_kind"].items():
            lat = report["latency_by_kind_ms"][kind]
            print(f"  {kind:<30} {lat['p50']:>8} {lat['max']:>8}  " +
                  ", ".join(f"{c} {n}" for c, n in counts.items()))
    if "requests_per_s" in report:
        huge_size = report["huge_size"]
        lat, huge, rss = report["latency_ms"], report["huge_latency_ms"], report["rss_kib"]
        print(f"throughput: {report['requests_per_s']} requests/s over {report['loop_s']} s "
              f"(node start-up {report['startup_s']} s)")
        print(f"latency: p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms; {huge_size}-entry "
              f"requests: {huge['count']}, p50 {huge['p50']} ms, max {huge['max']} ms (of which the "
              f"client's serialisation up to {huge['client_serialisation_max']} ms)")
        print(f"node RSS: {rss['samples'][0][1]} KiB when ready, {rss['after_warmup']} KiB after warm-up, "
              f"{rss['end']} KiB at the end, growth "
              f"{rss['growth_mib']} MiB, peak (VmHWM) {rss['peak']} KiB")
    print_outcome(report)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=200, help="requests before the RSS baseline")
    parser.add_argument("--rss-limit-mib", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="abort (violation) after this")
    parser.add_argument("--target-fraction", type=float, default=0.02,
                        help="share of requests whose first candidate is also published on ~/target")
    parser.add_argument("--exclude", nargs="*", default=(), metavar="KIND",
                        help="leave out the kinds of request starting with these prefixes (e.g. huge)")
    parser.add_argument("--warmup-huge", type=int, default=WARMUP_HUGE,
                        help="extra requests of each huge kind in the warm-up")
    parser.add_argument("--huge-size", type=int, default=HUGE,
                        help="entries of the largest arrays (candidates, targets, joint names)")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help="CI check: only lost / wrong answers, crashes and leaks are violations; the "
                             "latency limit of the huge requests is reported as a note")
    args = parser.parse_args(argv)
    report = run(args.requests, args.seed, args.warmup, args.rss_limit_mib, args.max_seconds,
                 args.target_fraction, args.verbose, exclude=tuple(args.exclude),
                 huge=args.huge_size, warmup_huge=args.warmup_huge, smoke=args.smoke)
    return finish(report, args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())

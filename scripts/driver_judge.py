"""The drivers' independent check of SolveDirectionUpIK responses (``scripts/*_node.py``,
``benchmarks/bench_ros.py``).

:class:`Judge` re-checks a response against the request that produced it with an independent
forward kinematics (Pinocchio from the URDF when it is installed, else the project's model in
this process): joint limits, inactive joints, cost, best index, the reported errors and every
claimed success.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import numpy as np

from direction_up_ik.core.kinematics import mid_range, random_in_limits
from driver_common import CONFIG, ROBOT, vec


# ----------------------------------------------------------------------------- geometry
def unit(v) -> np.ndarray:
    """v / |v|, scaled first so that 1e308 or denormal components neither overflow nor vanish."""
    v = np.asarray(v, dtype=np.float64)
    v = v / np.max(np.abs(v))
    return v / np.linalg.norm(v)


def angle(a, b) -> float:
    """Angle (rad) between two non-zero vectors, robust near 0 and pi."""
    a, b = unit(a), unit(b)
    return float(math.atan2(np.linalg.norm(np.cross(a, b)), float(np.dot(a, b))))


def rotation_between(a, b) -> np.ndarray:
    """Smallest rotation taking unit(a) onto unit(b)."""
    a, b = unit(a), unit(b)
    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(np.dot(a, b))
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        perp = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(perp) < 1e-6:
            perp = np.cross(a, [0.0, 1.0, 0.0])
        k = unit(perp)
        return 2.0 * np.outer(k, k) - np.eye(3)  # rotation by pi about k
    k = axis / s
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * kx + (1.0 - c) * kx @ kx


def perpendicular_part(v, axis) -> np.ndarray:
    """The part of unit(v) perpendicular to ``axis`` (only directions matter here)."""
    axis, v = unit(axis), unit(v)
    return v - np.dot(v, axis) * axis


# ----------------------------------------------------------------------------- the judge
class PinocchioFK:
    """TCP poses (E, 4, 4) from Pinocchio's FK of the URDF, in the project's joint order."""

    def __init__(self, urdf_path: str, joint_names: Sequence[str], ee_links: Sequence[str],
                 tcp_xforms: Sequence[np.ndarray]) -> None:
        import pinocchio as pin
        self.pin = pin
        self.model = pin.buildModelFromUrdf(urdf_path)
        names = list(joint_names)
        self.columns = []
        for jid in range(1, self.model.njoints):
            name = self.model.names[jid]
            joint = self.model.joints[jid]
            if name not in names:
                raise RuntimeError(f"pinocchio joint '{name}' is not a coordinate of the model")
            self.columns.append((joint.idx_q, joint.nq, names.index(name)))
        self.frame_ids = []
        for link, tcp in zip(ee_links, tcp_xforms):
            parent = self.model.getFrameId(link)
            frame = self.model.frames[parent]
            placement = frame.placement * pin.SE3(np.array(tcp[:3, :3]), np.array(tcp[:3, 3]))
            self.frame_ids.append(self.model.addFrame(pin.Frame(
                f"judge_tcp_{link}", frame.parentJoint, parent, placement, pin.FrameType.OP_FRAME)))
        self.data = self.model.createData()

    def __call__(self, q: np.ndarray) -> np.ndarray:
        config = np.zeros(self.model.nq)
        for idx, nq, col in self.columns:
            if nq == 1:
                config[idx] = q[col]
            else:  # continuous joint: (cos, sin)
                config[idx], config[idx + 1] = math.cos(q[col]), math.sin(q[col])
        self.pin.framesForwardKinematics(self.model, self.data, config)
        out = np.zeros((len(self.frame_ids), 4, 4))
        for e, fid in enumerate(self.frame_ids):
            m = self.data.oMf[fid]
            out[e, :3, :3], out[e, :3, 3], out[e, 3, 3] = m.rotation, m.translation, 1.0
        return out


class Judge:
    """Independent re-check of SolveDirectionUpIK responses for ``dual_arm_torso`` as configured
    by ``config/dual_arm_torso.yaml`` (end effectors, TCP offsets, local axes, tolerances).

    ``state`` is the joint state the driver publishes on ``joint_states`` (the node's initial
    state when a request names none).
    """

    #: slack on top of the tolerances for the independent FK (Pinocchio vs the solver's own
    #: float64 FK differ by ~1e-15; this only absorbs rounding)
    SLACK = 1e-7

    def __init__(self, state: Optional[np.ndarray] = None) -> None:
        from direction_up_ik.core.rotations import make_transform, rpy_to_matrix
        from direction_up_ik.robots import bundled_robot, load_robot
        from direction_up_ik.srv import SolveDirectionUpIK

        from direction_up_ik.ros.parameter_files import parameter_file_values
        params = parameter_file_values(CONFIG)
        self.params = params
        self.model = load_robot(ROBOT)
        self.joint_names = list(self.model.joint_names)
        self.lower = np.asarray(self.model.lower_limits, dtype=np.float64)
        self.upper = np.asarray(self.model.upper_limits, dtype=np.float64)
        self.ee_names = list(params["end_effectors"])
        self.ee_links = [params[f"end_effector.{n}.link"] for n in self.ee_names]
        self.ee_axes = {n: params.get(f"end_effector.{n}.local_axes", "x_y") for n in self.ee_names}  # the default
        self.tcp = [make_transform(rpy_to_matrix(params[f"end_effector.{n}.tcp_rpy"]),
                                   params[f"end_effector.{n}.tcp_xyz"]) for n in self.ee_names]
        assert list(self.model.end_effector_links) == self.ee_links, "config and bundled robot differ"
        self.position_tol = float(params["solver.position_tol"])
        self.frame_tol = float(params["solver.frame_tol_rad"])
        self.frames = {"": np.eye(4), **self.model.static_link_xforms()}
        self.codes = {getattr(SolveDirectionUpIK.Response, k): k for k in dir(SolveDirectionUpIK.Response)
                      if k.isupper() and isinstance(getattr(SolveDirectionUpIK.Response, k), int)}
        self.Response = SolveDirectionUpIK.Response
        #: Codes of a solved request (results present): IN_COLLISION when no success but a
        #: candidate reached its targets only in collision (collision.enabled, issue 24).
        self.outcomes = (self.Response.SUCCESS, self.Response.NO_SOLUTION, self.Response.IN_COLLISION)
        self.state = mid_range(self.model) if state is None else np.asarray(state, dtype=np.float64)
        try:
            self.fk = PinocchioFK(str(bundled_robot(ROBOT).urdf_path()), self.joint_names, self.ee_links,
                                  self.tcp)
            self.fk_name = "pinocchio"
            rng = np.random.default_rng(0)
            for q in random_in_limits(self.model, rng, 5):  # the two FKs must agree before judging
                assert np.allclose(self.fk(q), self.model.tcp_transforms(q), atol=1e-9), "FK mismatch"
        except ImportError:
            self.fk = lambda q: self.model.tcp_transforms(np.asarray(q, dtype=np.float64))
            self.fk_name = "project model (pinocchio not installed)"

    # ------------------------------------------------------------------ request semantics
    def local_axes(self, msg) -> tuple:
        """(local direction, local up) of a target message (valid local_axes only)."""
        from direction_up_ik.msg import DirectionUpTarget as T
        mode = msg.local_axes
        if mode == T.LOCAL_AXES_CONFIGURED:
            mode = T.LOCAL_AXES_TCP if self.ee_axes[msg.end_effector] == "tcp" else T.LOCAL_AXES_DEFAULT
        if mode == T.LOCAL_AXES_DEFAULT:
            return np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
        if mode == T.LOCAL_AXES_TCP:
            return np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
        return vec(msg.local_direction), vec(msg.local_up)

    def initial_state(self, request) -> np.ndarray:
        """The state the node starts from: the published state, overridden, clamped onto limits."""
        q = self.state.copy()
        for name, value in zip(request.initial_state.name, request.initial_state.position):
            q[self.joint_names.index(name)] = value
        return np.clip(q, self.lower, self.upper)

    def tolerances(self, request) -> tuple:
        o = request.overrides
        return (o.position_tol if o.position_tol > 0 else self.position_tol,
                o.frame_tol_rad if o.frame_tol_rad > 0 else self.frame_tol)

    def target_errors(self, tcp: np.ndarray, msg) -> tuple:
        """(position, direction, up) errors of one target for TCP poses ``tcp`` (E, 4, 4);
        NaN where the target's mode leaves the quantity free."""
        from direction_up_ik.msg import DirectionUpTarget as T
        frame = self.frames[msg.frame_id]
        pose = tcp[self.ee_names.index(msg.end_effector)]
        position = frame[:3, :3] @ vec(msg.position) + frame[:3, 3]
        p_err = float(np.linalg.norm(pose[:3, 3] - position))
        if msg.mode == T.MODE_POSITION:
            return p_err, math.nan, math.nan
        local_d, local_u = self.local_axes(msg)
        d_target = frame[:3, :3] @ vec(msg.direction)
        d_tcp = pose[:3, :3] @ unit(local_d)
        d_err = angle(d_tcp, d_target)
        if msg.mode == T.MODE_AXIS:
            return p_err, d_err, math.nan
        # Up error: align the TCP's working axis with the target direction first (smallest
        # rotation), then compare the up axes' components perpendicular to the direction.
        u_tcp = rotation_between(d_tcp, d_target) @ (pose[:3, :3] @ perpendicular_part(local_u, local_d))
        u_target = perpendicular_part(frame[:3, :3] @ vec(msg.up), d_target)
        return p_err, d_err, angle(perpendicular_part(u_tcp, d_target), u_target)

    # ------------------------------------------------------------------ the check
    def check(self, request, response, check_errors: bool = True) -> List[str]:
        """Problems of a SUCCESS / NO_SOLUTION / IN_COLLISION response to ``request`` (empty list = fine)."""
        R = self.Response
        problems = []
        if list(response.joint_names) != self.joint_names:
            problems.append(f"joint_names {list(response.joint_names)[:4]}... differ from the model")
        if len(response.results) != len(request.candidates):
            return problems + [f"{len(response.results)} results for {len(request.candidates)} candidates"]
        q0 = self.initial_state(request)
        active = ([self.joint_names.index(n) for n in request.active_joints] if request.active_joints
                  else list(range(len(self.joint_names))))
        inactive = [i for i in range(len(self.joint_names)) if i not in set(active)]
        tol_p, tol_f = self.tolerances(request)
        # the node's float32 start, rounded towards the inside of the limits
        q0_32 = q0.astype(np.float32)
        q0_32 = np.where(q0_32.astype(np.float64) > self.upper, np.nextafter(q0_32, np.float32(-np.inf)),
                         np.where(q0_32.astype(np.float64) < self.lower,
                                  np.nextafter(q0_32, np.float32(np.inf)), q0_32)).astype(np.float64)
        costs, successes = [], []
        for b, (cand, res) in enumerate(zip(request.candidates, response.results)):
            where = f"results[{b}]"
            q = np.asarray(res.joint_positions, dtype=np.float64)
            if q.shape != (len(self.joint_names),) or not np.all(np.isfinite(q)):
                problems.append(f"{where}.joint_positions: shape {q.shape} / non-finite")
                continue
            if np.any(q < self.lower) or np.any(q > self.upper):
                i = int(np.flatnonzero((q < self.lower) | (q > self.upper))[0])
                problems.append(f"{where}: joint '{self.joint_names[i]}' = {q[i]!r} outside "
                                f"[{self.lower[i]}, {self.upper[i]}]")
            if inactive and np.max(np.abs(q[inactive] - q0_32[inactive])) > 1e-6:
                problems.append(f"{where}: an inactive joint moved")
            if len(res.errors) != len(cand.targets) or [e.end_effector for e in res.errors] != \
                    [t.end_effector for t in cand.targets]:
                problems.append(f"{where}.errors: names {[e.end_effector for e in res.errors]} do not "
                                f"match the targets")
                continue
            tcp = self.fk(q)
            met = True
            for k, (target, reported) in enumerate(zip(cand.targets, res.errors)):
                p, d, u = self.target_errors(tcp, target)
                met &= p < tol_p + self.SLACK and (math.isnan(d) or d < tol_f + self.SLACK) and \
                    (math.isnan(u) or u < tol_f + 1e-6)
                if not check_errors:
                    continue
                checks = [("position_error", p, reported.position_error, 1e-6),
                          ("direction_error", d, reported.direction_error, 1e-5)]
                if math.isnan(d) or d < math.pi - 1e-3:  # (aligning opposite axes is ambiguous)
                    checks.append(("up_error", u, reported.up_error, 1e-4))
                for label, mine, theirs, atol in checks:
                    if min(abs(mine), abs(theirs)) > 1e300:  # both overflow-sized: nothing to compare
                        continue
                    if math.isnan(mine) != math.isnan(theirs) or (not math.isnan(mine)
                                                                  and abs(mine - theirs) > atol):
                        problems.append(f"{where}.errors[{k}].{label}: reported {theirs!r}, independent "
                                        f"FK gives {mine!r}")
            if res.success and response.collisions_checked and not res.collision_free:
                problems.append(f"{where}: success reported in collision (clearance {res.clearance})")
            if res.success and not met:
                problems.append(f"{where}: success reported but the independent FK misses the targets "
                                f"(tolerances {tol_p} m / {tol_f} rad)")
            if res.success:
                cost = float(np.sum((q[active] - q0_32[active]) ** 2))
                if not math.isclose(res.cost, cost, rel_tol=1e-6, abs_tol=1e-9):
                    problems.append(f"{where}.cost {res.cost!r} != sum of squared active changes {cost!r}")
            elif res.cost != math.inf:
                problems.append(f"{where}.cost {res.cost!r} for a failed candidate (expected inf)")
            costs.append(res.cost if res.success else math.inf)
            successes.append(bool(res.success))
        any_success = any(successes)
        colliding = any(res.stop_reason == "in_collision" for res in response.results)
        if response.error_code != (R.SUCCESS if any_success else R.IN_COLLISION if colliding else R.NO_SOLUTION):
            problems.append(f"error_code {response.error_code} but {sum(successes)} successes")
        if response.success != any_success:
            problems.append(f"success flag {response.success} but {sum(successes)} successes")
        if any_success:
            best = response.best_index
            if not (0 <= best < len(costs)) or not successes[best] or costs[best] > min(costs) + 1e-12:
                problems.append(f"best_index {best} is not the least-cost success (costs {costs})")
        elif response.best_index != -1:
            problems.append(f"best_index {response.best_index} without a success")
        return problems

    def check_rejection(self, response) -> List[str]:
        """Problems of a rejected (error code other than SUCCESS / NO_SOLUTION / IN_COLLISION) response."""
        problems = []
        if response.success or response.best_index != -1 or len(response.results) != 0:
            problems.append(f"rejected response carries success={response.success}, best_index="
                            f"{response.best_index}, {len(response.results)} results")
        return problems

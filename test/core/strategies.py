"""Hypothesis strategies for the pure core: random robots (as URDF XML), targets, parameters.

Everything is built in code, nothing is read from disk:

* :func:`robot_descs` draws a :class:`RobotDesc`: a chain or a tree (1-3 branches, at most
  8 movable joints) of revolute, continuous, prismatic and fixed joints, sometimes with a
  mimic joint, and 1-3 end effectors with random link -> TCP transforms.
* :func:`scenarios` draws a whole solve request on such a robot: an in-limit start state,
  B candidates of E targets (reachable ones are FK of joint states that differ from the start
  only in active joints; unreachable ones sit 100 m away), and solver keywords.
* :func:`junk_requests` corrupts a valid request with garbage values (robustness tests).

Units: metres and radians throughout. Vectors are plain tuples of Python floats so that a
failing example prints readably and reproduces exactly.
"""

from __future__ import annotations

import fractions
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from direction_up_ik import DirectionUpTarget, RobotKinematics

# Profiles of the property tests (environment variable HYPOTHESIS_PROFILE): "ci" (the
# default, derandomised) and "fuzz" (scripts/fuzz_core.sh).
settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(  # 8 x 1500 + 3 x 1500 (test_properties) + 1500 (test_analytic_jacobian)
    "fuzz", max_examples=1500, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MOVABLE_TYPES = ("revolute", "continuous", "prismatic")
JOINT_TYPES = MOVABLE_TYPES + ("fixed",)
MAX_MOVABLE = 8
UNREACHABLE_DISTANCE = 100.0  # m; every random robot reaches far less than 20 m

# ----------------------------------------------------------------------------- basic draws

def floats(lo: float, hi: float) -> st.SearchStrategy:
    """Finite floats in [lo, hi]."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


UNIT = floats(0.0, 1.0)


def uniform(draw, lo: float, hi: float) -> float:
    """A float in [lo, hi] for bounds known only at draw time (shrinks towards lo).

    Scales one constant strategy instead of building ``floats(lo, hi)`` per draw, which
    would dominate the generation time.
    """
    return min(hi, lo + draw(UNIT) * (hi - lo))


@st.composite
def unit_vectors(draw) -> Tuple[float, float, float]:
    """A unit 3-vector: a signed coordinate axis or a random direction."""
    if draw(st.booleans()):
        axis = [0.0, 0.0, 0.0]
        axis[draw(st.integers(0, 2))] = draw(st.sampled_from((1.0, -1.0)))
        return tuple(axis)
    v = np.array(draw(_CUBE))
    n = np.linalg.norm(v)
    if n < 1e-3:  # degenerate draw: fall back to a fixed axis (keeps shrinking simple)
        return (0.0, 0.0, 1.0)
    return tuple(float(x) for x in v / n)


_CUBE = st.tuples(floats(-1, 1), floats(-1, 1), floats(-1, 1))
_ANGLE = st.one_of(floats(-2 * math.pi, 2 * math.pi),
                   st.sampled_from((0.0, math.pi / 2, -math.pi / 2, math.pi)))
_RPY = st.tuples(_ANGLE, _ANGLE, _ANGLE)
_XYZ = {b: st.tuples(floats(-b, b), floats(-b, b), floats(-b, b)) for b in (0.5, 1.0)}


def rpys() -> st.SearchStrategy:
    """URDF roll/pitch/yaw (rad): any angles, with gimbal-lock pitches and pi mixed in."""
    return _RPY


def xyzs(bound: float = 0.5) -> st.SearchStrategy:
    """Translations (m) with each component in [-bound, bound] (bound 0.5 or 1.0)."""
    return _XYZ[bound]


def transform(xyz, rpy) -> np.ndarray:
    """(4, 4) rigid transform from a translation (m) and URDF rpy (rad), via scipy."""
    t = np.eye(4)
    t[:3, :3] = Rotation.from_euler("xyz", rpy).as_matrix()  # extrinsic x, y, z == URDF rpy
    t[:3, 3] = xyz
    return t


@st.composite
def rigid_transforms(draw, bound: float = 0.5) -> np.ndarray:
    """(4, 4) random rigid transform, translation within +-bound m (0.5 or 1.0)."""
    return transform(draw(xyzs(bound)), draw(rpys()))


UNIT_VECTORS = unit_vectors()
RIGID_TRANSFORMS = {b: rigid_transforms(b) for b in (0.5, 1.0)}
#: root -> world transforms: None (default) or random, translation within 1 m.
ROOT_XFORMS = st.one_of(st.none(), RIGID_TRANSFORMS[1.0])


def draw_limits(draw, half_range: float) -> Tuple[float, float]:
    """(lower, upper), -half_range <= lower < upper <= half_range, upper - lower >= 1e-3;
    sometimes narrow (at most 0.05 wide)."""
    # At least 1e-3 wide (zero-width ranges: test_properties.test_limits_without_a_float32_value_snap_to_one).
    narrow = draw(st.integers(0, 3)) == 0  # 1 .. 50 mrad (mm) wide
    width = uniform(draw, 1e-3, 0.05 if narrow else 2 * half_range)
    lower = uniform(draw, -half_range, half_range - width)
    return lower, min(lower + width, half_range)


# ----------------------------------------------------------------------------- robots

@dataclass(frozen=True)
class JointDesc:
    """One URDF joint. lower/upper in rad or m (+-inf for continuous, 0 for fixed);
    mimic = (master joint name, multiplier, offset) or None."""

    name: str
    type: str
    parent: str
    child: str
    xyz: Tuple[float, float, float]
    rpy: Tuple[float, float, float]
    axis: Tuple[float, float, float]
    lower: float = 0.0
    upper: float = 0.0
    mimic: Optional[Tuple[str, float, float]] = None

    def xml(self) -> str:
        def vec(v):
            return " ".join(repr(float(x)) for x in v)
        out = (f"<joint name='{self.name}' type='{self.type}'><parent link='{self.parent}'/>"
               f"<child link='{self.child}'/><origin xyz='{vec(self.xyz)}' rpy='{vec(self.rpy)}'/>")
        if self.type != "fixed":
            out += f"<axis xyz='{vec(self.axis)}'/>"
        if self.type in ("revolute", "prismatic"):
            out += (f"<limit lower='{self.lower!r}' upper='{self.upper!r}' effort='1' "
                    "velocity='1'/>")
        if self.mimic is not None:
            out += (f"<mimic joint='{self.mimic[0]}' multiplier='{self.mimic[1]!r}' "
                    f"offset='{self.mimic[2]!r}'/>")
        return out + "</joint>"


@dataclass(frozen=True)
class RobotDesc:
    """A random robot: its joints, end-effector links and link -> TCP transforms (E, 4, 4)."""

    links: Tuple[str, ...]
    joints: Tuple[JointDesc, ...]
    ee_links: Tuple[str, ...]
    ee_local_xforms: Tuple[np.ndarray, ...] = field(repr=False)
    root_world_xform: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def urdf(self) -> str:
        return ("<robot name='random'>" + "".join(f"<link name='{n}'/>" for n in self.links)
                + "".join(j.xml() for j in self.joints) + "</robot>")

    @property
    def has_mimic(self) -> bool:
        return any(j.mimic is not None for j in self.joints)

    def build(self) -> RobotKinematics:
        return RobotKinematics.from_urdf(self.urdf, list(self.ee_links),
                                         [x.copy() for x in self.ee_local_xforms],
                                         root_world_xform=self.root_world_xform)

    def __repr__(self) -> str:  # everything needed to rebuild the robot by hand
        return (f"RobotDesc(urdf={self.urdf!r}, ee_links={self.ee_links!r}, "
                f"ee_local_xforms={[x.tolist() for x in self.ee_local_xforms]!r}, "
                f"root_world_xform="
                f"{None if self.root_world_xform is None else self.root_world_xform.tolist()!r})")


def draw_joint(draw, name: str, parent: str, child: str, jtype: str) -> JointDesc:
    """One joint of type ``jtype`` with random origin, axis and limits."""
    lower, upper = 0.0, 0.0
    if jtype == "revolute":
        lower, upper = draw_limits(draw, math.pi)
    elif jtype == "prismatic":
        lower, upper = draw_limits(draw, 0.5)
    elif jtype == "continuous":
        lower, upper = -math.inf, math.inf
    return JointDesc(name, jtype, parent, child, draw(xyzs()), draw(rpys()),
                     draw(UNIT_VECTORS), lower, upper)


@st.composite
def robot_descs(draw, max_movable: int = MAX_MOVABLE, mimic: bool = True) -> RobotDesc:
    """A random chain or tree with 1..``max_movable`` movable joints and 1-3 end effectors.

    Branch 0 starts at the root link ``L0``; every further branch starts at a random
    existing link. ``mimic=True`` lets one joint (rarely) mimic an earlier movable one.
    """
    links, joints, movable = ["L0"], [], 0
    for branch in range(draw(st.integers(1, 3))):
        parent = "L0" if branch == 0 else draw(st.sampled_from(links))
        for _ in range(draw(st.integers(1, 4))):
            types = JOINT_TYPES if movable < max_movable else ("fixed",)
            jtype = draw(st.sampled_from(types))
            child = f"L{len(links)}"
            joints.append(draw_joint(draw, f"j{len(joints)}", parent, child, jtype))
            links.append(child)
            movable += jtype != "fixed"
            parent = child
    if movable == 0:  # at least one joint coordinate
        k = draw(st.integers(0, len(joints) - 1))
        old = joints[k]
        joints[k] = draw_joint(draw, old.name, old.parent, old.child, "revolute")
    moving = [i for i, j in enumerate(joints) if j.type != "fixed"]
    if mimic and len(moving) >= 2 and draw(st.integers(0, 4)) == 0:
        slave = draw(st.sampled_from(moving[1:]))
        master = draw(st.sampled_from([i for i in moving if i < slave]))
        mim = (joints[master].name, draw(floats(-2, 2)), draw(floats(-0.5, 0.5)))
        joints[slave] = JointDesc(**{**joints[slave].__dict__, "mimic": mim})
    ees = draw(st.lists(st.sampled_from(links[1:]), min_size=1, max_size=min(3, len(links) - 1),
                        unique=True))
    local = tuple(draw(RIGID_TRANSFORMS[0.5]) for _ in ees)
    root = draw(ROOT_XFORMS)
    return RobotDesc(tuple(links), tuple(joints), tuple(ees), local, root)


# ----------------------------------------------------------------------------- targets

LOCAL_CONVENTIONS = ("omitted", "vectors", "none")


@dataclass(frozen=True)
class TargetSpec:
    """Raw inputs of one :class:`DirectionUpTarget` (as the caller would type them).

    ``local`` is "omitted" (+X/+Y), "vectors" (``local_direction``/``local_up``) or "none"
    (both None: +Z/+Y). ``direction``/``up`` None select the axis / position modes.
    """

    ee_id: int
    position: Tuple[float, float, float]
    direction: Optional[Tuple[float, float, float]]
    up: Optional[Tuple[float, float, float]]
    local: str
    local_direction: Optional[Tuple[float, float, float]] = None
    local_up: Optional[Tuple[float, float, float]] = None
    reachable: bool = True

    def build(self) -> DirectionUpTarget:
        args = (self.ee_id, self.position, self.direction, self.up)
        if self.local == "omitted":
            return DirectionUpTarget(*args)
        if self.local == "none":
            return DirectionUpTarget(*args, local_direction=None, local_up=None)
        return DirectionUpTarget(*args, local_direction=self.local_direction,
                                 local_up=self.local_up)

    def local_axes(self) -> Tuple[np.ndarray, np.ndarray]:
        """(3,), (3,): unit local Direction and the unit local Up made perpendicular to it."""
        if self.local == "omitted":
            return np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
        if self.local == "none":
            return np.array([0, 0, 1.0]), np.array([0, 1.0, 0])
        return perpendicular_pair(self.local_direction, self.local_up)


def perpendicular_pair(d, u) -> Tuple[np.ndarray, np.ndarray]:
    """Spec 5.1: unit ``d`` and unit ``u`` projected onto the plane perpendicular to ``d``."""
    d = np.asarray(d, dtype=float) / np.linalg.norm(d)
    u = np.asarray(u, dtype=float) / np.linalg.norm(u)
    u = u - (u @ d) * d
    return d, u / np.linalg.norm(u)


#: Positive length factors 1e-3 .. 1e3 (input lengths must not change a target).
_SCALES = floats(-3, 3).map(lambda e: 10.0 ** e)


@st.composite
def local_conventions(draw):
    """("omitted"|"none", None, None) or ("vectors", d, u) with d, u at least 1 degree apart."""
    kind = draw(st.sampled_from(LOCAL_CONVENTIONS))
    if kind != "vectors":
        return kind, None, None
    d = np.array(draw(UNIT_VECTORS)) * draw(_SCALES)
    u = np.array(draw(UNIT_VECTORS)) * draw(_SCALES)
    sine = np.linalg.norm(np.cross(d, u)) / (np.linalg.norm(d) * np.linalg.norm(u))
    if sine < 0.02:  # (anti-)parallel draw: use any perpendicular axis instead
        u = np.cross(d, [1.0, 0, 0] if abs(d[0]) < 0.9 * np.linalg.norm(d) else [0, 1.0, 0])
    return kind, tuple(float(x) for x in d), tuple(float(x) for x in u)


LOCAL_CONVENTIONS_ST = local_conventions()


def _tuple(v) -> Tuple[float, float, float]:
    return tuple(float(x) for x in v)


def draw_reachable(draw, tcp: np.ndarray, ee_id: int, local) -> TargetSpec:
    """Target met exactly by TCP world transform ``tcp`` (4, 4), random mode and lengths.

    Up is given with a random multiple of Direction added and a random length, so only its
    component perpendicular to Direction matches the TCP (spec 5.1 projects it).
    """
    kind, ld, lu = local
    probe = TargetSpec(ee_id, (0, 0, 0), None, None, kind, ld, lu)
    d_local, u_local = probe.local_axes()
    mode = draw(st.sampled_from(("full", "axis", "position")))
    direction = up = None
    if mode != "position":
        world_d = tcp[:3, :3] @ d_local
        direction = _tuple(world_d * draw(_SCALES))
        if mode == "full":
            world_u = tcp[:3, :3] @ u_local
            up = _tuple((world_u + draw(floats(-3, 3)) * world_d) * draw(_SCALES))
    return TargetSpec(ee_id, _tuple(tcp[:3, 3]), direction, up, kind, ld, lu, True)


def draw_unreachable(draw, ee_id: int, local) -> TargetSpec:
    """Target 100 m from the world origin (further than any random robot reaches)."""
    kind, ld, lu = local
    position = np.array(draw(UNIT_VECTORS)) * UNREACHABLE_DISTANCE
    mode = draw(st.sampled_from(("full", "axis", "position")))
    d = np.array(draw(UNIT_VECTORS))
    u = np.cross(d, draw(UNIT_VECTORS))
    if np.linalg.norm(u) < 1e-3:
        u = np.cross(d, [1.0, 0, 0] if abs(d[0]) < 0.9 else [0, 1.0, 0])
    direction = None if mode == "position" else _tuple(d)
    up = _tuple(u) if mode == "full" else None
    return TargetSpec(ee_id, _tuple(position), direction, up, kind, ld, lu, False)


def sample_limits(robot: RobotKinematics) -> Tuple[np.ndarray, np.ndarray]:
    """(D,), (D,) finite sampling bounds: the limits, +-pi for continuous joints."""
    return (np.where(np.isfinite(robot.lower_limits), robot.lower_limits, -math.pi),
            np.where(np.isfinite(robot.upper_limits), robot.upper_limits, math.pi))


def draw_start_state(draw, robot: RobotKinematics) -> np.ndarray:
    """(D,) float32 start state: each joint random, mid-range or at a limit.

    ``np.float32(limit)`` may lie one float32 step outside the float64 limit; the solver
    accepts that (problem._check_initial_state) and must not return it for active joints.
    """
    lo, hi = sample_limits(robot)
    q = np.empty(robot.num_dofs, dtype=np.float32)
    for i in range(robot.num_dofs):
        which = draw(st.integers(0, 5))
        q[i] = (lo[i] if which == 0 else hi[i] if which == 1 else
                0.5 * (lo[i] + hi[i]) if which == 2 else uniform(draw, lo[i], hi[i]))
    return q


def draw_active_dof_ids(draw, num_dofs: int):
    """None (all joints) or a unique subset (possibly empty) as tuple, list or int array."""
    if draw(st.booleans()):
        return None
    ids = draw(st.permutations(range(num_dofs)))[:draw(st.integers(0, num_dofs))]
    container = draw(st.sampled_from((tuple, list, lambda x: np.array(x, dtype=np.int64))))
    return container(ids)


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy:
    """Floats in [lo, hi], uniform in log10."""
    return floats(math.log10(lo), math.log10(hi)).map(lambda e: min(hi, 10.0 ** e))


#: Solver keywords within their valid ranges; an absent optional key = the spec default.
SOLVER_PARAMS = st.fixed_dictionaries(
    {"max_position_error": _log_uniform(1e-3, 1.0)},
    optional={"max_iters": st.integers(1, 40), "position_tol": _log_uniform(1e-4, 1e-1),
              "frame_tol_rad": _log_uniform(1e-4, 1e-1),
              "position_weight": _log_uniform(0.1, 10.0),
              "rotation_weight": _log_uniform(0.1, 10.0), "damping": _log_uniform(1e-6, 1e-1),
              "max_step_norm": _log_uniform(0.01, 2.0)})
_DELTA = floats(-0.3, 0.3)  # rad or m, goal offset of a "near" reachable candidate

# Public strategies of the draw helpers above.
start_states = st.composite(draw_start_state)  # (robot) -> (D,) float32
active_dof_id_sets = st.composite(draw_active_dof_ids)  # (num_dofs) -> None | subset
reachable_targets = st.composite(draw_reachable)  # (tcp (4, 4), ee_id, local) -> TargetSpec
unreachable_targets = st.composite(draw_unreachable)  # (ee_id, local) -> TargetSpec


@dataclass
class Scenario:
    """A valid solve request on a random robot.

    Attributes:
        desc: the robot description; robot: it built, ``joint_q`` set to ``start``.
        start: (D,) float32 joint state at call time.
        specs: B candidates x E raw targets (same EE order and local axes in every candidate).
        kwargs: solver keywords incl. ``active_dof_ids`` and ``root_world_xform``.
    """

    desc: RobotDesc
    robot: RobotKinematics = field(repr=False)
    start: np.ndarray
    specs: Tuple[Tuple[TargetSpec, ...], ...]
    kwargs: dict

    def candidates(self):
        return tuple(tuple(t.build() for t in cand) for cand in self.specs)

    @property
    def active(self) -> np.ndarray:
        """(A,) sorted active joint coordinate indices."""
        ids = self.kwargs.get("active_dof_ids")
        return np.arange(self.robot.num_dofs) if ids is None else np.sort(np.asarray(ids, int))

    @property
    def root(self) -> np.ndarray:
        """(4, 4) root -> world transform this solve uses."""
        root = self.kwargs.get("root_world_xform")
        return self.robot.root_world_xform if root is None else root

    def __repr__(self) -> str:
        kw = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.kwargs.items()}
        return (f"Scenario(desc={self.desc!r},\n start={self.start.tolist()!r},\n "
                f"specs={self.specs!r},\n kwargs={kw!r})")


@st.composite
def scenarios(draw, max_candidates: int = 4, mimic: bool = True,
              unreachable: bool = True) -> Scenario:
    """A random valid request: robot, start, B = 1..max_candidates candidates, keywords.

    Reachable candidates are FK of a goal state that differs from the start only in
    active joints (near the start or anywhere within the limits).
    """
    desc = draw(robot_descs(mimic=mimic))
    robot = desc.build()
    start = draw_start_state(draw, robot)
    robot.joint_q[:] = start
    kwargs = dict(draw(SOLVER_PARAMS))
    kwargs["active_dof_ids"] = draw_active_dof_ids(draw, robot.num_dofs)
    kwargs["root_world_xform"] = draw(ROOT_XFORMS)
    scenario = Scenario(desc, robot, start, (), kwargs)
    ee_ids = draw(st.permutations(range(robot.num_end_effectors)))
    ee_ids = ee_ids[:draw(st.integers(1, len(ee_ids)))]
    local = [draw(LOCAL_CONVENTIONS_ST) for _ in ee_ids]
    lo, hi = sample_limits(robot)
    active = scenario.active
    specs = []
    for _ in range(draw(st.integers(1, max_candidates))):
        if unreachable and draw(st.integers(0, 4)) == 0:
            specs.append(tuple(draw_unreachable(draw, e, loc) for e, loc in zip(ee_ids, local)))
            continue
        goal = start.astype(np.float64)
        near = draw(st.booleans())
        for j in active:
            goal[j] = (np.clip(goal[j] + draw(_DELTA), lo[j], hi[j]) if near
                       else uniform(draw, lo[j], hi[j]))
        tcp = robot.tcp_transforms(goal, scenario.kwargs["root_world_xform"])
        specs.append(tuple(draw_reachable(draw, tcp[e], e, loc) for e, loc in zip(ee_ids, local)))
    scenario.specs = tuple(specs)
    return scenario


# ----------------------------------------------------------------------------- junk inputs

#: Special floats: non-finite, extreme, subnormal, signed zero.
SPECIAL_FLOATS = (math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, 5e-324, -5e-324,
                  0.0, -0.0)


def junk_scalars() -> st.SearchStrategy:
    """Anything a caller might pass where one number is expected."""
    return st.one_of(
        st.sampled_from(SPECIAL_FLOATS), floats(-10, 10), st.integers(-3, 3),
        st.sampled_from((True, False, None, "1", "", 1j, complex(1, 0),
                         10 ** 400, -10 ** 400,  # beyond the float range
                         fractions.Fraction(1, 3), np.float32(0.5), np.float16(np.inf),
                         np.int64(2), np.bool_(True), np.complex128(1.0), b"1",
                         np.longdouble("1e4000"), [1.0], (), {}, {"x": 1}, [[1.0]])))


def junk_vectors() -> st.SearchStrategy:
    """Anything a caller might pass where a 3-vector is expected (incl. valid ones)."""
    num = st.one_of(st.sampled_from(SPECIAL_FLOATS), floats(-2, 2))
    return st.one_of(
        st.tuples(num, num, num),
        st.lists(junk_scalars(), min_size=0, max_size=5),
        st.sampled_from(((0.0, 0.0, 0.0), (0, 0, 0), (-0.0, 0.0, -0.0), (1e-308, 0, 0),
                         (5e-324, 5e-324, 0), (1e308, 1e308, 1e308), (-1e308, 1e308, 0))),
        st.sampled_from((None, "xyz", "abc", {"x": 1, "y": 2, "z": 3}, {0: 1.0, 1: 0, 2: 0},
                         1.0, True, 1j, [[1, 0, 0]], [[1], [0], [0]], [1, [0], 0],
                         np.zeros((3, 1)), np.ones((1, 3)), np.ones(2), np.ones(4),
                         np.array([1.0, 0, 0], dtype=np.float32), np.array([1, 0, 0], dtype=object),
                         np.array([1j, 0, 0]), np.array(["1", "0", "0"]),
                         np.array(1.0),  # 0-d array
                         range(3), (1.0, 0.0, 0.0, 0.0), frozenset((1.0, 2.0, 3.0)))))


def junk_parameters() -> st.SearchStrategy:
    """Bad values for the numeric solver keywords."""
    return st.one_of(junk_scalars(), st.sampled_from((0, 0.0, -1, -1e-3, math.nan, math.inf,
                                                      -math.inf, True, "0.1", 2.5)))


def junk_active_ids(num_dofs: int) -> st.SearchStrategy:
    """Bad (and a few valid) ``active_dof_ids``."""
    idx = st.one_of(st.integers(-3, num_dofs + 2), junk_scalars())
    return st.one_of(
        st.lists(idx, max_size=4).map(tuple), st.lists(st.integers(0, max(0, num_dofs - 1)),
                                                       min_size=2, max_size=4),
        st.sampled_from(((num_dofs,), (-1,), (0, num_dofs), [-num_dofs - 1], range(num_dofs + 1))),
        st.sampled_from((
            "01", b"\x00", 0, 1.5, True, {0: 1}, {"a": 1}, [[0]], [0.0], [np.float64(0)],
            np.array(0),  # 0-d array
            np.array([0.0]), np.array([[0]]), np.array([True]), [10 ** 400],
            [np.uint64(2 ** 63)], [-10 ** 400], (0, 0), [None])))


def junk_transforms() -> st.SearchStrategy:
    """Bad (and a few valid) ``root_world_xform`` values."""
    bad = np.eye(4)
    return st.one_of(
        st.sampled_from((
            "eye", 1.0, {}, [[1, 0], [0, 1]], np.ones((3, 3)), np.eye(3), np.eye(5),
            np.diag([1.0, 1, -1, 1]), np.full((4, 4), np.nan), np.eye(4) * 2, [np.eye(4)],
            [[1, 0, 0, 0]] * 3 + [[0, 0, 0, 1, 0]],
            np.eye(4) * (1 + 1j),  # complex
            np.eye(4).astype(object), np.eye(4).tolist(), np.array(["1"] * 16).reshape(4, 4))),
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(SPECIAL_FLOATS)
                  ).map(lambda a: _with_entry(bad, *a)))


def _with_entry(x: np.ndarray, i: int, j: int, value: float) -> np.ndarray:
    out = x.copy()
    out[i, j] = value
    return out


STRUCTURE_JUNK = ("none", "empty", "empty_inner", "duplicate_ee", "fewer_ees", "reversed_ees",
                  "other_local_axes", "junk_target", "as_str", "as_dict", "as_set", "as_generator",
                  "as_array", "flat", "triple_nested", "none_inner")


def corrupt_structure(cands: list, how: str):
    """Apply structure corruption ``how`` (one of STRUCTURE_JUNK) to built candidates.

    ``cands`` is a list of B >= 1 lists of E >= 1 DirectionUpTarget (all valid).
    """
    first = cands[0]
    if how == "none":
        return [tuple(c) for c in cands]
    if how == "empty":
        return []
    if how == "empty_inner":
        return [tuple(c) for c in cands] + [()]
    if how == "duplicate_ee":
        return [tuple(first) + (first[0],)] + [tuple(c) for c in cands[1:]]
    if how == "fewer_ees":
        return [tuple(c) for c in cands] + [tuple(first) + (first[0],) if len(first) == 1
                                            else tuple(first[:-1])]
    if how == "reversed_ees":
        return [tuple(c) for c in cands] + [tuple(reversed(first)) + (first[0],)
                                            if len(first) == 1 else tuple(reversed(first))]
    if how == "other_local_axes":
        t = first[0]
        local = {} if t.uses_tcp_convention else dict(local_direction=None, local_up=None)
        other = DirectionUpTarget(t.ee_id, t.position_world, t.direction_world, t.up_world,
                                  **local)
        return [tuple(c) for c in cands] + [(other,) + tuple(first[1:])]
    if how == "junk_target":
        return [tuple(first[:-1]) + ("target",)] + [tuple(c) for c in cands[1:]]
    if how == "as_str":
        return "((t,),)"
    if how == "as_dict":
        return {i: tuple(c) for i, c in enumerate(cands)}
    if how == "as_set":
        return {tuple(c) for c in cands}
    if how == "as_generator":
        return (tuple(c) for c in cands)
    if how == "as_array":
        out = np.empty(len(cands), dtype=object)
        out[:] = [tuple(c) for c in cands]
        return out
    if how == "flat":
        return tuple(first)
    if how == "triple_nested":
        return [[tuple(c)] for c in cands]
    if how == "none_inner":
        return [tuple(c) for c in cands] + [None]
    raise AssertionError(how)


@dataclass
class JunkRequest:
    """A request with 1-3 corruptions (it may also come out valid).

    Attributes:
        robot: a RobotKinematics (its joint_q possibly corrupted) or a junk object.
        target_calls: B lists of E ``(args, kwargs)`` for DirectionUpTarget.
        structure: how to corrupt the candidate container (see :func:`corrupt_structure`).
        kwargs: solver keywords (``robot`` and ``candidates`` excluded).
        corruptions: names of the applied corruptions (for statistics / reading failures).
    """

    robot: object = field(repr=False)
    robot_repr: str
    target_calls: list
    structure: str
    kwargs: dict
    corruptions: Tuple[str, ...]

    def candidates(self):
        """Build the targets (may raise) and the possibly corrupted container."""
        built = [[DirectionUpTarget(*a, **k) for a, k in cand] for cand in self.target_calls]
        return corrupt_structure(built, self.structure)


JUNK_KINDS = ("target_field", "pair", "local_one_none", "structure", "param", "active", "device",
              "root", "joint_q", "robot", "overflow")
TARGET_FIELDS = ("ee_id", "position_world", "direction_world", "up_world", "local_direction",
                 "local_up")
PARAM_NAMES = ("max_position_error", "max_iters", "position_tol", "frame_tol_rad",
               "position_weight", "rotation_weight", "damping", "max_step_norm")


@st.composite
def junk_requests(draw) -> JunkRequest:
    """A valid :func:`scenarios` request with 1-3 kinds of garbage mixed in."""
    sc = draw(scenarios(max_candidates=3))
    robot, kwargs = sc.robot, dict(sc.kwargs)
    calls = []
    for cand in sc.specs:
        row = []
        for t in cand:
            kw = {}
            if t.local == "vectors":
                kw = dict(local_direction=t.local_direction, local_up=t.local_up)
            elif t.local == "none":
                kw = dict(local_direction=None, local_up=None)
            row.append(([t.ee_id, t.position, t.direction, t.up], kw))
        calls.append(row)
    structure = "none"
    count = draw(st.sampled_from((1, 1, 1, 2, 3)))  # mostly one: reach every check alone
    kinds = tuple(draw(st.lists(st.sampled_from(JUNK_KINDS), min_size=count, max_size=count,
                                unique=True)))
    for kind in kinds:
        b = draw(st.integers(0, len(calls) - 1))
        e = draw(st.integers(0, len(calls[b]) - 1))
        args, kw = calls[b][e]
        if kind == "target_field":
            name = draw(st.sampled_from(TARGET_FIELDS))
            value = draw(junk_scalars() if name == "ee_id" else junk_vectors())
            if name in ("local_direction", "local_up"):
                kw.setdefault("local_direction", (1.0, 0.0, 0.0))
                kw.setdefault("local_up", (0.0, 1.0, 0.0))
                kw[name] = value
            else:
                args[TARGET_FIELDS.index(name)] = value
        elif kind == "pair":  # (anti-)parallel or zero Direction/Up, world or local
            k = draw(st.sampled_from((1.0, -1.0, 1e-300, -1e300, 0.0, 3.0)))
            base = draw(st.one_of(unit_vectors(), junk_vectors()))
            pair = (base, _scaled(base, k))
            if draw(st.booleans()):
                args[2], args[3] = pair
            else:
                kw["local_direction"], kw["local_up"] = pair
        elif kind == "local_one_none":
            kw[draw(st.sampled_from(("local_direction", "local_up")))] = None
        elif kind == "structure":
            structure = draw(st.sampled_from(STRUCTURE_JUNK))
        elif kind == "param":
            name = draw(st.sampled_from(PARAM_NAMES))
            kwargs[name] = draw(junk_parameters())
        elif kind == "active":
            kwargs["active_dof_ids"] = draw(junk_active_ids(sc.robot.num_dofs))
        elif kind == "device":
            kwargs["device"] = draw(st.one_of(junk_scalars(), st.sampled_from(
                ("cuda", "CPU", "cpu:0", " cpu", "gpu", "cpu\x00"))))
        elif kind == "root":
            kwargs["root_world_xform"] = draw(junk_transforms())
        elif kind == "joint_q":
            j = draw(st.integers(0, sc.robot.num_dofs - 1))
            lo, hi = sc.robot.lower_limits[j], sc.robot.upper_limits[j]
            value = draw(st.sampled_from((np.nan, np.inf, -np.inf, lo - 1.0, hi + 1.0, 3e38)))
            sc.robot.joint_q[j] = value
        elif kind == "overflow":  # valid but huge: the solve overflows (NumericalFailure)
            root = np.eye(4)
            root[draw(st.integers(0, 2)), 3] = draw(st.sampled_from((1e308, -1e308, 1e300)))
            kwargs["root_world_xform"] = root
            kwargs["position_weight"] = draw(st.sampled_from((1.0, 10.0, 1e10)))
        elif kind == "robot":
            robot = draw(st.sampled_from((None, "robot", sc.desc.urdf, 1.0, {}, [robot])))
    return JunkRequest(robot, repr(sc.desc), calls, structure, kwargs, kinds)


def _scaled(v, k):
    """``k * v`` for a numeric 3-sequence; ``v`` itself when it is not one."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. ComplexWarning of float(np.complex128)
            return tuple(float(x) * k for x in v)
    except Exception:  # junk vector: keep it, the pair is junk anyway
        return v

"""Robot model: URDF tree, tool-centre-point frames and batched forward kinematics.

The model is built once (:meth:`RobotKinematics.from_urdf`) and read-only
afterwards, apart from the joint state ``joint_q`` and the FK cache that
:meth:`RobotKinematics.update_fk` fills. Everything the solver needs per call is
precomputed here: the movable joints in tree order with the fixed transforms
between them, their axes, and the path of every end effector.

Frames: ``root_world_xform`` maps the root link frame to the world frame;
``end_effector_local_xforms[e]`` maps the TCP frame of end effector ``e`` into
its link frame (``TCP world = link world @ link_to_tcp``, spec section 1.1).
Units: metres and radians (REP 103).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .errors import InputValidationError, RobotModelError
from .rotations import make_transform, rpy_to_matrix, skew, validate_transform
from .urdf_loader import UrdfKinematics, parse_urdf
from .xacro_files import is_xacro_path, xacro_to_urdf

_REVOLUTE = 0
_PRISMATIC = 1
#: ``KernelArrays.node_type`` of a revolute (or continuous) joint.
NODE_REVOLUTE = _REVOLUTE


def mid_range(robot: "RobotKinematics") -> np.ndarray:
    """(D,) middle of each joint's limits (rad / m); 0 for continuous joints."""
    lo, hi = robot.lower_limits, robot.upper_limits
    bounded = np.isfinite(lo) & np.isfinite(hi)
    return np.where(bounded, 0.5 * (np.where(bounded, lo, 0.0) + np.where(bounded, hi, 0.0)), 0.0)


def random_in_limits(robot: "RobotKinematics", rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, D) joint states uniform in the limits; continuous joints uniform in [-pi, pi]."""
    lo = np.where(np.isfinite(robot.lower_limits), robot.lower_limits, -np.pi)
    hi = np.where(np.isfinite(robot.upper_limits), robot.upper_limits, np.pi)
    return rng.uniform(lo, hi, size=(n, robot.num_dofs))


def _model_error(field: str, rule: str) -> RobotModelError:
    return RobotModelError(f"{field}: {rule}")


class KernelArrays(NamedTuple):
    """Read-only, C-contiguous copies of a model's precomputed tree arrays.

    K nodes (movable joints, mimic ones included, parents before children),
    E end effectors, D joint coordinates; metres and radians. What
    :meth:`RobotKinematics._node_frames` and
    :meth:`RobotKinematics.joint_perturbed_tcp_poses` compute from, for compiled
    kernels (:mod:`direction_up_ik.core.compiled`).

    Attributes:
        node_parent: (K,) int64 parent node, -1 = the root link.
        node_dof: (K,) int64 coordinate that drives the node.
        node_scale, node_offset: (K,) float64, joint value = scale * q[dof] + offset.
        node_type: (K,) int64, 0 revolute (continuous included), 1 prismatic.
        node_rot: (K, 3, 3) R_o, rotation of the joint origin in the parent frame.
        node_pos: (K, 3) p_o, position of the joint origin in the parent frame.
        node_rot_cross: (K, 3, 3) R_o [a]x; node_rot_outer: (K, 3, 3) R_o a a^T.
        node_axis_parent: (K, 3) R_o a; node_axis_local: (K, 3) a (joint frame).
        ee_node: (E,) int64 node carrying each end effector's link, -1 = root.
        ee_fixed: (E, 4, 4) node frame -> TCP transform.
        ee_chain_nodes: (C,) int64 ancestors of every EE node, in tree order.
        dof_node: (D,) int64 the one node a coordinate drives on a TCP chain
            (-1: none, or a mimic joint sits on a TCP chain).
        dof_moves_tcp: (D, E) bool, coordinate d moves TCP e.
        mimic_on_tcp_chain: True when a mimic (scaled/offset) joint sits on a TCP
            chain; then perturbed poses need full FK.
    """

    node_parent: np.ndarray
    node_dof: np.ndarray
    node_scale: np.ndarray
    node_offset: np.ndarray
    node_type: np.ndarray
    node_rot: np.ndarray
    node_pos: np.ndarray
    node_rot_cross: np.ndarray
    node_rot_outer: np.ndarray
    node_axis_parent: np.ndarray
    node_axis_local: np.ndarray
    ee_node: np.ndarray
    ee_fixed: np.ndarray
    ee_chain_nodes: np.ndarray
    dof_node: np.ndarray
    dof_moves_tcp: np.ndarray
    mimic_on_tcp_chain: bool


class RobotKinematics:
    """Kinematic model of one robot with E end effectors (TCPs) and D joint coordinates.

    Attributes:
        joint_names: names of the D coordinates, the order of ``joint_q``
            (movable, non-mimic joints of the sub-tree, URDF document order).
        joint_q: (D,) float32 current joint state, radians or metres; writable in
            place (assigning a new array copies into it).
        lower_limits, upper_limits: (D,) float64 limits (safety-controller
            narrowed); -inf/+inf for continuous joints.
        end_effector_links: (E,) link names; ``ee_id`` is the index.
        end_effector_local_xforms: (E, 4, 4) link -> TCP transforms.
        root_link: name of the FK root link; root_world_xform: (4, 4) root -> world.
        link_names: every link of the sub-tree below ``root_link``.
        mimic_joints: ``{name: (master, multiplier, offset)}``; mimic joints follow
            ``multiplier * q_master + offset`` and are not coordinates.
    """

    # ------------------------------------------------------------------ build
    def __init__(self, description: UrdfKinematics, end_effector_links: Sequence[str],
                 end_effector_local_xforms=None, root_link: Optional[str] = None,
                 root_world_xform=None) -> None:
        self.robot_name = description.robot_name
        self._build_tree(description, root_link)
        self._build_end_effectors(end_effector_links, end_effector_local_xforms)
        self.root_world_xform = validate_transform(
            np.eye(4) if root_world_xform is None else root_world_xform,
            "root_world_xform", error=_model_error)
        self._joint_q = np.zeros(self.num_dofs, dtype=np.float32)
        # Start at the limit-clipped zero pose, like most robot_state publishers.
        self._joint_q[:] = np.clip(0.0, self.lower_limits, self.upper_limits)
        self.update_fk()

    @classmethod
    def from_urdf(cls, urdf, end_effector_links: Sequence[str],
                  end_effector_local_xforms=None, root_link: Optional[str] = None,
                  root_world_xform=None, xacro_args=None) -> "RobotKinematics":
        """Build a model from a URDF file path or XML string, or a xacro file.

        Args:
            urdf: path to a ``.urdf`` file, or the XML text itself (told apart by content:
                text starting with '<' after a byte-order mark or whitespace is XML), or
                path to a ``.xacro`` file, expanded first (``core.xacro_files``).
            end_effector_links: link names; end effector ``ee_id`` is the index.
            end_effector_local_xforms: one (4, 4) link -> TCP transform per end
                effector (metres); default identity.
            root_link: FK root; default the URDF's single root. Choosing an inner
                link restricts the model to its sub-tree.
            root_world_xform: (4, 4) root link -> world; default identity.
            xacro_args: arguments of a ``.xacro`` file, ``{name: value}`` or
                ``["name:=value", ...]``; only with a xacro path.
        Raises:
            RobotModelError: malformed URDF, unknown links, invalid transforms, a xacro error
                (naming the file and xacro's message).
            InputValidationError: ``xacro_args`` malformed, or given without a xacro path.
        """
        if is_xacro_path(urdf):
            urdf = xacro_to_urdf(urdf, xacro_args)
        elif xacro_args:
            raise InputValidationError("xacro_args", "only applies to a .xacro file; urdf is not one")
        return cls(parse_urdf(urdf), end_effector_links, end_effector_local_xforms,
                   root_link, root_world_xform)

    def _build_tree(self, description: UrdfKinematics, root_link: Optional[str]) -> None:
        children: Dict[str, list] = {}
        parent_of: Dict[str, str] = {}
        for joint in description.joints:
            if joint.child in parent_of:
                raise RobotModelError(
                    f"urdf: link '{joint.child}' is the child of two joints "
                    f"('{parent_of[joint.child]}' and '{joint.name}'); a URDF must be a tree")
            parent_of[joint.child] = joint.name
            children.setdefault(joint.parent, []).append(joint)
        if root_link is None:
            roots = [link for link in description.links if link not in parent_of]
            if len(roots) != 1:
                raise RobotModelError(
                    f"urdf: expected exactly one root link, found {roots or 'none (a cycle)'}; "
                    "pass root_link to choose one")
            root_link = roots[0]
        elif root_link not in description.links:
            raise RobotModelError(
                f"root_link: unknown link '{root_link}'; links: {_preview(description.links)}")
        self.root_link = root_link

        # Depth-first walk: every node (movable joint) comes after its parent node.
        node_parent: List[int] = []
        node_origin: List[np.ndarray] = []
        node_joint: List = []
        link_frame: Dict[str, Tuple[int, np.ndarray]] = {root_link: (-1, np.eye(4))}
        stack = [root_link]
        while stack:
            link = stack.pop()
            node, link_from_node = link_frame[link]
            for joint in reversed(children.get(link, [])):
                origin = link_from_node @ make_transform(rpy_to_matrix(joint.origin_rpy),
                                                         joint.origin_xyz)
                if joint.child in link_frame:
                    raise RobotModelError(f"urdf: the kinematic graph has a cycle at '{joint.child}'")
                if joint.type == "fixed":
                    link_frame[joint.child] = (node, origin)
                else:
                    node_parent.append(node)
                    node_origin.append(origin)
                    node_joint.append(joint)
                    link_frame[joint.child] = (len(node_joint) - 1, np.eye(4))
                stack.append(joint.child)
        self.link_names = tuple(l for l in description.links if l in link_frame)
        self._link_frame = link_frame

        by_name = {j.name: j for j in node_joint}
        order = {j.name: i for i, j in enumerate(description.joints)}
        dof_joints = sorted((j for j in node_joint if j.mimic is None), key=lambda j: order[j.name])
        self.joint_names = tuple(j.name for j in dof_joints)
        self._dof_index = {name: i for i, name in enumerate(self.joint_names)}
        self.lower_limits = np.array([j.lower for j in dof_joints], dtype=np.float64)
        self.upper_limits = np.array([j.upper for j in dof_joints], dtype=np.float64)
        # joint_q is float32: a range that holds no float32 value (a locked joint at, say,
        # 0.1) becomes that float32 value, or no returned state could be within the limits.
        for i in range(len(dof_joints)):
            lo, hi = self.lower_limits[i], self.upper_limits[i]
            inner = np.nextafter(np.float32(lo), np.float32(np.inf)) if np.float32(lo) < lo \
                else np.float32(lo)
            if np.isfinite(lo) and np.isfinite(hi) and float(inner) > hi:
                self.lower_limits[i] = self.upper_limits[i] = float(np.float32(0.5 * (lo + hi)))
        self.lower_limits.setflags(write=False)
        self.upper_limits.setflags(write=False)

        self.mimic_joints = {}
        k = len(node_joint)
        self._node_parent = np.array(node_parent, dtype=np.int64)
        self._node_dof = np.zeros(k, dtype=np.int64)
        self._node_scale = np.ones(k)
        self._node_offset = np.zeros(k)
        self._node_type = np.zeros(k, dtype=np.int64)
        self._node_rot = np.zeros((k, 3, 3))      # R_o
        self._node_pos = np.zeros((k, 3))         # p_o
        self._node_rot_cross = np.zeros((k, 3, 3))  # R_o [a]x
        self._node_rot_outer = np.zeros((k, 3, 3))  # R_o a a^T
        self._node_axis_parent = np.zeros((k, 3))   # R_o a
        self._node_axis_local = np.zeros((k, 3))    # a, in the moved joint frame
        for i, joint in enumerate(node_joint):
            dof, scale, offset = self._resolve_mimic(joint, by_name)
            self._node_dof[i], self._node_scale[i], self._node_offset[i] = dof, scale, offset
            if joint.mimic is not None:
                self.mimic_joints[joint.name] = joint.mimic
            a = np.array(joint.axis)
            r_o = node_origin[i][:3, :3]
            self._node_type[i] = _PRISMATIC if joint.type == "prismatic" else _REVOLUTE
            self._node_rot[i] = r_o
            self._node_pos[i] = node_origin[i][:3, 3]
            self._node_rot_cross[i] = r_o @ skew(a)
            self._node_rot_outer[i] = r_o @ np.outer(a, a)
            self._node_axis_parent[i] = r_o @ a
            self._node_axis_local[i] = a
        self._node_joint_names = tuple(j.name for j in node_joint)
        for array in (self._node_rot, self._node_pos, self._node_rot_cross,
                      self._node_rot_outer, self._node_axis_parent):
            array.setflags(write=False)

    def _resolve_mimic(self, joint, by_name) -> Tuple[int, float, float]:
        scale, offset, seen = 1.0, 0.0, {joint.name}
        while joint.mimic is not None:
            master, multiplier, mimic_offset = joint.mimic
            if master not in by_name:
                raise RobotModelError(
                    f"urdf: joint '{joint.name}' mimics '{master}', which is not a movable "
                    "joint of this (sub-)tree")
            if master in seen:
                raise RobotModelError(f"urdf: mimic joints form a cycle through '{master}'")
            seen.add(master)
            # q_joint = multiplier * q_master + mimic_offset, composed along the chain.
            offset = scale * mimic_offset + offset
            scale = scale * multiplier
            joint = by_name[master]
        return self._dof_index[joint.name], scale, offset

    def _build_end_effectors(self, links: Sequence[str], local_xforms) -> None:
        if isinstance(links, str) or not isinstance(links, Sequence):
            raise RobotModelError("end_effector_links: expected a sequence of link names")
        if len(links) == 0:
            raise RobotModelError("end_effector_links: at least one end effector is required")
        for i, link in enumerate(links):
            if link not in self._link_frame:
                raise RobotModelError(
                    f"end_effector_links[{i}]: unknown link '{link}' (below root "
                    f"'{self.root_link}'); links: {_preview(self.link_names)}")
        if len(set(links)) != len(links):
            raise RobotModelError("end_effector_links: each link may appear only once")
        if local_xforms is None:
            local_xforms = [np.eye(4)] * len(links)
        if len(local_xforms) != len(links):
            raise RobotModelError(
                f"end_effector_local_xforms: expected {len(links)} transforms (one per "
                f"end effector), got {len(local_xforms)}")
        tcp = np.stack([validate_transform(x, f"end_effector_local_xforms[{i}]",
                                           error=_model_error)
                        for i, x in enumerate(local_xforms)])
        tcp.setflags(write=False)
        self.end_effector_links = tuple(links)
        self.end_effector_local_xforms = tcp
        nodes, fixed = [], []
        for e, link in enumerate(links):
            node, link_from_node = self._link_frame[link]
            nodes.append(node)
            fixed.append(link_from_node @ tcp[e])
        self._ee_node = np.array(nodes, dtype=np.int64)
        self._ee_fixed = np.stack(fixed)
        self._ee_fixed.setflags(write=False)
        # Nodes needed for the TCPs: ancestors of every EE node, in tree order.
        needed = set()
        for node in nodes:
            while node >= 0 and node not in needed:
                needed.add(node)
                node = int(self._node_parent[node])
        self._ee_chain_nodes = tuple(sorted(needed))
        # dof_moves_tcp[d, e]: coordinate d moves TCP e. Mimic joints on a TCP chain move
        # with their master, so the rigid-motion shortcut of joint_perturbed_tcp_poses
        # does not apply there and that method falls back to full FK.
        self.dof_moves_tcp = np.zeros((self.num_dofs, len(links)), dtype=bool)
        self._dof_node = np.full(self.num_dofs, -1, dtype=np.int64)
        self._mimic_on_tcp_chain = False
        for k in self._ee_chain_nodes:
            if self._node_scale[k] != 1.0 or self._node_offset[k] != 0.0 or \
                    self._node_joint_names[k] in self.mimic_joints:
                self._mimic_on_tcp_chain = True
            else:
                self._dof_node[self._node_dof[k]] = k
        for e, node in enumerate(nodes):
            while node >= 0:
                self.dof_moves_tcp[self._node_dof[node], e] = True
                node = int(self._node_parent[node])
        self.dof_moves_tcp.setflags(write=False)
        self._all_nodes = tuple(range(len(self._node_parent)))

    # ------------------------------------------------------------- properties
    @property
    def num_dofs(self) -> int:
        """D, the number of joint coordinates."""
        return len(self.joint_names)

    @property
    def num_end_effectors(self) -> int:
        """E, the number of end effectors."""
        return len(self.end_effector_links)

    @property
    def joint_q(self) -> np.ndarray:
        """(D,) float32 joint coordinates (rad / m); modify in place or assign."""
        return self._joint_q

    @joint_q.setter
    def joint_q(self, values) -> None:
        values = np.asarray(values)
        if values.shape != (self.num_dofs,):
            raise InputValidationError("joint_q", f"expected shape ({self.num_dofs},), "
                                                  f"got {values.shape}")
        self._joint_q[:] = values

    def dof_id(self, name: str) -> int:
        """Index of joint ``name`` in ``joint_q``.

        Raises:
            InputValidationError: unknown or mimic joint (the message lists the joints).
        """
        try:
            return self._dof_index[name]
        except (KeyError, TypeError):
            hint = " (a mimic joint: it follows its master)" if name in self.mimic_joints else ""
            raise InputValidationError(
                "joint name", f"unknown joint '{name}'{hint}; joints: {list(self.joint_names)}"
            ) from None

    def kernel_arrays(self) -> KernelArrays:
        """The precomputed tree arrays as a :class:`KernelArrays` (built once, cached).

        Pure accessor: read-only copies, the model itself is not changed.
        """
        cached = self.__dict__.get("_kernel_arrays_cache")
        if cached is None:
            def frozen(array, dtype):
                out = np.ascontiguousarray(np.array(array, dtype=dtype))
                out.setflags(write=False)
                return out
            f8, i8 = np.float64, np.int64
            cached = KernelArrays(
                node_parent=frozen(self._node_parent, i8), node_dof=frozen(self._node_dof, i8),
                node_scale=frozen(self._node_scale, f8), node_offset=frozen(self._node_offset, f8),
                node_type=frozen(self._node_type, i8), node_rot=frozen(self._node_rot, f8),
                node_pos=frozen(self._node_pos, f8), node_rot_cross=frozen(self._node_rot_cross, f8),
                node_rot_outer=frozen(self._node_rot_outer, f8),
                node_axis_parent=frozen(self._node_axis_parent, f8),
                node_axis_local=frozen(self._node_axis_local, f8),
                ee_node=frozen(self._ee_node, i8), ee_fixed=frozen(self._ee_fixed, f8),
                ee_chain_nodes=frozen(np.array(self._ee_chain_nodes, dtype=i8).reshape(-1), i8),
                dof_node=frozen(self._dof_node, i8), dof_moves_tcp=frozen(self.dof_moves_tcp, bool),
                mimic_on_tcp_chain=bool(self._mimic_on_tcp_chain))
            self._kernel_arrays_cache = cached
        return cached

    # ---------------------------------------------------------------- FK
    def _node_frames(self, q: np.ndarray, nodes: Sequence[int], root: np.ndarray):
        """Frames of ``nodes`` for a batch of states.

        Args:
            q: (N, D) float64 joint coordinates.
            nodes: node indices in tree order (parents first).
            root: (4, 4) root link -> world.
        Returns:
            dicts node -> (N, 3, 3) rotation, node -> (N, 3) position (world frame).
        """
        rot: Dict[int, np.ndarray] = {}
        pos: Dict[int, np.ndarray] = {}
        root_r, root_p = root[:3, :3], root[:3, 3]
        for k in nodes:
            parent = self._node_parent[k]
            r_p, p_p = (root_r, root_p) if parent < 0 else (rot[parent], pos[parent])
            value = q[:, self._node_dof[k]]
            if self._node_scale[k] != 1.0 or self._node_offset[k] != 0.0:
                value = value * self._node_scale[k] + self._node_offset[k]
            if self._node_type[k] == _REVOLUTE:
                outer = self._node_rot_outer[k]
                local_r = (outer + np.cos(value)[:, None, None] * (self._node_rot[k] - outer)
                           + np.sin(value)[:, None, None] * self._node_rot_cross[k])
                rot[k] = r_p @ local_r
                pos[k] = np.broadcast_to(p_p + r_p @ self._node_pos[k], (len(q), 3))
            else:
                local_p = self._node_pos[k] + value[:, None] * self._node_axis_parent[k]
                rot[k] = np.broadcast_to(r_p @ self._node_rot[k], (len(q), 3, 3))
                pos[k] = p_p + (r_p @ local_p[:, :, None])[:, :, 0]
        return rot, pos

    def _as_batch(self, q) -> Tuple[np.ndarray, tuple]:
        q = np.asarray(q, dtype=np.float64)
        if q.ndim == 0 or q.shape[-1] != self.num_dofs:
            raise InputValidationError("q", f"last dimension must be D={self.num_dofs}, "
                                            f"got shape {q.shape}")
        return q.reshape(-1, self.num_dofs), q.shape[:-1]

    def tcp_poses(self, q, root_world_xform=None) -> Tuple[np.ndarray, np.ndarray]:
        """Batched TCP world poses.

        Args:
            q: (..., D) joint coordinates (rad / m).
            root_world_xform: (4, 4) root -> world; default the model's.
        Returns:
            rotations (..., E, 3, 3) and positions (..., E, 3), world frame, metres.
        """
        flat, lead = self._as_batch(q)
        _, _, out_r, out_p = self._frames_and_tcps(flat, root_world_xform)
        return (out_r.reshape(lead + (self.num_end_effectors, 3, 3)),
                out_p.reshape(lead + (self.num_end_effectors, 3)))

    def _tcp_from_nodes(self, rot, pos, root, n: int):
        out_r = np.empty((n, self.num_end_effectors, 3, 3))
        out_p = np.empty((n, self.num_end_effectors, 3))
        for e, node in enumerate(self._ee_node):
            fixed = self._ee_fixed[e]
            r_n, p_n = (root[:3, :3], root[:3, 3]) if node < 0 else (rot[node], pos[node])
            out_r[:, e] = r_n @ fixed[:3, :3]
            out_p[:, e] = p_n + r_n @ fixed[:3, 3]
        return out_r, out_p

    def joint_perturbed_tcp_poses(self, q, dof_ids: Sequence[int], epsilon: float,
                                  root_world_xform=None):
        """TCP poses at ``q`` and at ``q + epsilon * e_j`` for each ``j`` in ``dof_ids``.

        The perturbed poses are exact FK results: raising a revolute coordinate by
        epsilon rotates everything downstream of its joint by epsilon about the
        joint's world axis through its origin (a prismatic one translates it by
        epsilon along the axis), so they are computed from the unperturbed joint
        frames instead of A more FK passes. Robots with mimic joints on a TCP chain
        use full FK for every perturbation.

        Args:
            q: (N, D) joint coordinates; dof_ids: (A,) coordinates to perturb;
            epsilon: perturbation (rad or m).
        Returns:
            rot (N, E, 3, 3), pos (N, E, 3): poses at ``q``;
            rot_p (N, A, E, 3, 3), pos_p (N, A, E, 3): poses at the perturbed states.
        """
        flat, _ = self._as_batch(q)
        dof_ids = np.asarray(dof_ids, dtype=np.int64)
        n, a, e_count = len(flat), len(dof_ids), self.num_end_effectors
        if self._mimic_on_tcp_chain:
            rot, pos = self.tcp_poses(flat, root_world_xform)
            shifted = np.repeat(flat[:, None, :], a, axis=1)
            shifted[:, np.arange(a), dof_ids] += epsilon
            rot_p, pos_p = self.tcp_poses(shifted, root_world_xform)
            return rot, pos, rot_p, pos_p
        node_rot, node_pos, rot, pos = self._frames_and_tcps(flat, root_world_xform)
        rot_p = np.broadcast_to(rot[:, None], (n, a, e_count, 3, 3)).copy()
        pos_p = np.broadcast_to(pos[:, None], (n, a, e_count, 3)).copy()
        c, s = np.cos(epsilon), np.sin(epsilon)
        for i, k, moved, axis, prismatic in self._moving_axes(node_rot, dof_ids):
            if prismatic:
                pos_p[:, i, moved] += epsilon * axis[:, None, :]
                continue
            w = axis[:, None, :, None]  # (N, 1, 3, 1) rotates columns of rot
            cols = rot[:, moved]
            rot_p[:, i, moved] = (cols * c + np.cross(w, cols, axis=2) * s
                                  + w * np.sum(w * cols, axis=2, keepdims=True) * (1 - c))
            rel = pos[:, moved] - node_pos[k][:, None, :]
            w3 = axis[:, None, :]
            pos_p[:, i, moved] = (node_pos[k][:, None, :] + rel * c + np.cross(w3, rel) * s
                                  + w3 * np.sum(w3 * rel, axis=-1, keepdims=True) * (1 - c))
        return rot, pos, rot_p, pos_p

    def tcp_joint_motions(self, q, dof_ids: Sequence[int], root_world_xform=None):
        """TCP poses at ``q`` and how each TCP moves per unit rate of each coordinate.

        A revolute coordinate turns everything downstream of its joint about the
        joint's world axis through its origin: angular velocity = the axis, linear
        velocity of a TCP = axis x (TCP - origin). A prismatic one translates it
        along the axis. Coordinates that do not move a TCP give zeros. These are the
        derivatives of the exact rigid motions :meth:`joint_perturbed_tcp_poses` uses.

        Args:
            q: (N, D) joint coordinates; dof_ids: (A,) coordinates.
        Returns:
            rot (N, E, 3, 3), pos (N, E, 3): poses at ``q`` (world, metres);
            angular (N, A, E, 3) rad per unit, linear (N, A, E, 3) m per unit.
        Raises:
            RobotModelError: a mimic joint sits on a TCP chain (see
                :attr:`mimic_on_tcp_chain`); use finite differences there.
        """
        if self._mimic_on_tcp_chain:
            raise _model_error("mimic_joints", "tcp_joint_motions does not cover a mimic joint on a "
                                               "TCP chain; use joint_perturbed_tcp_poses")
        flat, _ = self._as_batch(q)
        dof_ids = np.asarray(dof_ids, dtype=np.int64)
        n, a, e_count = len(flat), len(dof_ids), self.num_end_effectors
        node_rot, node_pos, rot, pos = self._frames_and_tcps(flat, root_world_xform)
        angular = np.zeros((n, a, e_count, 3))
        linear = np.zeros((n, a, e_count, 3))
        for i, k, moved, axis, prismatic in self._moving_axes(node_rot, dof_ids):
            if prismatic:
                linear[:, i, moved] = axis[:, None, :]
                continue
            angular[:, i, moved] = axis[:, None, :]
            linear[:, i, moved] = np.cross(axis[:, None, :], pos[:, moved] - node_pos[k][:, None, :])
        return rot, pos, angular, linear

    def _frames_and_tcps(self, flat: np.ndarray, root_world_xform):
        """Node frames (dicts, see :meth:`_node_frames`) and TCP poses (N, E, ...) of (N, D) states."""
        root = self.root_world_xform if root_world_xform is None else root_world_xform
        node_rot, node_pos = self._node_frames(flat, self._ee_chain_nodes, root)
        rot, pos = self._tcp_from_nodes(node_rot, node_pos, root, len(flat))
        return node_rot, node_pos, rot, pos

    def _moving_axes(self, node_rot, dof_ids: np.ndarray):
        """For each coordinate ``dof_ids[i]`` that moves a TCP (no mimic joint on a TCP
        chain): (i, its node k, the TCPs it moves (M,), its world axis (N, 3), prismatic?).
        The world axis of the joint is R_parent R_origin a == R_node a."""
        for i, d in enumerate(dof_ids):
            k = self._dof_node[d]
            moved = np.flatnonzero(self.dof_moves_tcp[d])
            if k < 0 or len(moved) == 0:
                continue
            yield i, k, moved, node_rot[k] @ self._node_axis_local[k], self._node_type[k] == _PRISMATIC

    @property
    def mimic_on_tcp_chain(self) -> bool:
        """True when a mimic (scaled / offset) joint sits on a TCP chain: perturbed
        poses then need full FK and :meth:`tcp_joint_motions` does not apply."""
        return self._mimic_on_tcp_chain

    def tcp_transforms(self, q, root_world_xform=None) -> np.ndarray:
        """Batched TCP world transforms (..., E, 4, 4) for joint states (..., D)."""
        rot, pos = self.tcp_poses(q, root_world_xform)
        out = np.zeros(rot.shape[:-2] + (4, 4))
        out[..., :3, :3] = rot
        out[..., :3, 3] = pos
        out[..., 3, 3] = 1.0
        return out

    def link_transforms(self, q, link_names: Sequence[str], root_world_xform=None) -> np.ndarray:
        """Batched world transforms (..., L, 4, 4) of ``link_names`` for states (..., D)."""
        for name in link_names:
            if name not in self._link_frame:
                raise InputValidationError(
                    "link name", f"unknown link '{name}'; links: {_preview(self.link_names)}")
        flat, lead = self._as_batch(q)
        root = self.root_world_xform if root_world_xform is None else root_world_xform
        rot, pos = self._node_frames(flat, self._all_nodes, root)
        out = np.zeros((len(flat), len(link_names), 4, 4))
        out[..., 3, 3] = 1.0
        for i, name in enumerate(link_names):
            node, fixed = self._link_frame[name]
            r_n, p_n = (root[:3, :3], root[:3, 3]) if node < 0 else (rot[node], pos[node])
            out[:, i, :3, :3] = r_n @ fixed[:3, :3]
            out[:, i, :3, 3] = p_n + r_n @ fixed[:3, 3]
        return out.reshape(lead + (len(link_names), 4, 4))

    def link_attachment(self, name: str) -> Tuple[int, np.ndarray]:
        """(node, (4, 4) node -> link transform) of link ``name``: the movable joint (node of
        :meth:`node_frames`, -1 = the root link) it is rigidly attached to."""
        if name not in self._link_frame:
            raise InputValidationError(
                "link name", f"unknown link '{name}'; links: {_preview(self.link_names)}")
        node, fixed = self._link_frame[name]
        return int(node), fixed.copy()

    def node_frames(self, q) -> Tuple[np.ndarray, np.ndarray]:
        """Frames of every node (movable joint, mimic ones included) in the root link's frame.

        Args:
            q: (N, D) joint coordinates (rad / m).
        Returns:
            rotations (N, K, 3, 3) and positions (N, K, 3), metres.
        """
        flat, _ = self._as_batch(q)
        rot, pos = self._node_frames(flat, self._all_nodes, np.eye(4))
        k, n = len(self._all_nodes), len(flat)
        out_r, out_p = np.empty((n, k, 3, 3)), np.empty((n, k, 3))
        for node in self._all_nodes:
            out_r[:, node], out_p[:, node] = rot[node], pos[node]
        return out_r, out_p

    def update_fk(self) -> None:
        """Recompute every link and TCP world transform from ``joint_q``."""
        q = self._joint_q.astype(np.float64)[None]
        with np.errstate(over="ignore", invalid="ignore"):  # a broken model shows as inf/NaN
            links = self.link_transforms(q, self.link_names)[0]
            tcp = self.tcp_transforms(q)[0]
        self._link_cache = {name: links[i] for i, name in enumerate(self.link_names)}
        for xform in self._link_cache.values():
            xform.setflags(write=False)
        tcp.setflags(write=False)
        self._tcp_cache = tcp

    @property
    def tcp_world_xforms(self) -> np.ndarray:
        """(E, 4, 4) TCP world transforms as of the last :meth:`update_fk`."""
        return self._tcp_cache

    def link_world_xform(self, name: str) -> np.ndarray:
        """(4, 4) world transform of link ``name`` as of the last :meth:`update_fk`."""
        try:
            return self._link_cache[name]
        except KeyError:
            raise InputValidationError(
                "link name", f"unknown link '{name}'; links: {_preview(self.link_names)}") from None

    def tcp_reach_bounds(self) -> np.ndarray:
        """(E,) upper bound (m) of each TCP's distance from the root link's origin, any joint state.

        By the triangle inequality along the TCP's chain: the length of every fixed offset from
        the root to the TCP (joint origins, fixed joints, the TCP offset) plus the largest travel
        of every prismatic joint on it (mimic scale and offset included). Revolute joints only
        rotate, so they add nothing. +inf when a prismatic joint on the chain has no finite limit.
        Loose (the offsets rarely line up) but never below a reachable distance: a target farther
        than this is out of reach for certain.
        """
        bounds = np.zeros(self.num_end_effectors)
        for e in range(self.num_end_effectors):
            total = float(np.linalg.norm(self._ee_fixed[e][:3, 3]))
            node = int(self._ee_node[e])
            while node >= 0:
                total += float(np.linalg.norm(self._node_pos[node]))
                if self._node_type[node] == _PRISMATIC:
                    dof = self._node_dof[node]
                    travel = max(abs(self.lower_limits[dof]), abs(self.upper_limits[dof]))
                    total += abs(self._node_scale[node]) * travel + abs(self._node_offset[node])
                node = int(self._node_parent[node])
            bounds[e] = total
        return bounds

    def static_link_xforms(self) -> Dict[str, np.ndarray]:
        """Links fixed to the root (no movable joint between): ``{name: (4, 4) root -> link}``."""
        return {name: fixed.copy() for name, (node, fixed) in self._link_frame.items() if node < 0}

    def __repr__(self) -> str:
        return (f"RobotKinematics('{self.robot_name}', root='{self.root_link}', "
                f"D={self.num_dofs}, end_effectors={list(self.end_effector_links)})")


def _preview(names: Sequence[str], limit: int = 30) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")

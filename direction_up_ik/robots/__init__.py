"""Robot descriptions bundled with ``direction_up_ik``.

The URDF files in ``direction_up_ik/robots/urdf/`` are kinematics-only models
(primitive visuals at most, no meshes, no inertials) written for this package:

``dual_arm_torso``
    Default demo robot: mobile base, prismatic torso lift (0 .. 0.40 m), waist
    yaw (+-2.6 rad) and two 7-DOF arms with parallel grippers (16 DOF in all).
``panda_like``
    7-DOF arm built from Franka's published modified DH parameters and limits.
``ur5_like``
    6-DOF arm built from Universal Robots' published UR5 DH parameters; its
    ``base_link`` coincides with the DH base frame.

Each robot names its root link and its end effectors. An end effector is a URDF
link plus a fixed link -> TCP (tool centre point) transform. Units throughout:
lengths in metres, angles in radians; ``tcp_rpy`` uses the URDF convention
(roll, pitch, yaw about the fixed x, y, z axes: R = Rz(yaw) Ry(pitch) Rx(roll)).

The registry imports only the standard library; :meth:`BundledRobot.load` builds
the solver's :class:`~direction_up_ik.core.RobotKinematics` on demand.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Dict, Tuple

__all__ = [
    "BUNDLED_ROBOTS",
    "DEFAULT_ROBOT",
    "URDF_DIR",
    "BundledRobot",
    "EndEffectorSpec",
    "bundled_robot",
    "load_robot",
]

#: Folder that holds the bundled URDF files.
URDF_DIR = pathlib.Path(__file__).resolve().parent / "urdf"


@dataclass(frozen=True)
class EndEffectorSpec:
    """One end effector of a bundled robot: a link and a fixed TCP offset.

    Attributes:
        name: end-effector name used by the solver and its messages, e.g. ``"left"``.
        link: name of the URDF link the TCP is attached to.
        tcp_xyz: translation from the link frame to the TCP, (x, y, z) in metres,
            expressed in the link frame.
        tcp_rpy: rotation from the link frame to the TCP frame, (roll, pitch, yaw)
            in radians, URDF convention (fixed-axis X-Y-Z, R = Rz(yaw) Ry(pitch) Rx(roll)).
    """

    name: str
    link: str
    tcp_xyz: Tuple[float, float, float] = (0.0, 0.0, 0.0)
    tcp_rpy: Tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class BundledRobot:
    """A robot description shipped with the package.

    Attributes:
        name: registry key, e.g. ``"dual_arm_torso"``.
        urdf_file: file name inside ``direction_up_ik/robots/urdf/``.
        root_link: root link of the URDF tree; solver poses are expressed in it.
        end_effectors: the robot's end effectors (link + TCP offset, metres/radians).
        description: one-line human-readable summary.
    """

    name: str
    urdf_file: str
    root_link: str
    end_effectors: Tuple[EndEffectorSpec, ...]
    description: str

    def urdf_path(self) -> pathlib.Path:
        """Absolute path of this robot's URDF file."""
        return URDF_DIR / self.urdf_file

    def tcp_xforms(self) -> list:
        """(E,) link -> TCP transforms as (4, 4) numpy arrays, end-effector order."""
        from ..core.rotations import make_transform, rpy_to_matrix
        return [make_transform(rpy_to_matrix(e.tcp_rpy), e.tcp_xyz) for e in self.end_effectors]

    def load(self, root_world_xform=None):
        """Build the robot model (``RobotKinematics``) with this robot's end effectors."""
        from ..core.kinematics import RobotKinematics
        return RobotKinematics.from_urdf(
            self.urdf_path(), [e.link for e in self.end_effectors], self.tcp_xforms(),
            root_link=self.root_link, root_world_xform=root_world_xform)


DEFAULT_ROBOT = "dual_arm_torso"

#: Distance (m) from a dual_arm_torso hand link to the centre between its fingertip pads.
_DUAL_ARM_TCP_Z = 0.10

#: Distance (m) from panda_hand to the centre between the Panda's fingertips.
_PANDA_TCP_Z = 0.1034

BUNDLED_ROBOTS: Dict[str, BundledRobot] = {
    "dual_arm_torso": BundledRobot(
        name="dual_arm_torso",
        urdf_file="dual_arm_torso.urdf",
        root_link="base_link",
        end_effectors=(
            EndEffectorSpec("left", "left_hand_link", (0.0, 0.0, _DUAL_ARM_TCP_Z), (0.0, 0.0, 0.0)),
            EndEffectorSpec("right", "right_hand_link", (0.0, 0.0, _DUAL_ARM_TCP_Z), (0.0, 0.0, 0.0)),
        ),
        description=("Bimanual demo robot: torso lift (0-0.40 m), waist yaw and two 7-DOF "
                     "arms with grippers; TCP 0.10 m along each hand's +Z (16 DOF)."),
    ),
    "panda_like": BundledRobot(
        name="panda_like",
        urdf_file="panda_like.urdf",
        root_link="panda_link0",
        end_effectors=(
            EndEffectorSpec("tool", "panda_hand", (0.0, 0.0, _PANDA_TCP_Z), (0.0, 0.0, 0.0)),
        ),
        description=("7-DOF Franka-Panda-like arm (published modified DH and limits); "
                     "TCP 0.1034 m along panda_hand +Z."),
    ),
    "ur5_like": BundledRobot(
        name="ur5_like",
        urdf_file="ur5_like.urdf",
        root_link="base_link",
        end_effectors=(
            EndEffectorSpec("tool", "tool0", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
        ),
        description=("6-DOF UR5-like arm (published DH parameters, base_link = DH base); "
                     "TCP = tool0."),
    ),
}


def bundled_robot(name: str) -> BundledRobot:
    """Return the bundled robot called ``name``.

    Raises:
        KeyError: ``name`` is not a bundled robot; the message lists the valid names.
    """
    try:
        return BUNDLED_ROBOTS[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(BUNDLED_ROBOTS))
        raise KeyError(f"unknown bundled robot {name!r}; valid names: {valid}") from None


def load_robot(name: str = DEFAULT_ROBOT, root_world_xform=None):
    """Model of bundled robot ``name`` (default the dual-arm torso); see :meth:`BundledRobot.load`."""
    return bundled_robot(name).load(root_world_xform)

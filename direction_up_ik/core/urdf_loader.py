"""Read the kinematic part of a URDF.

Real robot descriptions carry much that does not affect kinematics: ``<gazebo>``,
``<transmission>`` (sometimes with non-numeric fields), ``<ros2_control>``,
meshes that do not exist on this machine, materials, and tags of other tools.
This module keeps only ``<link name>`` and the kinematic children of ``<joint>``
(origin, axis, parent, child, limit, safety_controller, mimic), then parses that
with ``urdf_parser_py``. The result is a plain list of :class:`JointSpec`.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from .errors import RobotModelError

_KINEMATIC_JOINT_CHILDREN = ("origin", "axis", "parent", "child", "limit",
                             "safety_controller", "mimic")
_SUPPORTED_TYPES = ("revolute", "continuous", "prismatic", "fixed")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.DOTALL)
# Byte-order marks and whitespace that may precede a document's first '<' (a file read with
# the "utf-8" codec instead of "utf-8-sig" keeps its BOM as U+FEFF).
_LEADING = re.compile(r"^[\s\ufeff]*")
#: Most characters of a URDF argument an error message quotes.
EXCERPT_CHARS = 80


@dataclass(frozen=True)
class JointSpec:
    """One URDF joint, as far as kinematics needs it.

    Attributes:
        name, type, parent, child: as in the URDF (type in revolute, continuous,
            prismatic, fixed).
        origin_xyz: (3,) metres, parent link frame -> joint frame translation.
        origin_rpy: (3,) radians, URDF roll/pitch/yaw of the joint frame.
        axis: (3,) unit axis in the joint frame.
        lower, upper: limits (rad or m) after safety-controller narrowing;
            -inf/+inf for continuous joints; 0 for fixed ones.
        mimic: ``(master joint name, multiplier, offset)`` or None.
    """

    name: str
    type: str
    parent: str
    child: str
    origin_xyz: Tuple[float, float, float]
    origin_rpy: Tuple[float, float, float]
    axis: Tuple[float, float, float]
    lower: float
    upper: float
    mimic: Optional[Tuple[str, float, float]]


@dataclass(frozen=True)
class UrdfKinematics:
    """Links and joints of a URDF. ``joints`` keeps document order."""

    robot_name: str
    links: Tuple[str, ...]
    joints: Tuple[JointSpec, ...]


def is_xml_text(urdf: str) -> bool:
    """True when ``urdf`` is XML text rather than a file path: after any byte-order marks
    and whitespace it starts with '<' (a file path never does)."""
    return urdf[_LEADING.match(urdf).end():].startswith("<")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` quoted for an error message, cut to its first ``limit`` characters (with the
    full length named) so that a whole document is never echoed."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _read_text(urdf: str) -> str:
    """The XML text of ``urdf``: XML text as is (without a leading BOM or whitespace), or the
    content of the file it names."""
    if not isinstance(urdf, (str, os.PathLike)):
        raise RobotModelError(
            f"urdf: expected a file path or URDF XML string, got {type(urdf).__name__}")
    text = os.fspath(urdf)
    if not isinstance(text, str):
        raise RobotModelError(f"urdf: expected a file path or URDF XML string, got a path of "
                              f"{type(text).__name__}")
    if is_xml_text(text):
        return text[_LEADING.match(text).end():]
    try:
        with open(text, "rb") as handle:
            raw = handle.read()
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL character
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RobotModelError(f"urdf: neither XML text (which starts with '<') nor a readable "
                              f"file: cannot read file {excerpt(text)}: {reason}") from None
    try:
        root = ET.fromstring(raw)  # bytes honour the declared encoding (and a UTF-8 BOM)
    except ET.ParseError as exc:
        raise RobotModelError(f"urdf: file {excerpt(text)} is not well-formed XML: {exc}") from None
    return ET.tostring(root, encoding="unicode")


def _sanitize(text: str) -> ET.Element:
    # A str cannot carry an encoding of its own: drop the declaration, as ROS tools do.
    text = _XML_DECLARATION.sub("", text, count=1)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RobotModelError(f"urdf: not well-formed XML: {exc}") from None
    if root.tag != "robot":
        raise RobotModelError(f"urdf: root element must be <robot>, found <{root.tag}>")
    clean = ET.Element("robot", {"name": root.get("name", "robot")})
    for element in root:
        if element.tag == "link":
            ET.SubElement(clean, "link", {"name": element.get("name", "")})
        elif element.tag == "joint":
            joint = ET.SubElement(clean, "joint", dict(element.attrib))
            for child in element:
                if child.tag in _KINEMATIC_JOINT_CHILDREN:
                    joint.append(child)
    return clean


def _vector(values, default, what: str) -> Tuple[float, float, float]:
    if values is None:
        values = default
    out = tuple(float(v) for v in values)
    if len(out) != 3 or not np.all(np.isfinite(out)):
        raise RobotModelError(f"urdf: {what} must be 3 finite numbers, got {values}")
    return out


def parse_urdf(urdf: str) -> UrdfKinematics:
    """Parse a URDF file path or XML string into its kinematic description.

    ``urdf`` is XML text when it starts with '<' after any byte-order marks and whitespace
    (:func:`is_xml_text`), else a file path. Error messages quote at most
    :data:`EXCERPT_CHARS` characters of it.

    Raises:
        RobotModelError: malformed XML, unsupported (floating/planar) joints,
            missing limits, non-finite numbers, unknown or duplicate names.
    """
    from urdf_parser_py import urdf as urdf_model

    clean = _sanitize(_read_text(urdf))
    soft_limits = {}
    for element in clean.findall("joint"):
        safety = element.find("safety_controller")
        if safety is not None:
            soft_limits[element.get("name")] = (safety.get("soft_lower_limit"),
                                                safety.get("soft_upper_limit"))
            element.remove(safety)  # read here: urdf_parser_py defaults absent bounds to 0
        jtype = element.get("type")
        if jtype in ("floating", "planar"):
            raise RobotModelError(
                f"urdf: joint '{element.get('name')}' is of type '{jtype}', which this "
                f"solver does not support (supported: {', '.join(_SUPPORTED_TYPES)})")
    urdf_model.verbose = False
    try:
        model = urdf_model.URDF.from_xml_string(ET.tostring(clean, encoding="unicode"))
    except Exception as exc:  # urdf_parser_py raises plain Exception/AssertionError
        raise RobotModelError(f"urdf: cannot parse the robot description: {exc}") from None

    links = tuple(link.name for link in model.links)
    if len(set(links)) != len(links):
        raise RobotModelError("urdf: duplicate link names")
    joints = []
    for joint in model.joints:
        joints.append(_joint_spec(joint, soft_limits.get(joint.name)))
    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        raise RobotModelError("urdf: duplicate joint names")
    link_set = set(links)
    for j in joints:
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in link_set:
                raise RobotModelError(
                    f"urdf: joint '{j.name}' names {role} link '{link}', which is not defined")
    return UrdfKinematics(robot_name=model.name or "robot", links=links, joints=tuple(joints))


def _joint_spec(joint, soft) -> JointSpec:
    name = joint.name
    if joint.type not in _SUPPORTED_TYPES:
        raise RobotModelError(
            f"urdf: joint '{name}' has type '{joint.type}'; supported: "
            f"{', '.join(_SUPPORTED_TYPES)}")
    origin = joint.origin
    xyz = _vector(origin.xyz if origin is not None else None, (0, 0, 0), f"joint '{name}' origin xyz")
    rpy = _vector(origin.rpy if origin is not None else None, (0, 0, 0), f"joint '{name}' origin rpy")
    axis = np.array(_vector(joint.axis, (1, 0, 0), f"joint '{name}' axis"))
    if joint.type != "fixed":
        norm = np.linalg.norm(axis)
        if norm < 1e-9:
            raise RobotModelError(f"urdf: joint '{name}' has a zero-length axis")
        axis = axis / norm
    lower, upper = 0.0, 0.0
    if joint.type == "continuous":
        lower, upper = -np.inf, np.inf
    elif joint.type in ("revolute", "prismatic"):
        if joint.limit is None:
            raise RobotModelError(
                f"urdf: joint '{name}' ({joint.type}) has no <limit>; URDF requires one")
        lower = float(joint.limit.lower if joint.limit.lower is not None else 0.0)
        upper = float(joint.limit.upper if joint.limit.upper is not None else 0.0)
        if soft is not None:  # narrow to the safety controller's soft limits (as MoveIt does)
            if soft[0] is not None:
                lower = max(lower, float(soft[0]))
            if soft[1] is not None:
                upper = min(upper, float(soft[1]))
        if not (np.isfinite(lower) and np.isfinite(upper)) or lower > upper:
            raise RobotModelError(
                f"urdf: joint '{name}' has invalid limits [{lower}, {upper}] "
                "(need finite lower <= upper)")
    mimic = None
    if joint.mimic is not None and joint.type != "fixed":
        multiplier = 1.0 if joint.mimic.multiplier is None else float(joint.mimic.multiplier)
        offset = 0.0 if joint.mimic.offset is None else float(joint.mimic.offset)
        if not (np.isfinite(multiplier) and np.isfinite(offset)):
            raise RobotModelError(f"urdf: joint '{name}' has a non-finite mimic multiplier/offset")
        mimic = (joint.mimic.joint, multiplier, offset)
    return JointSpec(name=name, type=joint.type, parent=joint.parent, child=joint.child,
                     origin_xyz=xyz, origin_rpy=rpy, axis=tuple(float(a) for a in axis),
                     lower=lower, upper=upper, mimic=mimic)

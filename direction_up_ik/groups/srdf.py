"""Planning groups as MoveIt defines them: read from the SRDF.

MoveIt builds a kinematics plugin for a group with the group's base (the parent link of its
first link) and its tip (its last link), both from the SRDF, and sends that tip as
``ik_link_name``. :func:`srdf_groups` reads a group's chains from the SRDF's ``<group>``
elements:

* ``<chain base_link=".." tip_link=".."/>``: that chain;
* ``<joint name=".."/>`` lists: the chain the joints form, from the parent link of the
  topmost joint to the child link of the deepest one (the joints must form one chain);
* ``<group name=".."/>`` (subgroups): the chains of those groups, in order (a dual-arm group
  of two arm groups has two chains).

``<link>`` elements add no joints and are ignored. The result per group is a
:class:`SrdfGroup`: one base and one tip per chain. Only the kinematics are read; no ROS.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from ..core.errors import DirectionUpIKError


class SrdfError(DirectionUpIKError, ValueError):
    """The SRDF cannot be read or a group's chains break a rule; the message names the group."""


@dataclass(frozen=True)
class SrdfGroup:
    """One planning group: ``base`` link and its chains' ``tips`` (one per chain, in order); or
    ``error``, why the group's chains cannot be served (raised when a served group needs them)."""

    name: str
    base: str
    tips: Tuple[str, ...]
    error: str = ""


def _parse_xml(source: str, what: str) -> ET.Element:
    text = str(source)
    if "<" not in text:
        if not os.path.isfile(text):
            raise SrdfError(f"{what}: file '{text}' not found")
        with open(text, encoding="utf-8") as handle:
            text = handle.read()
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise SrdfError(f"{what}: invalid XML: {exc}") from None


def _urdf_tree(urdf: str) -> Tuple[Dict[str, Tuple[str, str]], Dict[str, str]]:
    """({joint: (parent link, child link)}, {child link: parent link}) of a URDF (path or XML)."""
    root = _parse_xml(urdf, "robot_description")
    joints, parent_of = {}, {}
    for joint in root.iter("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None or joint.get("name") is None:
            continue  # (transmission joints and the like)
        joints[joint.get("name")] = (parent.get("link"), child.get("link"))
        parent_of[child.get("link")] = parent.get("link")
    return joints, parent_of


def _depth(link: str, parent_of: Mapping[str, str]) -> int:
    depth = 0
    while link in parent_of:
        link, depth = parent_of[link], depth + 1
    return depth


def _joint_chain(group: str, names: List[str], joints, parent_of) -> Tuple[str, str]:
    """(base, tip) of the chain a group's joint list forms."""
    unknown = [n for n in names if n not in joints]
    if unknown:
        raise SrdfError(f"SRDF group '{group}': unknown joints {unknown}")
    ordered = sorted(names, key=lambda n: _depth(joints[n][1], parent_of))
    base, tip = joints[ordered[0]][0], joints[ordered[-1]][1]
    link, on_chain = tip, set()
    while link != base:
        if link not in parent_of:
            raise SrdfError(f"SRDF group '{group}': joints {names} do not form one chain")
        on_chain.add(link)
        link = parent_of[link]
    if any(joints[n][1] not in on_chain for n in names):
        raise SrdfError(f"SRDF group '{group}': joints {names} do not form one chain (a dual-arm "
                        "group is a group of arm groups, or base_frame/tip_frames in kinematics.yaml)")
    return base, tip


def srdf_groups(srdf: str, urdf: str) -> Dict[str, SrdfGroup]:
    """{group: SrdfGroup} of every SRDF group that has chains (``srdf``/``urdf``: path or XML).

    Groups of links only are left out (they have no joints to solve). A group whose chains break a
    rule (unknown joints or subgroups, joints that do not form one chain, chains with different
    bases) carries the reason in ``error``: only the groups a kinematics.yaml serves must be valid.

    Raises:
        SrdfError: unreadable SRDF or URDF.
    """
    root = _parse_xml(srdf, "SRDF")
    elements = {g.get("name"): g for g in root.findall("group") if g.get("name")}
    joints, parent_of = _urdf_tree(urdf)
    chains: Dict[str, List[Tuple[str, str]]] = {}

    def chains_of(name: str, seen: Tuple[str, ...]) -> List[Tuple[str, str]]:
        if name in chains:
            return chains[name]
        if name not in elements:
            raise SrdfError(f"SRDF group '{seen[-1]}': unknown subgroup '{name}'")
        if name in seen:
            raise SrdfError(f"SRDF group '{name}': subgroups form a cycle")
        element, found = elements[name], []
        for chain in element.findall("chain"):
            base, tip = chain.get("base_link"), chain.get("tip_link")
            if not base or not tip:
                raise SrdfError(f"SRDF group '{name}': a chain needs base_link and tip_link")
            found.append((base, tip))
        listed = [j.get("name") for j in element.findall("joint") if j.get("name")]
        if listed:
            found.append(_joint_chain(name, listed, joints, parent_of))
        for sub in element.findall("group"):
            found.extend(chains_of(sub.get("name"), seen + (name,)))
        chains[name] = found
        return found

    out = {}
    for name in elements:
        try:
            found = chains_of(name, ())
            bases = {base for base, _ in found}
            if len(bases) > 1:
                raise SrdfError(f"SRDF group '{name}': its chains start at different links "
                                f"{sorted(bases)}; name direction_up_ik.base_frame in kinematics.yaml")
        except SrdfError as exc:
            out[name] = SrdfGroup(name, "", (), str(exc))
            continue
        if found:
            out[name] = SrdfGroup(name, found[0][0], tuple(tip for _, tip in found))
    return out


def chain_links(urdf: str, base: str, tip: str) -> Optional[Tuple[str, ...]]:
    """Links from ``base`` to ``tip`` (both included, base first), or None when ``tip`` is not
    below ``base``."""
    _, parent_of = _urdf_tree(urdf)
    links = [tip]
    while links[-1] != base:
        if links[-1] not in parent_of:
            return None
        links.append(parent_of[links[-1]])
    return tuple(reversed(links))

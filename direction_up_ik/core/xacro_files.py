"""URDF text from a xacro file (``.urdf.xacro``) and its arguments, without ROS.

Robot descriptions ship as xacro with arguments (``ur_type:=ur5e``, ``hand:=true``): the
PyPI ``xacro`` package expands them here. ``$(find pkg)`` resolves to the package's share
folder through the ament index on ``AMENT_PREFIX_PATH`` (xacro asks
``ament_index_python``, a pure-Python reader of that index; no rclpy). ``package://`` URIs
in the output name meshes, which the kinematics never reads: they stay as they are.

xacro keeps its state in module globals (file stack, arguments), so expansions run one
at a time (a lock).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Dict, Mapping, Sequence, Union

from .errors import InputValidationError, RobotModelError

XACRO_SUFFIX = ".xacro"
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-.]*")
_LOCK = threading.Lock()

XacroArgs = Union[Mapping[str, str], Sequence[str], None]


def is_xacro_path(source) -> bool:
    """True when ``source`` is a path (str or PathLike) whose name ends in ``.xacro``."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    text = os.fspath(source)
    return isinstance(text, str) and not text.lstrip("\ufeff \t\r\n").startswith("<") \
        and text.endswith(XACRO_SUFFIX)


def parse_xacro_args(args: XacroArgs, field: str = "xacro_args") -> Dict[str, str]:
    """``{name: value}`` of xacro arguments given as a mapping or as ``name:=value`` strings.

    Raises:
        InputValidationError: naming ``field[i]`` for an entry without ``:=``, with an empty
            or invalid name, or a name given twice.
    """
    if args is None:
        return {}
    if isinstance(args, Mapping):
        items = [(str(k), str(v)) for k, v in args.items()]
    elif isinstance(args, str):
        raise InputValidationError(field, "must be a list of 'name:=value' strings or a mapping, got one string")
    else:
        items = []
        for i, entry in enumerate(args):
            if not isinstance(entry, str) or ":=" not in entry:
                raise InputValidationError(f"{field}[{i}]", f"must be 'name:=value', got {entry!r}")
            name, value = entry.split(":=", 1)
            items.append((name.strip(), value))
    out: Dict[str, str] = {}
    for i, (name, value) in enumerate(items):
        if not _ARG_NAME.fullmatch(name):
            raise InputValidationError(f"{field}[{i}]", f"argument name must be letters, digits, '_', '-' or "
                                                        f"'.', not starting with a digit; got {name!r}")
        if name in out:
            raise InputValidationError(f"{field}[{i}]", f"argument '{name}' is given twice")
        out[name] = value
    return out


def xacro_to_urdf(path, args: XacroArgs = None) -> str:
    """The URDF XML text that xacro makes of the file ``path`` with arguments ``args``.

    Args:
        path: a ``.xacro`` file (includes are relative to it; ``$(find pkg)`` through the
            ament index on ``AMENT_PREFIX_PATH``).
        args: ``{name: value}`` or ``["name:=value", ...]`` (``$(arg name)`` in the file).
    Raises:
        InputValidationError: malformed ``args``.
        RobotModelError: one line naming the file and xacro's message (unreadable file, an
            unknown argument or package, a macro error, bad XML).
    """
    mappings = parse_xacro_args(args)
    filename = os.fspath(path)
    try:
        import xacro
    except ImportError as exc:  # pragma: no cover - a pinned requirement
        raise RobotModelError(f"xacro: cannot expand '{filename}': the xacro package is not installed "
                              f"({exc}); pip install xacro") from None
    with _LOCK:
        try:
            document = xacro.process_file(filename, mappings=mappings)
            return document.toxml()
        except Exception as exc:  # noqa: BLE001 - xacro raises many kinds; all become one line
            stack = [f for f in (getattr(xacro, "filestack", None) or []) if f]
            where = f" (in '{stack[-1]}')" if stack and stack[-1] != filename else ""
            raise RobotModelError(f"xacro: '{filename}'{where}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """xacro's message for ``exc`` on one line (its command line's wording for bad XML)."""
    text = " ".join(str(exc).split()) or repr(exc)
    if type(exc).__name__ == "ExpatError":
        return f"XML parsing error: {text}"
    if type(exc).__name__ == "PackageNotFoundError":
        return f"$(find): {text} on AMENT_PREFIX_PATH"
    if text.startswith("Undefined substitution argument"):
        text += " (give it as xacro_args name:=value)"
    return text

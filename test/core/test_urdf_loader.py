"""URDF argument: XML text or a file path, told apart by content (issue 23, item 7).

A document that starts with a byte-order mark (a file read with the "utf-8" codec instead of
"utf-8-sig") is XML text, not a path, and no error message echoes a whole document.
"""

import numpy as np
import pytest

from direction_up_ik import RobotKinematics, RobotModelError
from direction_up_ik.core import urdf_loader
from direction_up_ik.core.urdf_loader import parse_urdf
from direction_up_ik.robots import bundled_robot

BOM = "\ufeff"
SPEC = bundled_robot("panda_like")
TEXT = SPEC.urdf_path().read_text(encoding="utf-8")
EE = [e.link for e in SPEC.end_effectors]
# Characters an error message quotes of the argument (urdf_loader.EXCERPT_CHARS), and the most an
# error message may hold: that excerpt plus its own words.
EXCERPT_CHARS = 80
MESSAGE_CHARS = EXCERPT_CHARS + 300


def _tcp(urdf) -> np.ndarray:
    robot = RobotKinematics.from_urdf(urdf, EE)
    q = np.linspace(-0.5, 0.5, robot.num_dofs)
    return robot.tcp_transforms(q)


def test_the_bundled_document_is_big_and_declares_its_encoding():
    """The premise of the cases below: a real document of kilobytes with an XML declaration."""
    assert TEXT.lstrip().startswith("<?xml") and len(TEXT) > 2000


@pytest.mark.parametrize("prefix", [BOM, BOM + "\n", "  \n\t", BOM + BOM, "\n" + BOM])
def test_xml_text_after_a_bom_or_whitespace_is_text(prefix):
    np.testing.assert_array_equal(_tcp(prefix + TEXT), _tcp(TEXT))
    assert parse_urdf(prefix + TEXT) == parse_urdf(TEXT)
    assert urdf_loader.is_xml_text(prefix + TEXT)


def test_a_file_with_a_bom_loads(tmp_path):
    path = tmp_path / "bom.urdf"
    path.write_bytes(TEXT.encode("utf-8-sig"))
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    for urdf in (str(path), path):
        np.testing.assert_array_equal(_tcp(urdf), _tcp(TEXT))
        assert not urdf_loader.is_xml_text(str(urdf))


@pytest.mark.parametrize("path", ["/no/such/file.urdf", "relative/robot.urdf", "robot.urdf"])
def test_paths_are_paths(path):
    with pytest.raises(RobotModelError, match=f"cannot read file '{path}': No such file"):
        parse_urdf(path)
    assert not urdf_loader.is_xml_text(path)


@pytest.mark.parametrize("document", [
    TEXT.replace("<?xml", "?xml", 1),              # lost its first '<': not XML, not a path
    "robot_description: " + TEXT,                  # a YAML wrapper around the XML
    TEXT.replace("<robot", "robot", 1)[TEXT.index("<robot"):],
])
def test_errors_never_echo_a_whole_document(document):
    assert len(document) > 1000
    with pytest.raises(RobotModelError) as info:
        parse_urdf(document)
    message = str(info.value)
    assert len(message) < MESSAGE_CHARS, message
    assert "neither XML text" in message and "cannot read file" in message
    assert repr(document[:EXCERPT_CHARS]) in message and f"({len(document)} characters)" in message


@pytest.mark.parametrize("document", [
    BOM + TEXT[:-200],                             # cut off: not well-formed
    BOM + TEXT.replace("<robot", "<model", 1).replace("</robot>", "</model>"),
])
def test_broken_xml_text_is_reported_without_the_document(document):
    with pytest.raises(RobotModelError) as info:
        parse_urdf(document)
    message = str(info.value)
    assert len(message) < MESSAGE_CHARS, message
    assert "not well-formed XML" in message or "root element must be <robot>" in message


def test_a_broken_file_is_named_not_quoted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short path: a long one is cut in the message
    path = "broken.urdf"
    (tmp_path / path).write_text(TEXT[:-200], encoding="utf-8")
    with pytest.raises(RobotModelError, match=f"file '{path}' is not well-formed XML") as info:
        parse_urdf(path)
    assert len(str(info.value)) < MESSAGE_CHARS


def test_excerpt_quotes_short_text_whole_and_cuts_long_text():
    assert urdf_loader.EXCERPT_CHARS == EXCERPT_CHARS
    assert urdf_loader.excerpt("robot.urdf") == "'robot.urdf'"
    long = "x" * 11_000
    assert urdf_loader.excerpt(long) == repr("x" * EXCERPT_CHARS) + "... (11000 characters)"


def test_other_arguments_are_rejected_by_type():
    with pytest.raises(RobotModelError, match="expected a file path or URDF XML string, got bytes"):
        parse_urdf(TEXT.encode())
    with pytest.raises(RobotModelError, match="got a path of bytes"):
        parse_urdf(_BytesPath())


class _BytesPath:
    """An os.PathLike whose path is bytes."""

    def __fspath__(self):
        return b"/tmp/robot.urdf"

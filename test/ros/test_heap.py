"""A node that owns its process keeps CPython's full collections short: it frees the garbage and
freezes what is alive (``ros/process.settle_heap``) after start-up, once its kernels are loaded
and after it adopts a model from the description topic; a node sharing its process does not."""

from __future__ import annotations

import gc
import weakref

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from direction_up_ik.robots import bundled_robot  # noqa: E402
from direction_up_ik.ros import node as node_module  # noqa: E402
from direction_up_ik.ros.process import settle_heap  # noqa: E402

from node_harness import wait_until  # noqa: E402


@pytest.fixture
def unfrozen():
    """This test process's heap unfrozen before and after the test."""
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Cell:
    """A container the collector tracks."""


def test_settle_heap_frees_the_garbage_and_freezes_the_rest(unfrozen):
    garbage = _Cell()
    garbage.me = garbage  # a reference cycle: only the collector frees it
    freed = weakref.ref(garbage)
    del garbage
    kept = _Cell()
    kept.me = kept
    settle_heap()
    assert freed() is None  # collected, not frozen with the rest
    assert gc.get_freeze_count() > 0
    # gc.get_objects() lists the generations a collection walks; frozen objects are in none
    assert not any(o is kept for o in gc.get_objects())
    gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


def test_a_node_owning_its_process_settles_after_start_up_and_its_kernels(ros, unfrozen):
    node = ros.start_node("ur5_like", owns_process=True)
    assert gc.get_freeze_count() > 0  # the constructor's last step
    gc.unfreeze()
    node.node._on_kernels_ready(2.0, "")  # the background preparation's report
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    node.node._on_kernels_ready(None, "numba is not installed")  # nothing was loaded
    assert gc.get_freeze_count() == 0


def test_a_node_sharing_its_process_leaves_the_heap_alone(ros, unfrozen):
    node = ros.start_node("ur5_like")
    node.node._on_kernels_ready(2.0, "")
    assert gc.get_freeze_count() == 0


def test_a_model_from_the_description_topic_settles_the_heap(ros, unfrozen):
    node = ros.start_node("panda_like", params={"robot_description_topic": "robot_description"},
                          owns_process=True)
    gc.unfreeze()
    latched = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    publisher = ros.client_node.create_publisher(String, f"{node.namespace}/robot_description", latched)
    publisher.publish(String(data=bundled_robot("panda_like").urdf_path().read_text(encoding="utf-8")))
    wait_until(lambda: node.node.descriptions_received == 1, what="the description to be handled")
    assert node.node._robot is not None
    assert gc.get_freeze_count() > 0


def test_the_console_entry_point_runs_the_node_as_its_process_s_owner(monkeypatch):
    built = {}

    def fake_run_node(make_node, name, args=None, on_stop=None):
        built["make_node"] = make_node
        return 0

    monkeypatch.setattr(node_module, "run_node", fake_run_node)
    assert node_module.main([]) == 0
    make_node = built["make_node"]
    assert make_node.func is node_module.DirectionUpIKNode and make_node.keywords == {"owns_process": True}

"""A first solve does not wait for the kernels' first compile (core/backend.py).

In a fresh interpreter with an empty kernel cache, the "auto" backend answers with the numpy
reference at once while the compiled kernels are prepared in the background.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")

_SCRIPT = """
import json, time
from direction_up_ik import DirectionUpTarget, robo_solve_ik_direction_up_multi_batch
from direction_up_ik.core import backend
from direction_up_ik.core.kinematics import mid_range
from direction_up_ik.robots import load_robot
robot = load_robot("panda_like")
robot.joint_q[:] = mid_range(robot)
tcp = robot.tcp_transforms(mid_range(robot) + 0.05)[0]
target = DirectionUpTarget(0, tcp[:3, 3], tcp[:3, 2], tcp[:3, 1], None, None)
before = backend.kernel_state()
result = robo_solve_ik_direction_up_multi_batch(robot, [(target,)], max_position_error=0.03)
during = backend.kernel_state()
backend.stop_preparing()
print(json.dumps({"before": before, "during": during, "backend": result.backend,
                  "success": int(result.success[0])}))
"""


def test_first_auto_solve_answers_with_numpy_while_the_kernels_are_prepared(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("DIRECTION_UP_IK_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)  # a hang catcher: the script itself takes seconds
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"before": "cold", "during": "preparing", "backend": "numpy", "success": 1}


def test_kernel_state_does_not_wait_for_the_background_import_of_numba(monkeypatch):
    """While the background preparation imports the compiled package (numba: a second or more),
    kernel_state() answers "preparing" at once instead of waiting on that import's lock: the
    node's start-up (the collision scene asks it per chunk of sampled states) would stall."""
    from direction_up_ik.core import backend

    def importing(*_args):
        raise AssertionError("kernel_state() touched the compiled package while it is being imported")
    monkeypatch.setattr(backend, "compiled_module", importing)
    monkeypatch.setattr(backend, "_compiled", None)
    monkeypatch.setitem(sys.modules, "direction_up_ik.core.compiled", object())  # partly imported
    monkeypatch.setattr(backend._preparation, "state", backend.KERNELS_PREPARING)
    monkeypatch.delenv("DIRECTION_UP_IK_BACKEND", raising=False)
    assert backend.kernel_state() == backend.KERNELS_PREPARING


def test_a_stop_before_the_compile_child_starts_starts_none(monkeypatch):
    """stop_preparing() that comes while the background thread has not yet started its compile
    child (a server shut down within its first moments): no child is started afterwards, so
    none outlives the server; "auto" stays on numpy."""
    from direction_up_ik.core import backend

    class ColdCache:
        def cache_folder(self):
            return "/nonexistent"

        def cache_is_warm(self):
            return False

    started = []

    def no_child(*args, **_kwargs):
        started.append(args)
        raise OSError("no compile child in this test")
    monkeypatch.setattr(backend, "_usable_module", ColdCache)
    monkeypatch.setattr(backend.subprocess, "Popen", no_child)
    monkeypatch.setattr(backend, "_preparation", backend._Preparation())
    backend._preparation.state = backend.KERNELS_PREPARING  # as prepare_kernels() leaves it
    backend.stop_preparing()
    backend._prepare()
    assert started == []
    assert backend._preparation.state == backend.KERNELS_FAILED
    assert "stopped" in backend._preparation.error


def test_compile_children_import_this_package_whatever_their_working_folder(tmp_path, monkeypatch):
    """A compile child started from a folder holding another ``direction_up_ik`` (a source
    checkout beside an installed build) imports this process's package, not that one: a plain
    ``python -c`` child would take the other copy (checked here too, so the set-up is real),
    compile its kernels into its cache and leave this process to compile its own. Both
    children (the background precompile and the collision kernels' aside) are started so."""
    import direction_up_ik
    from direction_up_ik.core import backend, processes
    from direction_up_ik.core.compiled import api

    decoy = tmp_path / "direction_up_ik"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("DECOY = True\n", encoding="utf-8")
    show = "import direction_up_ik; print(direction_up_ik.__file__)"
    plain = subprocess.run([sys.executable, "-c", show], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == str(decoy / "__init__.py")
    ours = subprocess.run(processes.python_command(show), cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ours.stdout.strip() == direction_up_ik.__file__
    # the background precompile's own code, there (the decoy has no precompile module): it
    # loads the kernels this session made ready
    precompile = subprocess.run(processes.python_command(backend._PRECOMPILE_CODE), cwd=tmp_path,
                                capture_output=True, text=True, timeout=600)
    assert precompile.returncode == 0, precompile.stderr

    started = []

    def record(argv, **_kwargs):
        started.append(argv)
        raise OSError("recorded, not started")

    class ColdCache:
        def cache_folder(self):
            return str(tmp_path)

        def cache_is_warm(self):
            return False
    monkeypatch.setattr(backend, "_usable_module", ColdCache)
    monkeypatch.setattr(backend, "_preparation", backend._Preparation())
    monkeypatch.setattr(backend.subprocess, "Popen", record)
    backend._prepare()  # the background compile: its child fails to start here
    assert started == [processes.python_command(backend._PRECOMPILE_CODE)]
    monkeypatch.setattr(api.subprocess, "Popen", record)
    monkeypatch.setattr(api.collision_kernels, "cache_is_warm", lambda: False)
    monkeypatch.setattr(api, "cache_folder", lambda: str(tmp_path))
    monkeypatch.setattr(api.os, "cpu_count", lambda: 2)
    with pytest.raises(OSError, match="recorded"):
        api._compile_collision_aside()
    assert started[1][:2] == processes.python_command("")[:2]
    assert started[1][2].startswith(processes.python_command("")[2])


def test_the_package_root_keeps_symbolic_links(tmp_path):
    """Imported through a symbolic link (``colcon build --symlink-install`` links the sources
    into the build folder), the children's package folder is the linked one the process
    imported, not the link's target: numba keys its cache on the file paths as imported."""
    import direction_up_ik

    root = tmp_path / "build"
    root.mkdir()
    (root / "direction_up_ik").symlink_to(pathlib.Path(direction_up_ik.__file__).parent)
    show = "import sys; sys.path[0] = sys.argv[1]; from direction_up_ik.core import processes; print(processes.PACKAGE_ROOT)"
    run = subprocess.run([sys.executable, "-c", show, str(root)], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == str(root)

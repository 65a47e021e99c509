"""The search and the spec's solve of one candidate (one target, or one per arm) on kept arrays
(core/one_target.py, compiled.OneCandidate and OneSolve): the same answers as the general path,
its own result arrays, the general path's errors, and the requests it leaves to the general path."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

from direction_up_ik import DirectionUpTarget, robo_search_ik_direction_up, robo_solve_ik_direction_up_multi_batch
from direction_up_ik.core import batch as batch_module
from direction_up_ik.core import one_target
from direction_up_ik.core import search as search_module
from direction_up_ik.core import search_api
from direction_up_ik.core import build_problem, solve_problem
from direction_up_ik.core.errors import DirectionUpIKError
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS, solver_settings
from direction_up_ik.robots import load_robot
from helpers import mid_range, random_configurations

MPE = 0.03
#: The search's default solver settings (its local solves').
SETTINGS = solver_settings(max_position_error=MPE, **SEARCH_SOLVER_DEFAULTS)
pytest.importorskip("numba", reason="the one-target path runs the compiled kernels")


def _same_search(a, b) -> None:
    """Every field of two SearchResults but the wall time."""
    for field in ("joint_q", "success", "cost", "position_error", "direction_error", "up_error", "iterations"):
        np.testing.assert_array_equal(getattr(a.result, field), getattr(b.result, field), err_msg=field)
        assert getattr(a.result, field).dtype == getattr(b.result, field).dtype, field
        assert getattr(a.result, field).shape == getattr(b.result, field).shape, field
    for field in ("stop_reason", "best_index", "active_dof_ids", "device", "backend"):
        assert getattr(a.result, field) == getattr(b.result, field), field
    assert (a.rounds, a.timed_out, a.closest_pair) == (b.rounds, b.timed_out, b.closest_pair)
    for field in ("starts", "successes", "iterations", "clearance"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        assert getattr(a, field).dtype == getattr(b, field).dtype, field


def _same_result(a, b) -> None:
    """Every field of two IKBatchResults, dtypes and shapes included."""
    for field in ("joint_q", "success", "cost", "position_error", "direction_error", "up_error", "iterations"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        assert getattr(a, field).dtype == getattr(b, field).dtype, field
        assert getattr(a, field).shape == getattr(b, field).shape, field
    for field in ("stop_reason", "best_index", "active_dof_ids", "device", "backend"):
        assert getattr(a, field) == getattr(b, field), field


def _targets(robot, rng, n, ee, mode, tcp, ees=None, modes=None):
    """n one-target candidates for end effector ``ee`` at the poses of random in-limit states,
    in ``mode`` with the +Z/+Y (``tcp``) or the default +X/+Y local axes; with ``ees`` and
    ``modes`` (sequences) a target per end effector of ``ees`` in each candidate, in those modes."""
    ees, modes = (ee,) if ees is None else ees, (mode,) if modes is None else modes
    out = []
    for t in robot.tcp_transforms(random_configurations(robot, rng, n)):
        candidate = []
        for ee, mode in zip(ees, modes):
            rot, pos = t[ee, :3, :3], t[ee, :3, 3]
            direction = rot[:, 2] if tcp else rot[:, 0]
            local = (None, None) if tcp else ()
            if mode == "full":
                candidate.append(DirectionUpTarget(ee, pos, direction, rot[:, 1], *local))
            elif mode == "axis":
                candidate.append(DirectionUpTarget(ee, pos, direction, None, *local))
            else:
                candidate.append(DirectionUpTarget(ee, pos, None, None, *local))
        out.append(tuple(candidate))
    return out


class _Calls:
    """Counts the calls of ``module.name``: the general path's entry."""

    def __init__(self, monkeypatch, module, name):
        self.count = 0
        real = getattr(module, name)

        def counted(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)


def _search_calls(monkeypatch) -> _Calls:
    """Counts the searches that went the general way (``search.search_problem``)."""
    return _Calls(monkeypatch, search_module, "search_problem")


def _spec_calls(monkeypatch) -> _Calls:
    """Counts the spec solves that built their problem (the general path of
    ``robo_solve_ik_direction_up_multi_batch``)."""
    return _Calls(monkeypatch, batch_module, "build_problem")


def _general_and_fast(call, switch, calls: _Calls, monkeypatch, robot, candidates, **kwargs):
    """(the general path's answer, the one-candidate path's) of ``call`` (the search or the spec
    solve) with the path ``switch`` ((module, flag name)) off and on; asserts that the second
    took the one-candidate path (after a first request of its layout, which goes the general
    way, where the layout was not built yet)."""
    module, flag = switch
    monkeypatch.setattr(module, flag, False)
    general = call(robot, candidates, **kwargs)
    assert calls.count == 1
    monkeypatch.setattr(module, flag, True)
    call(robot, candidates, **kwargs)  # the layout's first request, maybe
    assert calls.count <= 2
    before = calls.count
    fast = call(robot, candidates, **kwargs)
    assert calls.count == before, "the one-candidate path was not taken"
    return general, fast


def _both_paths(robot, candidates, monkeypatch, **kwargs):
    """:func:`_general_and_fast` of the search."""
    return _general_and_fast(robo_search_ik_direction_up, (search_api, "ONE_TARGET_PATH"),
                             _search_calls(monkeypatch), monkeypatch, robot, candidates, **kwargs)


def _both_spec_paths(robot, candidates, monkeypatch, **kwargs):
    """:func:`_general_and_fast` of the spec's solve."""
    return _general_and_fast(robo_solve_ik_direction_up_multi_batch, (batch_module, "ONE_CANDIDATE_PATH"),
                             _spec_calls(monkeypatch), monkeypatch, robot, candidates, **kwargs)


@pytest.mark.parametrize("name, ee", [("panda_like", 0), ("ur5_like", 0), ("dual_arm_torso", 1)])
@pytest.mark.parametrize("mode, tcp", [("full", True), ("full", False), ("axis", True), ("position", False)])
def test_one_target_answers_equal_the_general_path(name, ee, mode, tcp, monkeypatch):
    """Random targets from a random start, rounds of seeds limited (max_rounds) and until
    success (a budget never reached): every field as the general path's, bit for bit."""
    robot = load_robot(name)
    rng = np.random.default_rng(27)
    robot.joint_q[:] = random_configurations(robot, rng, 1)[0]
    seeded = 0
    for kwargs in (dict(max_rounds=2), dict(time_budget=60.0)):
        for candidate in _targets(robot, rng, 12, ee, mode, tcp):
            general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE, **kwargs)
            _same_search(fast, general)
            seeded += fast.rounds > 1
    assert seeded > 0 or mode == "position"  # rounds of seeds ran too (position-only targets need none)


@pytest.mark.parametrize("ees, modes", [((0, 1), ("full", "full")), ((1, 0), ("axis", "full")),
                                         ((0, 1), ("position", "axis"))])
def test_one_candidate_of_both_arms_answers_equal_the_general_path(ees, modes, monkeypatch):
    """One candidate with a target per arm of the dual arm (the node's usual request), in
    either slot order and mixed modes, both local-axis conventions: every field as the general
    path's, bit for bit, for round 0 alone (num_seeds 0, the spec's local solve) and with
    rounds of seeds."""
    robot = load_robot("dual_arm_torso")
    rng = np.random.default_rng(31)
    robot.joint_q[:] = random_configurations(robot, rng, 1)[0]
    seeded = 0
    for tcp in (True, False):
        candidates = _targets(robot, rng, 10, None, None, tcp, ees=ees, modes=modes)  # both arms reach them
        for kwargs in (dict(num_seeds=0), dict(max_rounds=2), dict(time_budget=60.0)):
            for candidate in candidates:
                general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE, **kwargs)
                _same_search(fast, general)
                seeded += fast.rounds > 1
                if kwargs == dict(num_seeds=0):  # the spec's solve of the built problem
                    _same_result(fast.result, solve_problem(build_problem(robot, [candidate], settings=SETTINGS)))
    assert seeded > 0


@pytest.mark.parametrize("name, ee", [("ur5_like", 0), ("dual_arm_torso", 1)])
def test_limit_centre_searches_answer_as_the_general_path(name, ee, monkeypatch):
    """``selection="limit_center"`` (the ur5 group's in its kinematics.yaml): several successes
    asked for, so the rule chooses; the ur5's joints turn by whole turns towards their limit
    centres, not towards the start. Every field as the general path's, bit for bit, and the
    rule changed some answers against least motion."""
    robot = load_robot(name)
    rng = np.random.default_rng(41)
    robot.joint_q[:] = random_configurations(robot, rng, 1)[0]
    differs = 0
    for kwargs in (dict(max_rounds=3, min_successes=3), dict(time_budget=60.0, min_successes=2)):
        for candidate in _targets(robot, rng, 10, ee, "full", True):
            general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE,
                                        selection="limit_center", **kwargs)
            _same_search(fast, general)
            motion = robo_search_ik_direction_up(robot, [candidate], max_position_error=MPE, **kwargs)
            differs += not np.array_equal(motion.result.joint_q, fast.result.joint_q)
    assert differs > 0


def test_an_end_effector_named_twice_raises_on_both_paths(monkeypatch):
    robot = load_robot("dual_arm_torso")
    robot.joint_q[:] = mid_range(robot)
    (target,), = _targets(robot, np.random.default_rng(2), 1, 0, "full", True)
    errors = []
    for path in (False, True):
        monkeypatch.setattr(search_api, "ONE_TARGET_PATH", path)
        with pytest.raises(DirectionUpIKError) as info:
            robo_search_ik_direction_up(robot, [(target, target)], max_position_error=MPE, max_rounds=1)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_the_benchmark_cells_answer_alike_on_many_targets(monkeypatch):
    """The peer benchmark's call (4 seeds; a budget never reached here) on 150 targets per
    bundled arm and start (mid-range, random): the same answers on both paths."""
    for name in ("panda_like", "ur5_like"):
        robot = load_robot(name)
        rng = np.random.default_rng(2027)
        candidates = _targets(robot, rng, 150, 0, "full", True)
        for start in (mid_range(robot), random_configurations(robot, rng, 1)[0]):
            robot.joint_q[:] = start
            for candidate in candidates:
                general, fast = _both_paths(robot, (candidate,), monkeypatch, max_position_error=MPE,
                                            num_seeds=4, time_budget=60.0)
                _same_search(fast, general)


def test_results_are_the_callers_own(panda):
    """The kept arrays serve the next call: an earlier result does not change, and writing to
    a result changes no later one."""
    rng = np.random.default_rng(3)
    panda.joint_q[:] = mid_range(panda)
    first_target, second_target = _targets(panda, rng, 2, 0, "full", True)
    robo_search_ik_direction_up(panda, [second_target], max_position_error=MPE, max_rounds=2)  # its layout's first
    first = robo_search_ik_direction_up(panda, [first_target], max_position_error=MPE, max_rounds=2)
    kept = {name: np.copy(getattr(first.result, name)) for name in ("joint_q", "success", "cost",
                                                                     "position_error", "iterations")}
    starts = first.starts.copy()
    robo_search_ik_direction_up(panda, [second_target], max_position_error=MPE, max_rounds=2)
    for name, value in kept.items():
        np.testing.assert_array_equal(getattr(first.result, name), value, err_msg=name)
    np.testing.assert_array_equal(first.starts, starts)
    first.result.joint_q[:] = 0.0
    again = robo_search_ik_direction_up(panda, [first_target], max_position_error=MPE, max_rounds=2)
    np.testing.assert_array_equal(again.result.joint_q, kept["joint_q"])


#: The one-candidate paths' entry points: (the call, the switch of its path, its keywords).
_ENTRIES = {"search": (robo_search_ik_direction_up, (search_api, "ONE_TARGET_PATH"),
                       dict(max_position_error=MPE, num_seeds=4, time_budget=0.5)),
            "spec": (robo_solve_ik_direction_up_multi_batch, (batch_module, "ONE_CANDIDATE_PATH"),
                     dict(max_position_error=MPE))}
_BAD_CASES = ("ee_id", "ee_twice", "start_outside", "start_nan", "num_seeds", "device", "settings",
              "empty_candidate", "overflow")


@pytest.mark.parametrize("entry, case", [(entry, case) for entry in _ENTRIES for case in _BAD_CASES
                                         if (entry, case) != ("spec", "num_seeds")])
def test_bad_requests_raise_what_the_general_path_raises(panda, entry, case, monkeypatch):
    """After a layout exists: the same error, type and message, on both paths (a numerical
    failure too: the one-candidate path hands it to the general one)."""
    from direction_up_ik.core.errors import NumericalFailure
    call, (module, flag), kwargs = _ENTRIES[entry]
    kwargs = dict(kwargs)
    goal = panda.tcp_transforms(mid_range(panda))[0]
    target = DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None)
    candidates = [(target,)]
    panda.joint_q[:] = mid_range(panda)
    for _ in range(2):  # the layout's first request goes the general way, the second builds it
        call(panda, candidates, **kwargs)
    assert one_target._layouts(panda)  # the layout exists: its checks run
    if case == "ee_id":
        candidates = [(DirectionUpTarget(3, goal[:3, 3], None, None),)]
    elif case == "ee_twice":
        candidates = [(target, target)]
    elif case == "start_outside":
        panda.joint_q[0] = panda.upper_limits[0] + 0.5
    elif case == "start_nan":
        panda.joint_q[1] = np.nan
    elif case == "num_seeds":
        kwargs["num_seeds"] = -1
    elif case == "device":
        kwargs["device"] = "cuda"
    elif case == "settings":
        kwargs["max_iters"] = 0
    elif case == "empty_candidate":
        candidates = [()]
    else:  # a target at 1.7e308 m: the weighted residual overflows
        candidates = [(DirectionUpTarget(0, (1.7e308, 0.0, 0.0), goal[:3, 2], goal[:3, 1], None, None),)]
        kwargs["position_weight"] = 4.0
    errors = []
    for path in (False, True):
        monkeypatch.setattr(module, flag, path)
        with pytest.raises((DirectionUpIKError, NumericalFailure)) as info:
            call(panda, candidates, **kwargs)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_a_start_one_float32_step_beyond_a_limit_is_left_to_the_general_path(panda, monkeypatch):
    """The general path accepts a float32 state one step beyond a float64 limit (the panda's
    default state: joint 4 clipped to its upper limit -0.0698 in float32); so does a search of
    one target, through the general path."""
    assert panda.joint_q[3] > panda.upper_limits[3]
    goal = panda.tcp_transforms(mid_range(panda))[0]
    candidates = [(DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None),)]
    calls = _search_calls(monkeypatch)
    found = robo_search_ik_direction_up(panda, candidates, max_position_error=MPE, max_rounds=1)
    assert calls.count == 1 and found.result.success[0] == 1
    panda.joint_q[:] = mid_range(panda)
    robo_search_ik_direction_up(panda, candidates, max_position_error=MPE, max_rounds=1)
    assert calls.count == 1  # inside the limits: the one-target path


def test_requests_it_does_not_cover_take_the_general_path(panda, monkeypatch):
    panda.joint_q[:] = mid_range(panda)
    goal = panda.tcp_transforms(mid_range(panda))[0]
    target = DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None)
    explicit = DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], (0, 0, 1), (0, 1, 0))
    calls = _search_calls(monkeypatch)
    kwargs = dict(max_position_error=MPE, max_rounds=1)
    robo_search_ik_direction_up(panda, [(target,)], **kwargs)  # its layout's first request: general
    assert calls.count == 1
    robo_search_ik_direction_up(panda, [(target,)], **kwargs)
    robo_search_ik_direction_up(panda, [(target,)], **kwargs)
    assert calls.count == 1
    robo_search_ik_direction_up(panda, [(target,), (target,)], **kwargs)  # two candidates
    robo_search_ik_direction_up(panda, [(explicit,)], **kwargs)  # explicit local axes
    robo_search_ik_direction_up(panda, [(target,)], seeding="random", **kwargs)
    robo_search_ik_direction_up(panda, [(target,)], accept=lambda i, q: True, **kwargs)
    robo_search_ik_direction_up(panda, [(target,)], active_dof_ids=np.arange(4), **kwargs)  # not a tuple of ints
    robo_search_ik_direction_up(panda, [(target,)], root_world_xform=np.eye(4), **kwargs)
    assert calls.count == 7
    monkeypatch.setenv("DIRECTION_UP_IK_BACKEND", "numpy")
    found = robo_search_ik_direction_up(panda, [(target,)], **kwargs)
    assert calls.count == 8 and found.result.backend == "numpy"


def test_a_new_root_transform_or_limits_rebuild_the_layout(ur5, monkeypatch):
    """The layout is kept per robot arrays: after the robot's root transform changes, the
    answers follow it (the same as the general path's)."""
    rng = np.random.default_rng(5)
    candidates = _targets(ur5, rng, 3, 0, "full", True)
    robo_search_ik_direction_up(ur5, candidates[0:1], max_position_error=MPE, max_rounds=1)
    moved = np.eye(4)
    moved[:3, 3] = (0.05, -0.02, 0.1)
    ur5.root_world_xform = moved
    for candidate in candidates:
        general, fast = _both_paths(ur5, [candidate], monkeypatch, max_position_error=MPE, max_rounds=2)
        _same_search(fast, general)


def test_threads_search_on_arrays_of_their_own(ur5):
    """Searches in two threads at once (each with its own kept arrays) answer as one after
    another."""
    rng = np.random.default_rng(11)
    ur5.joint_q[:] = mid_range(ur5)
    candidates = _targets(ur5, rng, 40, 0, "full", True)
    kwargs = dict(max_position_error=MPE, num_seeds=4, max_rounds=3)
    serial = [robo_search_ik_direction_up(ur5, [c], **kwargs) for c in candidates]
    found = {}

    def work(part):
        for i in part:
            found[i] = robo_search_ik_direction_up(ur5, [candidates[i]], **kwargs)
    threads = [threading.Thread(target=work, args=(range(k, len(candidates), 2),)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120.0)
    assert sorted(found) == list(range(len(candidates)))
    for i, one in enumerate(serial):
        _same_search(found[i], one)


def test_kept_layouts_do_not_keep_a_robot_alive_nor_outlive_it():
    robot = load_robot("panda_like")
    robot.joint_q[:] = mid_range(robot)
    goal = robot.tcp_transforms(mid_range(robot))[0]
    for _ in range(2):  # the second request builds the layout
        robo_search_ik_direction_up(robot, [(DirectionUpTarget(0, goal[:3, 3], None, None),)],
                                    max_position_error=MPE, max_rounds=1)
    layouts = one_target._layouts(robot)
    assert any(layout is not None for layout in layouts.values())  # a layout was kept
    gone = weakref.ref(robot)
    layout_gone = weakref.ref(next(layout for layout in layouts.values() if layout is not None))
    del robot, layouts
    gc.collect()
    assert gone() is None
    assert layout_gone() is None  # its arrays (the seed library's among them) go with the robot


def test_it_compiles_no_other_kernel_signature(panda):
    """The kept arrays have the types of the general path's: it calls the compiled kernels the
    entry points call, for their signatures (no compile of another one)."""
    from direction_up_ik.core.compiled.iteration import run_serial, solve_rows
    from direction_up_ik.core.compiled.search_rounds import run_search, search_rows
    rng = np.random.default_rng(4)
    panda.joint_q[:] = random_configurations(panda, rng, 1)[0]
    candidates = _targets(panda, rng, 10, 0, "full", True)
    for candidate in candidates:  # the general path first: its signatures exist
        robo_search_ik_direction_up(panda, [candidate, candidate], max_position_error=MPE, max_rounds=2)
    kernels = (run_serial, run_search, solve_rows, search_rows)
    before = [len(k.signatures) for k in kernels]
    found = [robo_search_ik_direction_up(panda, [c], max_position_error=MPE, max_rounds=2) for c in candidates]
    assert any(f.rounds > 1 for f in found)  # both kernels ran
    assert [len(k.signatures) for k in kernels] == before
    for layout in one_target._layouts(panda).values():
        assert layout.kernel.solve is not solve_rows and layout.kernel.rounds is not search_rows


def test_a_layouts_first_seeded_call_types_no_arguments(panda, monkeypatch):
    """A layout finds its compiled kernels when it is built, outside any call's time budget: its
    first call that needs rounds of seeds types no arguments (that took milliseconds, a 5 ms
    budget's worth)."""
    from direction_up_ik.core.compiled import api
    rng = np.random.default_rng(6)
    panda.joint_q[:] = random_configurations(panda, rng, 1)[0]
    candidates = _targets(panda, rng, 30, 0, "full", True)
    for _ in range(2):  # the second request builds the layout
        robo_search_ik_direction_up(panda, [candidates[0]], max_position_error=MPE, num_seeds=0)

    def typed(*args):
        raise AssertionError("a call typed its arguments")
    monkeypatch.setattr(api, "compiled_overload", typed)
    found = [robo_search_ik_direction_up(panda, [c], max_position_error=MPE, max_rounds=2) for c in candidates]
    assert any(f.rounds > 1 for f in found)


def test_its_kept_scratch_needs_no_initial_values(panda, monkeypatch):
    """The one-target path reuses its kernels' scratch between calls, where the entry points
    allocate it (the blocks' zeroed): with every scratch value NaN, True or -1 before each
    call the answers are still the general path's (a kernel reading scratch it did not write
    would differ)."""
    rng = np.random.default_rng(11)
    panda.joint_q[:] = random_configurations(panda, rng, 1)[0]
    candidates = _targets(panda, rng, 40, 0, "full", True)
    seeded = 0
    for candidate in candidates:
        for layout in one_target._layouts(panda).values():
            kernel = layout.kernel
            scratch = list(kernel.work)
            for args in kernel._rounds_args.values():  # the rows of seeds share the local axes
                scratch += [x for part in (args[4],) + args[7:] for x in part
                            if x is not kernel.targets.local_direction and x is not kernel.targets.local_up]
            for x in scratch:
                x[...] = np.nan if x.dtype.kind == "f" else (True if x.dtype.kind == "b" else -1)
        general, fast = _both_paths(panda, [candidate], monkeypatch, max_position_error=MPE, max_rounds=3)
        _same_search(fast, general)
        seeded += fast.rounds > 1
    assert seeded > 5  # the rounds' scratch was reused too


def test_rounds_that_use_up_the_library_go_on_with_random_draws(monkeypatch):
    """Timed rounds without a round limit use up a (6-state) library: the one-target path goes
    on with the general path's random draws from its rounds, as the general path does."""
    from direction_up_ik.core import seeds
    robot = load_robot("panda_like")  # fresh: its library is built with 6 states
    robot.joint_q[:] = mid_range(robot)
    monkeypatch.setattr(seeds, "LIBRARY_SIZE", 6)
    monkeypatch.setattr(search_module, "LIBRARY_SIZE", 6)
    monkeypatch.setattr(search_api, "LIBRARY_SIZE", 6)
    rng = np.random.default_rng(4)
    resumed = 0
    for candidate in _targets(robot, rng, 30, 0, "full", True):
        general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE, num_seeds=2,
                                    time_budget=60.0)
        _same_search(fast, general)
        resumed += fast.rounds > 4  # past the library's 3 rounds
    assert resumed > 0


def test_seed_arrays_of_another_feature_width_are_refused(panda):
    """The kernel writes the targets' query features into the kept query row: seed arrays whose
    query has another width (the features of another constraint pattern) are refused."""
    from direction_up_ik.core.compiled import api
    goal = panda.tcp_transforms(mid_range(panda))[0]
    panda.joint_q[:] = mid_range(panda)
    candidates = [(DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None),)]
    problem = build_problem(panda, candidates, None, "cpu", None, SETTINGS)
    arrays = search_api._one_target_seed_arrays(problem)
    api.OneCandidate(problem, (1e6, 0.3), arrays)  # 9 features: accepted
    arrays = dict(arrays, query=arrays["query"][:, :3].copy())
    with pytest.raises(ValueError, match="seed query features: 3 columns, the targets have 9"):
        api.OneCandidate(problem, (1e6, 0.3), arrays)


# ------------------------------------------------------------------ the spec's solve of one candidate
#: Settings of the spec solve compared on both paths: the spec's defaults, few iterations
#: (max_iters stops), and the search's local-solve settings (analytic, stall, nearest turn).
SPEC_CASES = (dict(), dict(max_iters=3, max_step_norm=0.1), dict(SEARCH_SOLVER_DEFAULTS, damping=0.01))


@pytest.mark.parametrize("name, ee", [("panda_like", 0), ("ur5_like", 0), ("dual_arm_torso", 1)])
@pytest.mark.parametrize("mode, tcp", [("full", True), ("full", False), ("axis", True), ("position", False)])
def test_the_spec_solve_of_one_candidate_equals_the_general_path(name, ee, mode, tcp, monkeypatch):
    """Random targets from random starts, with the spec's settings and others: every field of
    the result as the general path's (the built problem's solve), bit for bit; reasons other
    than convergence among them."""
    robot = load_robot(name)
    rng = np.random.default_rng(28)
    reasons = set()
    for settings in SPEC_CASES:
        robot.joint_q[:] = random_configurations(robot, rng, 1)[0]
        for candidate in _targets(robot, rng, 10, ee, mode, tcp):
            general, fast = _both_spec_paths(robot, [candidate], monkeypatch, max_position_error=MPE, **settings)
            _same_result(fast, general)
            reasons.add(fast.stop_reason[0])
    assert "converged" in reasons and len(reasons) > 1, reasons


def test_the_spec_solve_of_both_arms_equals_the_general_path(monkeypatch):
    """One candidate with a target per arm, either slot order, mixed modes and both local-axis
    conventions, from the middle of the limits and from random states."""
    robot = load_robot("dual_arm_torso")
    rng = np.random.default_rng(32)
    solved = 0
    for ees, modes in (((0, 1), ("full", "full")), ((1, 0), ("axis", "full")), ((0, 1), ("position", "axis"))):
        for tcp in (True, False):
            for start in (mid_range(robot), random_configurations(robot, rng, 1)[0]):
                robot.joint_q[:] = start
                for candidate in _targets(robot, rng, 6, None, None, tcp, ees=ees, modes=modes):
                    general, fast = _both_spec_paths(robot, [candidate], monkeypatch, max_position_error=MPE)
                    _same_result(fast, general)
                    solved += int(fast.success[0])
    assert solved > 10


def test_the_spec_solve_keeps_no_seed_library():
    """The spec's solve of one candidate keeps only its solve's arrays (``OneSolve``): no seed
    library is built for it, and a search of the same request keeps a layout of its own."""
    from direction_up_ik.core.compiled import api
    robot = load_robot("panda_like")
    robot.joint_q[:] = mid_range(robot)
    candidate, = _targets(robot, np.random.default_rng(8), 1, 0, "full", True)
    for _ in range(2):  # the second request builds the layout
        robo_solve_ik_direction_up_multi_batch(robot, [candidate], max_position_error=MPE)
    layouts = list(one_target._layouts(robot).values())
    assert len(layouts) == 1 and type(layouts[0].kernel) is api.OneSolve and layouts[0].library_size == 0
    from direction_up_ik.core import seeds
    assert seeds._libraries[False].get(robot) is None  # no library built for this robot
    for _ in range(2):
        robo_search_ik_direction_up(robot, [candidate], max_position_error=MPE, **SEARCH_SOLVER_DEFAULTS,
                                    max_rounds=1)
    kinds = sorted(type(layout.kernel).__name__ for layout in one_target._layouts(robot).values())
    assert kinds == ["OneCandidate", "OneSolve"]


def test_spec_results_are_the_callers_own(panda):
    rng = np.random.default_rng(9)
    panda.joint_q[:] = mid_range(panda)
    first_target, second_target = _targets(panda, rng, 2, 0, "full", True)
    robo_solve_ik_direction_up_multi_batch(panda, [second_target], max_position_error=MPE)  # its layout's first
    first = robo_solve_ik_direction_up_multi_batch(panda, [first_target], max_position_error=MPE)
    kept = {name: np.copy(getattr(first, name)) for name in ("joint_q", "success", "cost", "position_error",
                                                             "iterations")}
    robo_solve_ik_direction_up_multi_batch(panda, [second_target], max_position_error=MPE)
    for name, value in kept.items():
        np.testing.assert_array_equal(getattr(first, name), value, err_msg=name)


def test_spec_requests_it_does_not_cover_take_the_general_path(panda, monkeypatch):
    panda.joint_q[:] = mid_range(panda)
    goal = panda.tcp_transforms(mid_range(panda))[0]
    target = DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None)
    explicit = DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], (0, 0, 1), (0, 1, 0))
    calls = _spec_calls(monkeypatch)
    solve = robo_solve_ik_direction_up_multi_batch
    solve(panda, [(target,)], max_position_error=MPE)  # its layout's first request: general
    solve(panda, [(target,)], max_position_error=MPE)
    solve(panda, [(target,)], max_position_error=MPE)
    assert calls.count == 1
    solve(panda, [(target,), (target,)], max_position_error=MPE)  # two candidates
    solve(panda, [(explicit,)], max_position_error=MPE)  # explicit local axes
    solve(panda, [(target,)], np.arange(4), max_position_error=MPE)  # active joints, not a tuple of ints
    solve(panda, [(target,)], max_position_error=MPE, root_world_xform=np.eye(4))
    solve(panda, [(target,)], max_position_error=MPE, backend="numba")
    assert solve(panda, [(target,)], max_position_error=MPE, backend="numpy").backend == "numpy"
    assert calls.count == 7
    monkeypatch.setenv("DIRECTION_UP_IK_BACKEND", "numpy")
    assert solve(panda, [(target,)], max_position_error=MPE).backend == "numpy"
    assert calls.count == 8


def test_the_spec_solves_kept_scratch_needs_no_initial_values(ur5, monkeypatch):
    """With every value of the kept state and scratch NaN, True or -1 before each call, the
    answers are still the general path's."""
    rng = np.random.default_rng(12)
    ur5.joint_q[:] = random_configurations(ur5, rng, 1)[0]
    for candidate in _targets(ur5, rng, 30, 0, "full", True):
        for layout in one_target._layouts(ur5).values():
            state = layout.kernel.state  # its relay inputs (no relay: zeros) stay
            for x in list(layout.kernel.work) + [v for v in state if v is not state.group and v is not state.quota]:
                x[...] = np.nan if x.dtype.kind == "f" else (True if x.dtype.kind == "b" else -1)
        general, fast = _both_spec_paths(ur5, [candidate], monkeypatch, max_position_error=MPE)
        _same_result(fast, general)


def test_a_layout_is_built_on_its_second_request(ur5, monkeypatch):
    """A layout's first request goes the general way and its second builds it, so that settings
    made afresh for every call (each a layout key of its own) never pay for building one; keys
    asked for once make way for built layouts when the cache is full."""
    from direction_up_ik.core import settings as settings_module
    # An empty memo of settings: full, it is cleared, and equal keywords then give another object
    # (another layout key) -- as they may in a long-running process.
    monkeypatch.setattr(settings_module, "_CACHE", {})
    ur5.joint_q[:] = mid_range(ur5)
    candidates = _targets(ur5, np.random.default_rng(13), 40, 0, "full", True)
    calls = _spec_calls(monkeypatch)
    for i, candidate in enumerate(candidates[:30]):  # new settings every call
        robo_solve_ik_direction_up_multi_batch(ur5, [candidate], max_position_error=MPE + 1e-6 * (i + 1))
    assert calls.count == 30
    layouts = one_target._layouts(ur5)
    assert 0 < len(layouts) <= one_target.MAX_LAYOUTS and all(v is None for v in layouts.values())
    robo_solve_ik_direction_up_multi_batch(ur5, [candidates[30]], max_position_error=MPE)
    robo_solve_ik_direction_up_multi_batch(ur5, [candidates[31]], max_position_error=MPE)
    assert calls.count == 31  # the first request of its key; the second built its layout
    for candidate in candidates[32:]:
        robo_solve_ik_direction_up_multi_batch(ur5, [candidate], max_position_error=MPE)
    assert calls.count == 31
    for i, candidate in enumerate(candidates[:30]):  # keys asked for once fill the cache again
        robo_solve_ik_direction_up_multi_batch(ur5, [candidate], max_position_error=0.04 + 1e-6 * (i + 1))
    built = [v for v in one_target._layouts(ur5).values() if v is not None]
    assert len(built) == 1  # kept: the keys asked for once went first
    assert calls.count == 61
    robo_solve_ik_direction_up_multi_batch(ur5, [candidates[0]], max_position_error=MPE)
    assert calls.count == 61  # its layout still served it


def test_overloads_are_found_once_per_argument_types(panda):
    """``compiled_overload`` keeps what it found per type key: arrays differing in dtype,
    dimensions, layout or writability have other keys; a new layout's arguments of the same
    types get numba's own overload for them without typing them again."""
    from direction_up_ik.core.compiled import api
    from direction_up_ik.core.compiled.iteration import solve_rows
    a = np.zeros((2, 3))
    frozen = a.copy()
    frozen.flags.writeable = False
    variants = (a, a.astype(np.float32), a[None], np.asfortranarray(np.zeros((3, 2))), a[:, ::2], frozen,
                np.zeros((2, 3)).view(np.matrix))
    assert len({api._type_key(x) for x in variants}) == len(variants)
    assert api._type_key(np.ones((5, 7))) == api._type_key(a)
    assert api._type_key((a, 1, 2.0, True)) != api._type_key((a, 1, 2.0, 1))
    assert api._type_key(2 ** 63) != api._type_key(1)
    panda.joint_q[:] = mid_range(panda)
    candidates = _targets(panda, np.random.default_rng(14), 3, 0, "full", True)
    for candidate in candidates:  # the second request builds the layout
        robo_solve_ik_direction_up_multi_batch(panda, [candidate], max_position_error=MPE)
    kernel = next(layout.kernel for layout in one_target._layouts(panda).values() if layout is not None)
    args = (kernel.model, kernel.targets, kernel.config, kernel.state, kernel.work, False, 0)
    typed = solve_rows.get_overload(tuple(solve_rows.typeof_pyval(x) for x in args))
    assert kernel.solve is typed and api.compiled_overload(solve_rows, *args) is typed


def test_a_collision_search_of_one_candidate_equals_the_general_path(monkeypatch):
    """With a collision scene the one-candidate path searches on its kept arrays, checks the
    answer and, where it collides, searches again on the built problem (as the general path's
    collision search does after its first search): every field as the general path's, the
    clearance and closest pair included, with and without colliding first answers."""
    from direction_up_ik import CollisionScene, Obstacle
    from direction_up_ik.core.rotations import make_transform
    from direction_up_ik.robots import bundled_robot
    robot = load_robot("dual_arm_torso")
    table = Obstacle.box((0.8, 1.2, 0.04), make_transform(np.eye(3), (0.85, 0.0, 0.68)), name="table")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(), obstacles=[table])
    rng = np.random.default_rng(33)
    collided = free = 0
    for start in (mid_range(robot), random_configurations(robot, rng, 1)[0]):
        robot.joint_q[:] = start
        for candidate in _targets(robot, rng, 12, None, None, True, ees=(0, 1), modes=("full", "full")):
            plain = robo_search_ik_direction_up(robot, [candidate], max_position_error=MPE, max_rounds=3)
            first_collides = bool(plain.result.success[0]) and not scene.check(plain.result.joint_q).collision_free[0]
            collided += first_collides
            free += not first_collides
            general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE, max_rounds=3,
                                        collision_scene=scene)
            _same_search(fast, general)
    assert collided > 0 and free > 0, (collided, free)


def test_a_collision_search_with_a_scene_of_another_robot_raises_on_both_paths(monkeypatch):
    from direction_up_ik import CollisionScene, InputValidationError
    from direction_up_ik.robots import bundled_robot
    panda, ur5 = load_robot("panda_like"), load_robot("ur5_like")
    panda.joint_q[:] = mid_range(panda)
    scene = CollisionScene.from_urdf(ur5, bundled_robot("ur5_like").urdf_path())
    candidate, = _targets(panda, np.random.default_rng(15), 1, 0, "full", True)
    for _ in range(2):  # the layout exists
        robo_search_ik_direction_up(panda, [candidate], max_position_error=MPE, max_rounds=1)
    errors = []
    for path in (False, True):
        monkeypatch.setattr(search_api, "ONE_TARGET_PATH", path)
        with pytest.raises(InputValidationError) as info:
            robo_search_ik_direction_up(panda, [candidate], max_position_error=MPE, max_rounds=1,
                                        collision_scene=scene)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "collision_scene" in errors[0]


@pytest.mark.parametrize("name, ee, active", [("panda_like", 0, [0, 1, 2, 3, 4, 5]),
                                              ("dual_arm_torso", 1, tuple(range(2, 16)))])
def test_active_joint_subsets_take_the_one_candidate_path(name, ee, active, monkeypatch):
    """A subset of active joints (a list or tuple of ints; the dual arm without its lift and
    waist, as a node's ``active_joints`` keeps the torso still): the spec's solve and the search
    answer as the general path, field by field; after a joint the subset leaves alone moves, the
    search's layout (whose library depends on that joint) is built anew and still answers alike."""
    robot = load_robot(name)
    rng = np.random.default_rng(34)
    robot.joint_q[:] = random_configurations(robot, rng, 1)[0]
    candidates = _targets(robot, rng, 8, ee, "full", True)
    fixed = sorted(set(range(robot.num_dofs)) - set(active))[0]
    for step, candidate in enumerate(candidates):
        if step == 4:  # a joint outside the subset moves: the search's library is another
            lo, hi = robot.lower_limits[fixed], robot.upper_limits[fixed]
            robot.joint_q[fixed] = lo + 0.3 * (hi - lo)
        general, fast = _both_spec_paths(robot, [candidate], monkeypatch, max_position_error=MPE,
                                         active_dof_ids=active)
        _same_result(fast, general)
        assert fast.active_dof_ids == tuple(active)
        general, fast = _both_paths(robot, [candidate], monkeypatch, max_position_error=MPE, max_rounds=2,
                                    active_dof_ids=active)
        _same_search(fast, general)
    kinds = sorted(type(layout.kernel).__name__ for layout in one_target._layouts(robot).values() if layout)
    assert kinds == ["OneCandidate", "OneSolve"]


@pytest.mark.parametrize("active", [(0, 0, 1), (0, 9), (True, 1), (0.0, 1)])
def test_bad_active_joints_raise_what_the_general_path_raises(panda, active, monkeypatch):
    panda.joint_q[:] = mid_range(panda)
    candidate, = _targets(panda, np.random.default_rng(16), 1, 0, "full", True)
    for _ in range(2):  # a layout of a valid subset exists
        robo_solve_ik_direction_up_multi_batch(panda, [candidate], (0, 1), max_position_error=MPE)
    errors = []
    for path in (False, True):
        monkeypatch.setattr(batch_module, "ONE_CANDIDATE_PATH", path)
        for _ in range(2):  # a first request, then one that would build a layout
            with pytest.raises(DirectionUpIKError) as info:
                robo_solve_ik_direction_up_multi_batch(panda, [candidate], active, max_position_error=MPE)
            errors.append((type(info.value), str(info.value)))
    assert len(set(errors)) == 1 and "active_dof_ids" in errors[0][1]

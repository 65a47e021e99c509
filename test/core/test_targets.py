import numpy as np
import pytest

from direction_up_ik import (DirectionUpTarget, DirectionValidationError, InputTypeError,
                             InputValidationError, LocalAxisConfigurationError)


def test_both_local_axes_omitted_means_plus_x_and_plus_y():
    t = DirectionUpTarget(0, (0, 0, 0), (0, 0, 1), (1, 0, 0))
    np.testing.assert_array_equal(t.local_direction, [1, 0, 0])
    np.testing.assert_array_equal(t.local_up, [0, 1, 0])
    assert not t.uses_tcp_convention
    # local +X -> world +Z and local +Y -> world +X
    r = t.rotation_world
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(r @ [0, 1, 0], [1, 0, 0], atol=1e-15)


def test_both_none_selects_the_full_tcp_convention_spec_example():
    # Spec section 2 example: +Z -> world +X, +Y -> world +Z, hence +X -> world +Y.
    t = DirectionUpTarget(0, (0.45, -0.2, 0.75), (1, 0, 0), (0, 0, 1), None, None)
    assert t.uses_tcp_convention
    r = t.rotation_world
    np.testing.assert_allclose(r @ [0, 0, 1], [1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(r @ [0, 1, 0], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-15)
    assert np.linalg.det(r) == pytest.approx(1.0)


def test_explicit_local_vectors_are_used():
    t = DirectionUpTarget(1, (0, 0, 0), (0, 1, 0), (0, 0, 1), local_direction=(0, 0, -1),
                          local_up=(1, 0, 0))
    r = t.rotation_world
    np.testing.assert_allclose(r @ [0, 0, -1], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 0, 1], atol=1e-15)


def test_lengths_never_change_the_target_and_up_is_projected():
    a = DirectionUpTarget(0, (0, 0, 0), (2, 0, 0), (1, 5, 0), None, None)
    b = DirectionUpTarget(0, (0, 0, 0), (1e-200, 0, 0), (0, 1e300, 0), None, None)
    np.testing.assert_allclose(a.direction_world, [1, 0, 0])
    np.testing.assert_allclose(a.up_world, [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(a.rotation_world, b.rotation_world, atol=1e-15)


def test_exactly_one_local_none_is_a_local_axis_error():
    with pytest.raises(LocalAxisConfigurationError, match="local_direction/local_up: .*exactly one"):
        DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), (0, 0, 1), local_direction=None)
    with pytest.raises(ValueError, match="both as None"):
        DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), (0, 0, 1), (0, 0, 1), None)


@pytest.mark.parametrize("field,kwargs,pattern", [
    ("position_world", dict(position_world=(0, np.nan, 0)), "position_world: every component must be finite"),
    ("direction_world", dict(direction_world=(np.inf, 0, 0)), "direction_world: every component must be finite"),
    ("direction_world", dict(direction_world=(0, 0, 0)), "direction_world: must be a non-zero vector"),
    ("up_world", dict(up_world=(0.0, -0.0, 0.0)), "up_world: must be a non-zero vector"),
    ("pair", dict(direction_world=(1, 0, 0), up_world=(-3, 0, 0)),
     "direction_world/up_world: Direction and Up must not be parallel"),
    ("pair", dict(direction_world=(1, 1e-9, 0), up_world=(1, 0, 0)), "must not be parallel"),
    ("local", dict(local_direction=(0, 1, 0), local_up=(0, 2, 0)),
     "local_direction/local_up: Direction and Up must not be parallel"),
    ("local", dict(local_direction=(0, 0, 0), local_up=(0, 1, 0)), "local_direction: must be a non-zero"),
])
def test_direction_validation_errors_name_the_field_and_rule(field, kwargs, pattern):
    args = dict(ee_id=0, position_world=(0, 0, 0), direction_world=(1, 0, 0), up_world=(0, 0, 1))
    args.update(kwargs)
    with pytest.raises(DirectionValidationError, match=pattern):
        DirectionUpTarget(**args)


@pytest.mark.parametrize("kwargs,pattern", [
    (dict(position_world="abc"), "position_world: expected a 3-sequence"),
    (dict(position_world=(1, 2)), "position_world: expected 3 components, got 2"),
    (dict(direction_world=(1, "x", 0)), "direction_world: components must be real numbers"),
    (dict(up_world=(True, 0, 0)), "up_world: components must be real numbers"),
    (dict(up_world=5.0), "up_world: expected a 3-sequence"),
    (dict(ee_id=1.0), "ee_id: must be an integer"),
    (dict(ee_id=True), "ee_id: must be an integer"),
])
def test_wrong_types_raise_a_type_error_that_is_also_a_validation_error(kwargs, pattern):
    args = dict(ee_id=0, position_world=(0, 0, 0), direction_world=(1, 0, 0), up_world=(0, 0, 1))
    args.update(kwargs)
    with pytest.raises(InputTypeError, match=pattern) as info:
        DirectionUpTarget(**args)
    assert isinstance(info.value, TypeError) and isinstance(info.value, InputValidationError)


def test_negative_ee_id_rejected():
    with pytest.raises(InputValidationError, match="ee_id: must be >= 0"):
        DirectionUpTarget(-1, (0, 0, 0), (1, 0, 0), (0, 0, 1))


def test_modes_axis_and_position_only():
    axis = DirectionUpTarget(0, (0, 0, 0), (0, 0, 2), None)
    assert axis.mode == "axis" and axis.up_world is None and axis.rotation_world is None
    np.testing.assert_array_equal(axis.direction_world, [0, 0, 1])
    pos = DirectionUpTarget(0, (1, 2, 3), None, None)
    assert pos.mode == "position" and pos.direction_world is None
    with pytest.raises(DirectionValidationError, match="direction_world: is None but up_world is given"):
        DirectionUpTarget(0, (0, 0, 0), None, (0, 0, 1))


def test_targets_are_immutable_and_accept_numpy_inputs():
    t = DirectionUpTarget(np.int64(2), np.array([0.1, 0.2, 0.3], dtype=np.float32),
                          np.array([0, 0, 1]), [1.0, 0.0, 0.0])
    assert t.ee_id == 2
    with pytest.raises(AttributeError):
        t.ee_id = 3
    with pytest.raises(ValueError):
        t.position_world[0] = 5.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_array_inputs_are_checked_like_sequences(dtype):
    """A (3,) float array takes a shortcut past the per-component checks; same rules, same messages."""
    with pytest.raises(DirectionValidationError, match="position_world: every component must be finite"):
        DirectionUpTarget(0, np.array([0.0, np.nan, 0.0], dtype=dtype), (1, 0, 0), (0, 0, 1))
    with pytest.raises(DirectionValidationError, match="direction_world: every component must be finite"):
        DirectionUpTarget(0, (0, 0, 0), np.array([np.inf, 0.0, 0.0], dtype=dtype), (0, 0, 1))
    with pytest.raises(DirectionValidationError, match="up_world: must be a non-zero vector"):
        DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), np.zeros(3, dtype=dtype))
    a = DirectionUpTarget(0, np.array([1, 2, 3], dtype=dtype), np.array([0, 0, 2], dtype=dtype),
                          np.array([0, 3, 0], dtype=dtype))
    b = DirectionUpTarget(0, [float(x) for x in np.array([1, 2, 3], dtype=dtype)], (0, 0, 2), (0, 3, 0))
    for field in ("position_world", "direction_world", "up_world"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert getattr(a, field).dtype == np.float64


@pytest.mark.parametrize("local", [(None, None), ()], ids=["tcp", "default (omitted)"])
def test_shared_local_axes_of_the_two_conventions_are_read_only(local):
    """Targets of one convention share their resolved local axes; nobody can change them."""
    one = DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), (0, 0, 1), *local)
    two = DirectionUpTarget(1, (0, 0, 0), (0, 1, 0), (0, 0, 1), *local)
    before = one.local_direction.copy()
    for axes in (one.local_direction, one.local_up):
        with pytest.raises(ValueError):
            axes[0] = 5.0
    np.testing.assert_array_equal(two.local_direction, before)
    assert one.same_local_axes(two)


def _numpy_pair(direction, up):
    """Spec 5.1's normalisation written with numpy on (3,) float64 arrays (the implementation
    before the targets' vectors became Python floats): the reference of the bit-for-bit test."""
    def unit(v):
        v = v / max(abs(v[0]), abs(v[1]), abs(v[2]))
        return v / np.sqrt(v.dot(v))
    d, u0 = unit(np.asarray(direction, dtype=np.float64)), unit(np.asarray(up, dtype=np.float64))
    u = u0 - np.dot(u0, d) * d
    u = u / np.sqrt(u.dot(u))
    x = np.cross(u, d)
    x = x / np.sqrt(x.dot(x))
    return d, np.cross(d, x)


@pytest.mark.parametrize("local", [(None, None), ()], ids=["tcp", "default"])
def test_normalised_axes_equal_numpys_arithmetic_bit_for_bit(local):
    """The targets' unit vectors (arithmetic on Python floats) are numpy's to the last bit,
    so a solve's answers do not depend on which of the two computed them: random directions
    at scales from 1e-300 to 1e300, near-parallel pairs, float32 inputs and negative zeros."""
    rng = np.random.default_rng(11)
    for scale in (1.0, 1e-300, 1e-8, 1e8, 1e300):
        for _ in range(400):
            direction, up = rng.normal(size=3) * scale, rng.normal(size=3) * scale
            if rng.random() < 0.2:
                up = direction + rng.normal(size=3) * scale * 1e-4  # nearly parallel
            if rng.random() < 0.1:
                direction[rng.integers(3)] = -0.0
            inputs = [(direction, up)]
            if 1e-8 <= scale <= 1e8:  # within float32's range
                inputs.append((direction.astype(np.float32), up.astype(np.float32)))
            for d_in, u_in in inputs:
                d_ref, u_ref = _numpy_pair(d_in, u_in)
                t = DirectionUpTarget(0, d_in, d_in, u_in, *local)
                axis = DirectionUpTarget(0, u_in, d_in, None, *local)
                assert t.direction_world.tobytes() == d_ref.tobytes()
                assert t.up_world.tobytes() == u_ref.tobytes()
                assert axis.direction_world.tobytes() == d_ref.tobytes()
                assert t.position_world.tobytes() == np.asarray(d_in, dtype=np.float64).tobytes()
                assert axis.position_world.tobytes() == np.asarray(u_in, dtype=np.float64).tobytes()


def test_a_longdouble_array_is_taken_at_float64():
    """A (3,) longdouble input is rounded to float64 before any arithmetic, like a sequence of
    its components."""
    exact = np.array([0.1, 0.2, 0.3], dtype=np.longdouble) / 3
    t = DirectionUpTarget(0, exact, exact, None)
    np.testing.assert_array_equal(t.position_world, exact.astype(np.float64))
    assert t.position_world.dtype == np.float64
    np.testing.assert_array_equal(t.direction_world, _numpy_pair(exact.astype(np.float64), (0, 0, 1))[0])

import numpy as np
import pytest

from direction_up_ik.core.rotations import (align_vector, axis_error, matrix_to_rpy, orthogonal_unit,
                                            quaternion_to_matrix, rpy_to_matrix)


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def _rodrigues(rotvec):
    angle = np.linalg.norm(rotvec)
    if angle == 0:
        return np.eye(3)
    k = rotvec / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def test_axis_error_length_is_the_angle_and_rotates_target_onto_current():
    rng = np.random.default_rng(1)
    for _ in range(200):
        a, b = _unit(rng.normal(size=3)), _unit(rng.normal(size=3))
        e = axis_error(a, b)
        assert np.linalg.norm(e) == pytest.approx(np.arccos(np.clip(a @ b, -1, 1)), abs=1e-9)
        np.testing.assert_allclose(_rodrigues(e) @ b, a, atol=1e-9)


def test_axis_error_opposite_axes_is_pi_about_a_deterministic_orthogonal_axis():
    b = _unit([0.3, -0.2, 0.9])
    e1 = axis_error(-b, b)
    e2 = axis_error(-b.copy(), b.copy())
    assert np.linalg.norm(e1) == pytest.approx(np.pi)
    assert abs(e1 @ b) < 1e-12
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_allclose(e1, np.pi * orthogonal_unit(b))


def test_axis_error_zero_for_equal_axes_and_batched():
    v = _unit(np.random.default_rng(2).normal(size=(5, 4, 3)))
    np.testing.assert_array_equal(axis_error(v, v), np.zeros((5, 4, 3)))


def test_align_vector_is_the_smallest_rotation():
    rng = np.random.default_rng(3)
    for _ in range(100):
        a, b = _unit(rng.normal(size=3)), _unit(rng.normal(size=3))
        v = rng.normal(size=3)
        rotated = align_vector(v, a, b)
        np.testing.assert_allclose(align_vector(a, a, b), b, atol=1e-12)
        # Smallest rotation: the axis a x b is unchanged, lengths kept.
        k = np.cross(a, b)
        np.testing.assert_allclose(align_vector(k, a, b), k, atol=1e-12)
        assert np.linalg.norm(rotated) == pytest.approx(np.linalg.norm(v))


def test_align_vector_opposite_uses_pi_rotation_about_the_same_axis_as_axis_error():
    b = _unit([0.1, 0.7, -0.2])
    n = orthogonal_unit(b)
    v = _unit(np.cross(b, n))
    out = align_vector(v, -b, b)
    np.testing.assert_allclose(out, -v, atol=1e-12)  # pi about n flips vectors orthogonal to n
    np.testing.assert_allclose(align_vector(n, -b, b), n, atol=1e-12)


def test_rpy_round_trip():
    rng = np.random.default_rng(4)
    for _ in range(50):
        rpy = rng.uniform([-np.pi, -1.5, -np.pi], [np.pi, 1.5, np.pi])
        np.testing.assert_allclose(matrix_to_rpy(rpy_to_matrix(rpy)), rpy, atol=1e-12)
    # URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll); yaw of pi/2 maps x to y.
    np.testing.assert_allclose(rpy_to_matrix([0, 0, np.pi / 2]) @ [1, 0, 0], [0, 1, 0], atol=1e-15)


def test_quaternion_to_matrix_is_scipys_rotation_of_the_normalised_quaternion():
    # (x, y, z, w) as geometry_msgs orders it; unnormalised inputs are normalised first.
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(4)
    for _ in range(200):
        q = rng.normal(size=4) * rng.uniform(0.1, 10.0)
        np.testing.assert_allclose(quaternion_to_matrix(q), Rotation.from_quat(q).as_matrix(), atol=1e-12)
    np.testing.assert_array_equal(quaternion_to_matrix((0.0, 0.0, 0.0, 2.0)), np.eye(3))
    half_turn_about_z = quaternion_to_matrix((0.0, 0.0, 1.0, 0.0))
    np.testing.assert_allclose(half_turn_about_z, np.diag([-1.0, -1.0, 1.0]), atol=1e-15)

#!/usr/bin/env python3
"""Unit tests of test/oracle.py: each rule of the comparison fails what it must.

Runs as a script (exit 1 on a failure) or under unittest/pytest.
"""
import math
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import (OracleError, Worst, assert_close, beyond, compare,  # noqa: E402
                    compare_sequences, within)

NAN, INF = math.nan, math.inf


class FailsWhatItMust(unittest.TestCase):
    """Each case plants one defect that a hand-written `err > tol` misses or
    that a sloppy oracle lets through; the helper must fail it."""

    def test_planted_nan_fails(self):
        expected = np.arange(6, dtype=np.float32).reshape(2, 3)
        actual = expected.copy()
        actual[1, 2] = NAN
        result = compare(actual, expected, rtol=1e-5, name="fc1.weight")
        self.assertFalse(result.ok)
        self.assertEqual(result.index, (1, 2))
        self.assertIn("fc1.weight", result.message)
        self.assertIn("nan", result.message)
        self.assertFalse(compare(actual, expected, rtol=1e-5, normwise=False).ok)
        self.assertFalse(compare(NAN, 1.0).ok)

    def test_finite_against_expected_inf_fails(self):
        self.assertFalse(compare([1.0, 1e30], [1.0, INF], rtol=1.0).ok)
        self.assertFalse(compare([1.0, NAN], [1.0, INF]).ok)

    def test_inf_of_the_wrong_sign_fails(self):
        self.assertFalse(compare([-INF], [INF]).ok)
        self.assertFalse(compare([INF, 0.0], [-INF, 0.0], normwise=False).ok)

    def test_inf_against_finite_fails(self):
        self.assertFalse(compare([INF, 1.0], [2.0, 1.0], rtol=1e9).ok)

    def test_value_against_expected_nan_fails(self):
        self.assertFalse(compare([0.0], [NAN]).ok)

    def test_short_list_fails(self):
        result = compare_sequences([2.30, 2.10], [2.30, 2.10, 1.90], name="losses")
        self.assertFalse(result.ok)
        self.assertIn("2 items, expected 3", result.message)
        self.assertFalse(compare([2.30, 2.10], [2.30, 2.10, 1.90]).ok)
        self.assertFalse(compare_sequences([2.3, 2.1, 1.9, 1.7], [2.3, 2.1, 1.9]).ok)

    def test_shape_mismatch_fails(self):
        result = compare(np.zeros((2, 3)), np.zeros((3, 2)), name="w")
        self.assertFalse(result.ok)
        self.assertIn("shape (2, 3), expected (3, 2)", result.message)
        self.assertFalse(compare(np.zeros((1, 4)), np.zeros(4)).ok)

    def test_missing_value_fails(self):
        self.assertFalse(compare(None, 1.0).ok)
        self.assertFalse(compare_sequences([1.0, None], [1.0, 2.0]).ok)
        self.assertFalse(compare([1.0, 2.0], [1.0, None]).ok)

    def test_beyond_tolerance_fails(self):
        self.assertFalse(compare([1.0, 2.0], [1.0, 2.001], rtol=1e-4).ok)
        # Elementwise: a small element's large relative error fails, though
        # it is within the normwise tolerance.
        self.assertFalse(compare([100.0, 1.1], [100.0, 1.0], rtol=1e-2, normwise=False).ok)
        self.assertTrue(compare([100.0, 1.1], [100.0, 1.0], rtol=1e-2).ok)

    def test_per_element_bounds(self):
        bound = np.array([1e-3, 1e-6])
        self.assertTrue(compare([1.0005, 2.0], [1.0, 2.0], rtol=0.0, atol=bound,
                                normwise=False).ok)
        result = compare([1.0, 2.0001], [1.0, 2.0], rtol=0.0, atol=bound, normwise=False)
        self.assertFalse(result.ok)
        self.assertEqual(result.index, (1,))

    def test_l2_norm(self):
        # max-norm error 0.1 of max|e| 1; in the 2-norm 0.1 of ||e|| = 2.
        self.assertFalse(compare([1.1, 1, 1, 1], [1.0, 1, 1, 1], rtol=0.06).ok)
        self.assertTrue(compare([1.1, 1, 1, 1], [1.0, 1, 1, 1], rtol=0.06, norm="l2").ok)
        self.assertFalse(compare([NAN, 1, 1, 1], [1.0, 1, 1, 1], rtol=1.0, norm="l2").ok)

    def test_assert_close_raises_with_the_message(self):
        with self.assertRaises(OracleError) as caught:
            assert_close([NAN], [1.0], name="loss")
        self.assertIn("loss", str(caught.exception))
        self.assertTrue(isinstance(caught.exception, AssertionError))


class PassesWhatItMust(unittest.TestCase):
    def test_exact_equality_passes(self):
        x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
        for normwise in (True, False):
            result = compare(x, x.copy(), rtol=0.0, normwise=normwise)
            self.assertTrue(result.ok, result.message)
            self.assertEqual(result.error, 0.0)
        self.assertTrue(compare(np.zeros(3), np.zeros(3), rtol=0.0).ok)

    def test_nan_where_nan_expected_and_matching_infs_pass(self):
        self.assertTrue(compare([NAN, 1.0, INF, -INF], [NAN, 1.0, INF, -INF]).ok)
        self.assertTrue(compare_sequences([NAN, 2.0], [NAN, 2.0]).ok)
        self.assertTrue(compare(NAN, NAN).ok)

    def test_within_tolerance_passes(self):
        self.assertTrue(compare([1.0, 2.0], [1.0, 2.00001], rtol=1e-5).ok)
        self.assertTrue(compare([1.0, 2.0], [1.0, 2.00001], rtol=1e-5, normwise=False).ok)
        self.assertTrue(compare([0.0, 1e-7], [0.0, 0.0], rtol=0.0, atol=1e-6).ok)
        self.assertTrue(compare_sequences((2.3, 2.1), [2.3, 2.1 + 1e-9], rtol=1e-6).ok)
        self.assertTrue(compare(3, 3.0).ok)


class ScalarErrors(unittest.TestCase):
    """within/beyond: errors measured by other means, NaN on neither side."""

    def test_nan_is_neither_within_nor_beyond(self):
        self.assertFalse(within(NAN, 1.0))
        self.assertFalse(beyond(NAN, 1.0))

    def test_bounds(self):
        self.assertTrue(within(1.0, 1.0))
        self.assertFalse(within(INF, 1.0))
        self.assertTrue(beyond(INF, 1.0))
        self.assertFalse(beyond(1.0, 1.0))


class WorstTreatsNanAsWorst(unittest.TestCase):
    def test_nan_error_is_the_worst(self):
        worst = Worst()
        worst.add(0.5, "a")
        worst.add(NAN, "b")
        worst.add(2.0, "c")
        self.assertTrue(math.isnan(worst.error))
        self.assertEqual(worst.name, "b")
        self.assertFalse(worst.ok)

    def test_failures_are_kept(self):
        worst = Worst()
        worst.add(compare([1.0], [1.0], name="good"))
        worst.add(compare([NAN], [1.0], name="bad"))
        self.assertFalse(worst.ok)
        self.assertEqual([r.name for r in worst.failures], ["bad"])
        self.assertEqual(worst.error, INF)
        self.assertIn("bad", worst.report())

    def test_all_good_reports_the_worst(self):
        worst = Worst()
        worst.add(compare([1.0], [1.0 + 1e-7], name="small"))
        worst.add(compare([1.0], [1.0 + 1e-6], name="larger"))
        self.assertTrue(worst.ok)
        self.assertEqual(worst.name, "larger")


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=1).result.wasSuccessful() else 1)

"""Loom's one numeric comparison for Python oracles: shape-, NaN- and inf-aware.

Every Python check that compares numbers (tensors, checkpoints, loss lists)
goes through `compare` here, never through a hand-written `err > tol` or
`max(worst, err)`: both let NaN through (`nan > tol` is False and
`max(0.0, nan)` is 0.0). scripts/check_oracles.py flags such code.

The rules, whatever the mode:
  - a missing value (None, anywhere) fails, and so do shapes (or sequence
    lengths) that differ;
  - where `expected` is NaN, `actual` must be NaN; where it is +-inf,
    `actual` must be the same inf; where it is finite, `actual` must be
    finite (a NaN or inf against a finite value fails);
  - the finite entries agree normwise (max|a - e| <= rtol * max|e| + atol,
    the default: an elementwise relative error is meaningless near zero; or
    in the 2-norm, ||a - e|| <= rtol * ||e|| + atol, with norm="l2") or
    elementwise (|a - e| <= atol + rtol * |e| for every element).

Numpy only, no Loom package: the GPU bundle runs it under another Python.
"""
import math

import numpy as np

__all__ = ["Comparison", "OracleError", "Worst", "assert_close", "beyond", "compare",
           "compare_sequences", "within"]

TINY = 1e-30  # the denominator's floor for a relative error against zeros


class OracleError(AssertionError):
    """A comparison failed; the message names what, where and by how much."""


class Comparison:
    """The outcome of one `compare`; true when the values agree.

    error   the relative error: normwise max|a - e| / max|e|, elementwise
            the worst |a - e| / |e| (each denominator at least TINY); inf
            when the values cannot be compared (shape, None, a non-finite
            mismatch), NaN never;
    abs_error  max|a - e| over the finite entries (inf, as error);
    index   the worst element's index (a tuple; () for a scalar), or None;
    message what was compared and, on failure, what is wrong.
    """

    __slots__ = ("ok", "error", "abs_error", "index", "message", "name")

    def __init__(self, ok, error, index, message, name, abs_error=None):
        self.ok, self.error, self.index = ok, error, index
        self.abs_error = error if abs_error is None else abs_error
        self.message, self.name = message, name

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"Comparison(ok={self.ok}, error={self.error!r}, {self.message!r})"


def _has_none(value):
    if value is None:
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_none(v) for v in value)
    return False


def _as_array(value):
    """value as a float64 array, or a string saying why it is not one."""
    if _has_none(value):
        return "missing (None)"
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        return f"not a regular numeric array ({e})"
    return array


def _where(index):
    return f"[{', '.join(str(int(i)) for i in index)}]" if index else ""


def _at(bound, index):
    """A scalar bound, or an array bound's element at index."""
    return float(bound[index] if np.ndim(bound) else bound)


def _failed(name, what, index=None, shape=""):
    return Comparison(False, math.inf, index, f"{name}{shape}: {what}", name)


def compare(actual, expected, rtol=1e-5, atol=0.0, normwise=True, name="value", norm="max"):
    """Compares `actual` against the reference `expected` (arrays, scalars or
    nested lists) by the module's rules; returns a Comparison. Normwise, norm
    is "max" or "l2"; elementwise, rtol and atol may be arrays of expected's
    shape (a bound per element)."""
    if norm not in ("max", "l2"):
        raise ValueError(f"norm {norm!r}: \"max\" or \"l2\"")
    a, e = _as_array(actual), _as_array(expected)
    if isinstance(e, str):
        return _failed(name, f"expected value is {e}")
    if isinstance(a, str):
        return _failed(name, f"actual value is {a}")
    if a.shape != e.shape:
        return _failed(name, f"shape {a.shape}, expected {e.shape}")
    shape = f" {a.shape}" if a.shape else ""

    # Non-finite expectations must be met exactly, finite ones by finite values.
    finite = np.isfinite(e)
    wrong = np.where(np.isnan(e), ~np.isnan(a),
                     np.where(finite, ~np.isfinite(a), a != e))
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        at = f" at {_where(index)}" if index else ""
        return _failed(name, f"{float(a[index])!r}{at} where {float(e[index])!r} is "
                             f"expected ({int(wrong.sum())} such element(s))", index, shape)
    if not finite.any():
        return Comparison(True, 0.0, None, f"{name}{shape}: equal", name)

    diff = np.where(finite, np.abs(a - np.where(finite, e, 0.0)), 0.0)
    magnitude = np.where(finite, np.abs(e), 0.0)
    if normwise:
        if np.ndim(atol) or np.ndim(rtol):
            raise ValueError("normwise comparison takes scalar rtol and atol")
        if norm == "l2":
            worst, scale = float(np.linalg.norm(diff)), float(np.linalg.norm(magnitude))
            measure, size = "||a - e||", "||e||"
        else:
            worst, scale = float(diff.max()), float(magnitude.max())
            measure, size = "max|a - e|", "max|e|"
        allowed = rtol * scale + atol
        index = np.unravel_index(int(np.argmax(diff)), diff.shape)
        error = worst / max(scale, TINY)
        ok = worst <= allowed
        rule = (f"{measure} {worst:.3e} {'<=' if ok else '>'} "
                f"rtol {rtol:g} * {size} {scale:.3e}" + (f" + atol {atol:g}" if atol else ""))
    else:
        allowed = np.broadcast_to(atol + rtol * magnitude, diff.shape)
        excess = diff / np.maximum(allowed, TINY)
        index = np.unravel_index(int(np.argmax(excess)), diff.shape)
        ok = bool(np.all(diff <= allowed))
        error = float(np.max(diff / np.maximum(magnitude, TINY)))
        worst = float(diff[index])
        rule = (f"|a - e| {worst:.3e} {'<=' if ok else '>'} {float(allowed[index]):.3e}, "
                f"atol {_at(atol, index):g} + rtol {_at(rtol, index):g} * |e|"
                + ("" if ok else f" ({int(np.count_nonzero(diff > allowed))} element(s) over)"))
    index = tuple(int(i) for i in index)
    at = f" at {_where(index)}" if index else ""
    message = (f"{name}{shape}: relative error {error:.3e}{at} (actual {float(a[index])!r}, "
               f"expected {float(e[index])!r}): {rule}")
    return Comparison(ok, error, index, message, name, float(diff.max()))


def compare_sequences(actual, expected, rtol=1e-5, atol=0.0, name="sequence"):
    """Two scalar sequences (e.g. the losses of each step) elementwise: equal
    lengths, each item within atol + rtol * |expected item|."""
    if _has_none(actual) or _has_none(expected) or \
            np.ndim(np.asarray(actual, dtype=object)) != 1 or \
            np.ndim(np.asarray(expected, dtype=object)) != 1:
        return compare(actual, expected, rtol, atol, normwise=False, name=name)
    if len(actual) != len(expected):
        return _failed(name, f"{len(actual)} items, expected {len(expected)}")
    return compare(actual, expected, rtol, atol, normwise=False, name=name)


def assert_close(actual, expected, rtol=1e-5, atol=0.0, normwise=True, name="value",
                 norm="max"):
    """`compare`, raising OracleError with its message on failure; returns
    the Comparison otherwise."""
    result = compare(actual, expected, rtol, atol, normwise, name, norm)
    if not result.ok:
        raise OracleError(result.message)
    return result


def within(error, tolerance):
    """Whether a scalar error measured by other means (an L2 norm, a count)
    is at most tolerance; NaN is never within."""
    return not math.isnan(error) and error <= tolerance


def beyond(error, bound):
    """Whether a scalar error is larger than bound: for a contrast run that
    must differ. NaN is never beyond (a broken contrast proves nothing)."""
    return not math.isnan(error) and error > bound


class Worst:
    """Folds many comparisons (or raw error values) into the worst one, NaN
    counted worse than anything: the replacement for `max(worst, err)`.

        worst = Worst()
        for name in names:
            worst.add(compare(got[name], want[name], rtol, name=name))
        if not worst.ok: ... worst.failures ...
        print(f"worst relative error {worst.error:.2e} ({worst.name})")
    """

    def __init__(self):
        self.error = 0.0      # the worst error so far (NaN once any is NaN)
        self.name = None      # what it belongs to
        self.count = 0        # how many were added
        self.failures = []    # the failed Comparisons, in order

    @staticmethod
    def _worse(x, y):
        """Whether error x is worse than y: NaN above inf above any finite."""
        if math.isnan(y):
            return False
        return math.isnan(x) or x > y

    def add(self, result, name=None):
        """Adds a Comparison (its failure is kept) or a bare error value;
        returns what was added."""
        self.count += 1
        if isinstance(result, Comparison):
            error, name = result.error, name or result.name
            if not result.ok:
                self.failures.append(result)
        else:
            error = float(result)
        if self.count == 1 or self._worse(error, self.error):
            self.error, self.name = error, name
        return result

    @property
    def ok(self):
        """No added comparison failed and no added error is NaN."""
        return not self.failures and not math.isnan(self.error)

    def report(self):
        """One line per failure, or the worst error when all agree."""
        if self.failures:
            return "\n".join(r.message for r in self.failures)
        where = f" ({self.name})" if self.name else ""
        return f"{self.count} compared, worst relative error {self.error:.3e}{where}"

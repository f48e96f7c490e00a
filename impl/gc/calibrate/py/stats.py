"""Small statistics used by the derivations."""

import numpy as np


def q(xs, p):
    xs = [x for x in xs if x is not None]
    return float(np.quantile(xs, p)) if xs else None


def spread(xs):
    """Median with the 10th and 90th percentiles, the max and the count."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"n": 0}
    return {"median": q(xs, 0.5), "p10": q(xs, 0.1), "p90": q(xs, 0.9), "p99": q(xs, 0.99), "max": max(xs), "n": len(xs)}


def linfit(xs, ys):
    """Least squares y = a + b·x, with the coefficient of determination."""
    if len(xs) < 3 or len(set(xs)) < 2:
        return None
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(x, y, 1)
    pred = a + b * x
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else None
    return {"a": float(a), "b": float(b), "r2": r2, "n": len(xs)}


def mean_range(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"mean": float(np.mean(xs)), "min": min(xs), "max": max(xs), "n": len(xs)}


def linfit2(x1, x2, ys):
    """Least squares y = a + b·x1 + c·x2."""
    if len(ys) < 5:
        return None
    A = np.column_stack([np.ones(len(ys)), np.asarray(x1, float), np.asarray(x2, float)])
    y = np.asarray(ys, float)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    pred = A @ coef
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else None
    return {"a": float(coef[0]), "b": float(coef[1]), "c": float(coef[2]), "r2": r2, "n": len(ys)}

"""A linear ranking model over the features of each candidate's executable (`hlo_features`).

The graph network (`model`) reads the program the rewrites produce; this model reads what XLA
compiles it to: kernels, bytes they move, work in fusions, loop trip counts. It is the learned
strategy's second stage: a candidate costs one compile (no run) to be ranked here.

    score = w . (log(1 + f) - mean) / std  +  v . log(1 + n)
                f: hlo_features of the executable; n: how many of the candidate's
                alternatives take each rewrite pattern (relative to the state it is ranked in)

The pattern term carries what a rewrite costs on this machine beyond what the executable's
counts show (a merged dot sliced apart again, a batched dot), which holds across programs.

Lower is faster; score differences within a program are its predicted log runtime ratios (the
scale the ranking loss leaves free is set afterwards by least squares, `calibration`). Fitted
by L-BFGS on the pairwise logistic loss over pairs of one program whose labels differ by more
than the program's noise gap (as the metrics count them), each program weighing the same, plus
`l2` x |w|^2: a convex problem, so there is no step count or seed to choose, only `l2`
(`learn cv --model executable` compares values).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shlo_env.learn import hlo_features
from shlo_env.learn.model import LearnedModel

WEIGHTS = Path(__file__).parent / "exe_weights.npz"
DEFAULT_L2 = 1e-3
DEFAULT_L2_PATTERNS = 1e-2  # the pattern weights' l2 (grouped CV, docs/learned.md)


def inputs(features: np.ndarray) -> np.ndarray:
    """The model's input from raw `hlo_features` rows: log(1 + x), 0 where unknown (NaN)."""
    return np.log1p(np.maximum(np.nan_to_num(np.asarray(features, np.float64), nan=0.0), 0.0))


def pattern_columns(patterns: Sequence[Mapping[str, int]] | None, vocabulary: Sequence[str], rows: int) -> np.ndarray:
    """(rows, P): log(1 + how many alternatives each row takes of each vocabulary pattern);
    patterns outside the vocabulary are left out, and None gives zeros."""
    out = np.zeros((rows, len(vocabulary)))
    index = {name: k for k, name in enumerate(vocabulary)}
    for r, counts in enumerate(patterns or ()):
        for name, n in counts.items():
            if name in index:
                out[r, index[name]] = math.log1p(n)
    return out


def design(features: np.ndarray, patterns: Sequence[Mapping[str, int]] | None, vocabulary: Sequence[str]) -> np.ndarray:
    """The model's unscaled input rows: `inputs` of the features, then `pattern_columns`."""
    return np.hstack([inputs(features), pattern_columns(patterns, vocabulary, len(features))])


def step_patterns(labels: Sequence[str]) -> Counter:
    """The pattern counts of one decision: the labels of the choices it takes."""
    return Counter(labels)


@dataclass
class ExeModel(LearnedModel):
    """The linear model (`LearnedModel`): `predict(features, patterns)` is `scores`."""

    ERROR_KEY = "cv_log_error_median"
    w: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    features: tuple[str, ...] = hlo_features.FEATURES
    info: dict = field(default_factory=dict)
    patterns: tuple[str, ...] = ()  # the pattern columns' names, after the features'

    def scores(self, features: np.ndarray, patterns: Sequence[Mapping[str, int]] | None = None) -> np.ndarray:
        """(C,) predicted log runtime (up to a per-program constant) of raw feature rows (C, F)
        and, per row, the patterns its decision takes (None: none). Equal rows get bitwise
        equal scores: a matrix product can round equal rows differently, which would break
        exact ties at random."""
        rows, which = np.unique(design(features, patterns, self.patterns), axis=0, return_inverse=True)
        return (((rows - self.mean) / self.std) @ self.w)[which.reshape(-1)]

    def predict(self, features: np.ndarray, patterns: Sequence[Mapping[str, int]] | None = None) -> np.ndarray:
        return self.scores(features, patterns)

    @classmethod
    def load(cls, path=None) -> "ExeModel":
        return load(path)

    def save(self, path) -> Path:
        np.savez_compressed(path, w=self.w, mean=self.mean, std=self.std, features=np.asarray(self.features),
                            patterns=np.asarray(self.patterns, dtype=str), info=np.asarray(json.dumps(self.info)))
        return Path(path)


def load(path=None) -> ExeModel:
    """The weights written by `ExeModel.save` (default: those shipped in the package). Weights
    for another feature list than this code's are refused: their columns would mean other things."""
    path = Path(path) if path is not None else WEIGHTS
    if not path.exists():
        raise FileNotFoundError(f"no executable-model weights at {path} (train with `shlo-env learn train-exe`)")
    with np.load(path) as z:
        m = ExeModel(z["w"], z["mean"], z["std"], tuple(str(x) for x in z["features"]), json.loads(str(z["info"])),
                     tuple(str(x) for x in z["patterns"]) if "patterns" in z.files else ())
    if m.features != hlo_features.FEATURES:
        raise ValueError(f"{path}: weights for the features {list(m.features)}, this code computes "
                         f"{list(hlo_features.FEATURES)}; retrain with `shlo-env learn train-exe`")
    return m


def shipped() -> ExeModel:
    """The shipped weights, loaded once (`LearnedModel.shipped`)."""
    return ExeModel.shipped()


@dataclass
class Program:
    """One program's candidates for training or scoring: raw features (C, F), labels, noise
    gap, and the patterns each candidate's decision takes."""
    features: np.ndarray
    labels: np.ndarray
    gap: float
    source: str = ""
    patterns: list[Counter] | None = None


def candidate_patterns(split, p: int, decisions: np.ndarray) -> list[Counter] | None:
    """The patterns each decision row of program p takes (None: the export has no labels)."""
    labels = split.programs[p].get("labels")
    if labels is None:
        return None
    return [step_patterns([labels[a][c] for a, c in enumerate(row) if c]) for row in decisions]


def programs_of(split) -> list[Program]:
    """The programs of a dataset split (format 4: with `cand_exe`) that have features for
    every candidate."""
    from shlo_env.learn import dataset, metrics

    if "cand_exe" not in split.arrays:
        raise dataset.DatasetError(f"split {split.name!r} has no executable features (format "
                                   f"{split.meta.get('format_version')}); add them with `shlo-env dataset exe-features`")
    out = []
    for p in range(len(split)):
        c = split.candidates(p)
        if len(c["exe"]) and np.isfinite(c["exe"]).all():
            noise = float(c["noise"][0]) if len(c["noise"]) else math.nan
            out.append(Program(c["exe"], dataset.label(c), metrics.noise_gap(noise), split.programs[p]["source"],
                               candidate_patterns(split, p, c["decisions"])))
    return out


def _pairs(programs: Sequence[Program], vocabulary: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                np.ndarray, np.ndarray]:
    """(inputs of every candidate, the same centred per program, faster index, slower index,
    pair weight): a program's pairs share weight 1."""
    xs, centred, fast, slow, weight = [], [], [], [], []
    offset = 0
    for prog in programs:
        log_label = np.log(prog.labels)
        i, j = np.nonzero(log_label[:, None] + prog.gap < log_label[None, :])
        if len(i):
            fast.append(i + offset)
            slow.append(j + offset)
            weight.append(np.full(len(i), 1.0 / len(i)))
        xs.append(design(prog.features, prog.patterns, vocabulary))
        centred.append(xs[-1] - xs[-1].mean(axis=0))
        offset += len(prog.labels)
    if not fast:
        raise ValueError("no candidate pairs apart by more than the noise: nothing to rank")
    return (np.concatenate(xs), np.concatenate(centred), np.concatenate(fast), np.concatenate(slow),
            np.concatenate(weight))


def fit(programs: Sequence[Program], l2: float = DEFAULT_L2, info: dict | None = None,
        l2_patterns: float | None = DEFAULT_L2_PATTERNS) -> ExeModel:
    """`l2_patterns` None: no pattern columns (the executable's features alone)."""
    from scipy.optimize import minimize

    vocabulary = () if l2_patterns is None else tuple(sorted({name for prog in programs for counts in
                                                              (prog.patterns or ()) for name in counts}))
    x, centred, fast, slow, weight = _pairs(programs, vocabulary)
    features = x.shape[1] - len(vocabulary)
    # scaled by how much a feature varies within a program (what ranking sees), not across
    # programs; pattern columns are left as counts
    mean, std = x.mean(axis=0), np.sqrt((centred ** 2).mean(axis=0)) + 1e-3
    mean[features:], std[features:] = 0.0, 1.0
    diff = ((x[fast] - mean) / std) - ((x[slow] - mean) / std)
    total = weight.sum()
    reg = np.full(x.shape[1], l2)
    reg[features:] = l2_patterns or 0.0

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = diff @ w  # want score(faster) < score(slower): a negative margin
        value = float(np.logaddexp(0.0, margin) @ weight) / total + float(reg @ (w * w))
        grad = diff.T @ (weight / (1.0 + np.exp(-margin))) / total + 2 * reg * w
        return value, grad

    result = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B")
    m = ExeModel(result.x, mean, std, patterns=vocabulary)
    scale = calibration(m, programs)
    m.w = m.w * scale
    m.info = {"l2": l2, "l2_patterns": l2_patterns, "programs": len(programs), "pairs": int(len(fast)),
              "final_loss": float(result.fun), "calibration": scale, **(info or {})}
    return m


def calibration(m: ExeModel, programs: Sequence[Program]) -> float:
    """The factor that turns score differences into log runtime ratios: the least-squares slope
    of the measured log labels on the scores, both centred per program (the ranking loss
    leaves the scale free; the learned strategy compares predictions with its noise band).
    Positive, so the order is kept; 1e-3 when the scores do not correlate with the labels."""
    num = den = 0.0
    for prog in programs:
        s, y = m.scores(prog.features, prog.patterns), np.log(prog.labels)
        s, y = s - s.mean(), y - y.mean()
        num, den = num + float(s @ y), den + float(s @ s)
    return max(num / den, 1e-3) if den > 0 else 1.0


def quality(m: ExeModel, programs: Sequence[Program]) -> dict:
    from shlo_env.learn import metrics

    return metrics.per_program([(m.scores(p.features, p.patterns), p.labels) for p in programs],
                               [p.gap for p in programs])


def log_errors(m: ExeModel, programs: Sequence[Program]) -> np.ndarray:
    """|predicted - measured| log runtime ratio of every pair of one program's candidates that
    compile to different executables (equal ones are predicted equal, and their measured
    difference is noise): how far the model's predicted ratios between two states are off."""
    out = []
    for prog in programs:
        s, y = m.scores(prog.features, prog.patterns), np.log(prog.labels)
        i, j = np.triu_indices(len(s), 1)
        keep = np.any(prog.features[i] != prog.features[j], axis=1)
        out.append(np.abs((s[i] - s[j]) - (y[i] - y[j]))[keep])
    return np.concatenate(out) if out else np.zeros(0)


def cv_log_error_median(programs: Sequence[Program], fold_of, folds: int = 3, l2: float = DEFAULT_L2) -> float:
    """The median `log_errors` on held-out programs, each fold fitted without the programs of a
    share of the sources (`fold_of(source, folds)`, as `cross_validate`): the learned
    strategy's error band for this model's predictions (`LearnedModel.uncertainty`)."""
    errors = [log_errors(fit([p for p in programs if fold_of(p.source, folds) != k], l2),
                         [p for p in programs if fold_of(p.source, folds) == k]) for k in range(folds)]
    return float(np.median(np.concatenate(errors)))


def cross_validate(programs: Sequence[Program], fold_of, folds: int = 3,
                   l2s: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1)) -> dict:
    """Held-out `tau_above_noise` per l2, per fold and averaged, each fold holding out the
    programs of a share of the sources (`fold_of(source, folds)`)."""
    out: dict = {}
    for l2 in l2s:
        taus = []
        for k in range(folds):
            inside = [p for p in programs if fold_of(p.source, folds) != k]
            held = [p for p in programs if fold_of(p.source, folds) == k]
            if not inside or not held:
                raise ValueError(f"fold {k} of {folds} holds out {len(held)} of {len(programs)} programs: "
                                 f"too few sources for {folds} folds")
            taus.append(quality(fit(inside, l2), held)["tau_above_noise"])
        out[str(l2)] = {"folds": taus, "mean": float(np.mean(taus))}
    return out

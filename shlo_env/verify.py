"""Verification: does a candidate compute what the original computes, within its tolerance tier?

`Verifier` runs candidates through a runner (`shlo_env.runners`) on the original's input sets
(its example inputs, if any, plus seeded random sets) and compares their outputs with the
original's. `escalate` is the order the comparisons are tried in, cheapest first:

1. bitwise equal on every set: verified EXACT (no reference is computed);
2. else the REASSOCIATE criterion (`shlo_env.numerics.verify`) against float64 reference
   outputs of the original;
3. only if that fails, again with the original's own sensitivity (its float64 outputs on
   inputs moved by a few ulps): two more runs, so only when needed.

The search's `Evaluator` and `Env.is_equivalent` use a `Verifier`. `optimize`'s in-process
checks and `shlo_env.testing` (a pattern author's property tests, on the reference interpreter
and stricter: an EXACT rewrite must be bitwise equal) apply the same rules of
`shlo_env.numerics` to outputs they compute themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from shlo_env import runtime
from shlo_env.hashing import dag_hash
from shlo_env.import_ import Program
from shlo_env.numerics import SENSITIVITY_ULPS, Comparison, Numerics, compare_outputs, verify
from shlo_env.runners import Runner

Outputs = list[np.ndarray]


def escalate(outputs: Sequence[Outputs], originals: Sequence[Outputs], claimed: Numerics | str,
             references: Callable[[], list | None], sensitivities: Callable[[], list | None]) -> Comparison:
    """Compare a candidate's outputs with the original's on every input set, in the order of
    the module docstring; `references()` and `sensitivities()` are called only when needed.
    The result's `tier` is the tier established (`ok` False: verified in no tier it may use)."""
    exact = all(compare_outputs(g, o, Numerics.EXACT).ok for g, o in zip(outputs, originals))
    cmp = verify(outputs, originals, claimed, None if exact else references())
    if not cmp.ok and not exact:
        cmp = verify(outputs, originals, claimed, references(), sensitivities())
    return cmp


class Verifier:
    """Checks programs against `original` through `runner`, on the example inputs (if any) plus
    `num_random` seeded random input sets. The original's outputs, float64 references and
    sensitivities are computed once, when first needed.

    `disabled_passes` apply when running the original; `timeout` gives the `timeout_s` of each
    runner request (None: the runner's own).
    """

    def __init__(self, original: Program, runner: Runner, *, num_random: int = 3, seed: int = 0,
                 disabled_passes: tuple[str, ...] = (), timeout: Callable[[], float | None] = lambda: None):
        self.original = original
        self.runner = runner
        self.disabled_passes = disabled_passes
        self.timeout = timeout
        self.text = original.text()
        self.sets = runtime.input_sets(original, num_random, seed)
        # Input sets live in the runner under these names; the prefix keeps two verifiers
        # sharing one runner from replacing each other's sets.
        prefix = f"{dag_hash(original)}-{seed}-{num_random}"
        self.keys = [f"{prefix}/set{i}" for i in range(len(self.sets))]
        for key, arrays in zip(self.keys, self.sets):
            runner.set_inputs(key, arrays)
        self._originals: list[Outputs] | None = None
        self._references: list | None = None
        self._sensitivities: list | None = None

    @property
    def num_input_sets(self) -> int:
        return len(self.sets)

    def originals(self) -> list[Outputs]:
        """The original's outputs on each input set (compiled with `disabled_passes`)."""
        if self._originals is None:
            self._originals = [self.runner.run(self.text, k, self.disabled_passes, timeout_s=self.timeout())
                               for k in self.keys]
        return self._originals

    def references(self) -> list:
        """float64 outputs of the original on each input set (None where it cannot be widened)."""
        if self._references is None:
            self._references = [self.runner.reference(self.text, k, timeout_s=self.timeout()) for k in self.keys]
        return self._references

    def sensitivity(self, i: int):
        """float64 outputs of the original on input set i moved by a few ulps: how much the
        exact result itself moves under rounding-sized changes (see `shlo_env.numerics`)."""
        if self._sensitivities is None:
            self._sensitivities = [None] * len(self.keys)
        if self._sensitivities[i] is None:
            self._sensitivities[i] = self.runner.reference(self.text, self.keys[i], timeout_s=self.timeout(),
                                                           perturb_ulps=SENSITIVITY_ULPS)
        return self._sensitivities[i]

    def sensitivities(self) -> list:
        return [self.sensitivity(i) for i in range(len(self.keys))]

    def check(self, text: str, disabled_passes: Sequence[str], claimed: Numerics | str) -> Comparison:
        """Run the program `text` (compiled with `disabled_passes`) on every input set and
        compare it with the original (`escalate`). Raises `CandidateError` if it cannot run."""
        originals = self.originals()
        outputs = [self.runner.run(text, key, disabled_passes, timeout_s=self.timeout()) for key in self.keys]
        return escalate(outputs, originals, claimed, self.references, self.sensitivities)


__all__ = ["Verifier", "escalate"]

"""What a front end watches while a program search runs: one tqdm line, the `shlo_env.search`
log, and the candidates for a dump folder.

`SearchWatch` is a `shlo_env.search.base.Progress`, the object every search reports to after each
candidate (`SearchContext.evaluate` calls `update(evaluator, best)`). Given to
`optimize_program(..., progress=watch)` it

- draws one `tqdm.auto` line when enabled (a widget in a notebook; off by default for
  `optimize`, `progress=True` or `shlo-env optimize --progress` turns it on);
- logs each new best to `shlo_env.search` (INFO) and every candidate (DEBUG), and rejections
  by verification to `shlo_env.verify`;
- keeps the evaluators it saw, so that `candidates()` can list every state evaluated (hash,
  rewrites, tier, ratio, status, why rejected) after the search, for `candidates.jsonl`.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from shlo_env import logs
from shlo_env.search.base import Progress

search_log = logs.get("search")
verify_log = logs.get("verify")


def candidate_record(ev: Any, evaluator_index: int = 0) -> dict:
    """One evaluated state as JSON data: what `candidates.jsonl` holds per line."""
    ratio = getattr(ev, "ratio", math.nan)
    failure = getattr(ev, "failure", None)
    tier = getattr(ev, "tier", None)
    status = getattr(ev, "status", None)
    return {
        "hash": getattr(ev, "hash", ""),
        "rewrites": list(getattr(ev, "applied", ()) or ()),
        "xla_actions": list(getattr(ev, "passes", ()) or ()),
        "claimed_tier": getattr(getattr(ev, "numerics", None), "name", None),
        "tier": getattr(tier, "name", None),
        "status": getattr(status, "value", str(status)),
        "ratio": None if not isinstance(ratio, float) or math.isnan(ratio) else ratio,
        "rejected": "" if failure is None else f"{getattr(failure, 'value', failure)}: {getattr(ev, 'detail', '')}",
        "untimed": getattr(ev, "untimed", "") or "",
        "evaluator": evaluator_index,
    }


class SearchWatch(Progress):
    """A `Progress` that draws one tqdm line (when `enabled`), logs, and remembers candidates."""

    def __init__(self, enabled: bool = False, label: str = "search", *, budget_s: float | None = None,
                 stream=None, delay_s: float = 0.0):
        super().__init__(enabled, label, stream=stream, budget_s=budget_s)
        self.delay_s = delay_s
        self.evaluators: list = []
        self._seen: set[tuple[int, str]] = set()
        self._best = math.inf
        self._bar: Any = None

    # --- what the search calls -----------------------------------------------------------------

    def update(self, evaluator, best, note: str = "", force: bool = False) -> None:
        self._watch(evaluator, best)
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.25:
            return
        self._last = now
        if self._bar is None:
            from tqdm.auto import tqdm

            total = self.budget_s if self.budget_s else None
            self._bar = tqdm(total=total, desc=self.label, unit="s", file=self.stream, delay=self.delay_s,
                             leave=True, dynamic_ncols=True,
                             bar_format="{desc}: {bar:12}| {n:.0f}/{total:.0f} s {postfix}" if total
                             else "{desc}: {n:.0f} s {postfix}")
        s = evaluator.stats
        fails = sum(s.failures.values())
        text = (f"best {best.ratio:.3f} ({best.speedup:.2f}x), {s.evaluated} evaluated, {s.cache_hits} cache hits"
                + (f", {fails} rejected" if fails else "") + (f", {note}" if note else ""))
        self.lines.append(text)
        elapsed = now - self.start
        self._bar.n = min(elapsed, self._bar.total) if self._bar.total else elapsed
        self._bar.set_postfix_str(text, refresh=False)
        self._bar.refresh()

    def close(self, evaluator=None, best=None) -> None:
        if evaluator is not None and best is not None:
            self.update(evaluator, best, "done", force=True)
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # --- logs and candidates ---------------------------------------------------------------------

    def _watch(self, evaluator, best) -> None:
        if not any(e is evaluator for e in self.evaluators):
            self.evaluators.append(evaluator)
        index = next(i for i, e in enumerate(self.evaluators) if e is evaluator)
        cache = getattr(evaluator, "cache", None)
        if isinstance(cache, dict) and (search_log.isEnabledFor(10) or verify_log.isEnabledFor(20)):
            for key, ev in list(cache.items()):
                if (index, key) in self._seen or getattr(getattr(ev, "status", None), "value", "") == "":
                    continue
                self._seen.add((index, key))
                record = candidate_record(ev, index)
                search_log.debug("candidate %s %s: %s%s", record["hash"][:12], ", ".join(record["rewrites"])
                                 or "(original)", record["status"],
                                 f", ratio {record['ratio']:.3f}" if record["ratio"] is not None else "")
                if record["rejected"]:
                    verify_log.info("rejected %s (%s): %s", record["hash"][:12],
                                    ", ".join(record["rewrites"]) or "(original)", record["rejected"])
        ratio = getattr(best, "ratio", math.nan)
        if isinstance(ratio, float) and ratio < self._best:
            self._best = ratio
            search_log.info("%s: new best %.3f (%.2fx): %s", self.label, ratio, getattr(best, "speedup", math.nan),
                            best.describe() if hasattr(best, "describe") else "")

    def candidates(self) -> list[dict]:
        """Every state evaluated by the evaluators this watch saw, as `candidate_record`s."""
        out = []
        for i, evaluator in enumerate(self.evaluators):
            for ev in list(getattr(evaluator, "cache", {}).values()):
                out.append(candidate_record(ev, i))
        return out


def watch(progress: bool | None, label: str, budget_s: float | None, delay_s: float = 0.0) -> SearchWatch:
    """The watch a front end gives its search (`progress`: draw the tqdm line)."""
    return SearchWatch(bool(progress), label, budget_s=budget_s, stream=sys.stderr, delay_s=delay_s)


__all__ = ["SearchWatch", "candidate_record", "watch"]

"""Region judging with and without a compile helper (`Regional(compile_helpers=...)`): how many
regions a second worker process lets the search judge per second, and whether the timings stay
as quiet (the region-against-itself control's spread) when compiles run two at a time.

    python benchmarks/region_compile_helpers.py [--programs NAME ...] [--regions 24] [--repeats 3]
                                                [--json out.json]

For each zoo program: `--regions` regions cut at random sites (seed 0, regions of at most 150
ops that can be cut), each judged as the search judges it (control + every alternative, one
interleaved timing per region, `region.judge_groups`), alternately with the evaluator's worker
alone and with one helper (A, B, A, B ...). Each repeat's texts carry a comment of their own,
so no executable is reused from an earlier repeat. Reported per mode: seconds per region
(median over repeats) and the median |1 - control ratio| (the noise a region winner must beat).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import warnings

DEFAULT_PROGRAMS = ["keras_transformer_train", "hf_bart_seq2seq_train", "hf_vit_cls_train"]


def _jobs(name: str, count: int, seed: int = 0):
    from shlo_env import zoo
    from shlo_env.rewrite import driver
    from shlo_env.rewrite import region_cut
    from shlo_env.measure import region_inputs, region_timing

    program = zoo.load(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aug = driver.augment(program)
    n = len(driver.list_alternatives(aug))
    sites = random.Random(seed).sample(range(n), min(n, 3 * count))
    cut = [r for r in region_cut.RegionCutter(aug).cut(sites, 150) if not (r.whole or r.in_body or r.oversize)]
    jobs = []
    for r in cut[:count]:
        cands = [region_cut.Candidate(r, {})] + r.candidates()
        before, afters = region_timing._group_texts(cands, list(range(len(cands))))
        jobs.append((region_inputs.random_inputs(r, seed), before, afters))
    return program.num_ops(), jobs


def _tagged(jobs, tag: str):
    """The same regions with texts no worker has compiled yet (a trailing comment)."""
    end = f"\n// {tag}\n"
    return [(x, before + end, [a + end for a in afters]) for x, before, afters in jobs]


def _judge(runners, jobs) -> tuple[float, list[float]]:
    from shlo_env.measure import region_timing

    t = time.perf_counter()
    out = region_timing.judge_groups(runners, jobs)
    seconds = time.perf_counter() - t
    spreads = [abs(1 - recs[0]["after"][0] / recs[0]["before"][0]) for recs in out if "after" in recs[0]]
    return seconds / len(jobs), spreads


def main() -> None:
    from shlo_env.execute.worker import Worker

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=DEFAULT_PROGRAMS)
    ap.add_argument("--regions", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"load at start: {os.getloadavg()}")
    print("| program | ops | regions | s per region, alone | with a helper | speed-up | control spread, alone | with a helper |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    with Worker() as main_worker, Worker() as helper:
        for name in args.programs:
            ops, jobs = _jobs(name, args.regions)
            per = {"alone": [], "helper": []}
            spread = {"alone": [], "helper": []}
            for k in range(args.repeats):
                for mode, runners in (("alone", [main_worker]), ("helper", [main_worker, helper])):
                    s, sp = _judge(runners, _tagged(jobs, f"{mode} {k}"))
                    per[mode].append(s)
                    spread[mode] += sp
            a, h = statistics.median(per["alone"]), statistics.median(per["helper"])
            sa, sh = statistics.median(spread["alone"]), statistics.median(spread["helper"])
            rows.append(dict(program=name, ops=ops, regions=len(jobs), alone_s=per["alone"], helper_s=per["helper"],
                             spread_alone=sa, spread_helper=sh))
            print(f"| {name} | {ops} | {len(jobs)} | {a:.3f} | {h:.3f} | {a / h:.2f}x | {sa:.4f} | {sh:.4f} |", flush=True)
    print(f"load at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

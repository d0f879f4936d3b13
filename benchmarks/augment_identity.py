"""Check that a change to augment's matching code leaves what augment records unchanged.

    python benchmarks/augment_identity.py --save before.json    # on the old code
    python benchmarks/augment_identity.py --check before.json   # on the new code

Augments (all patterns) the ir_scale stacks (shared and transformer, 40 layers) and every
program of the embedded corpus, and compares the sha256 of each augmented program's text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import ir_scale  # noqa: E402

import shlo_env as se  # noqa: E402
from shlo_env import corpus  # noqa: E402


def programs():
    for shape in ("shared", "transformer"):
        fn, _ = ir_scale.SHAPES[shape]
        x, params = ir_scale.make(40)
        yield f"ir_scale/{shape}_40", se.lower(fn, x, params, name=f"{shape}_40")
    for e in corpus.entries(corpus.CORPUS):
        yield e.uri, corpus.load(e.uri)


def digests() -> dict[str, str]:
    patterns = se.patterns.all_patterns()
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for uri, program in programs():
            out[uri] = hashlib.sha256(se.augment(program, patterns).text().encode()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the digests to this JSON file")
    group.add_argument("--check", type=Path, help="compare with the digests in this JSON file")
    args = ap.parse_args()
    got = digests()
    if args.save:
        args.save.write_text(json.dumps(got, indent=1))
        print(f"{len(got)} programs saved")
        return 0
    want = json.loads(args.check.read_text())
    differ = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    print(f"{len(got)} programs, {len(differ)} differ" + "".join(f"\n  {k}" for k in differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

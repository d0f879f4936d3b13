"""The programs of a bench dataset: the example suite, a corpus dataset (the zoo is one), or a
directory of files."""

from __future__ import annotations

import dataclasses
import os
import random
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shlo_env.ir.program import Program


@dataclasses.dataclass
class Item:
    dataset: str  # "examples", "corpus", "inst-10-20", "inst-20-40", "zoo", or a directory path
    uri: str
    name: str
    program: Program
    info: dict  # the programs-table row (hash, name, ops, specs, metadata)

    @property
    def hash(self) -> str:
        return self.info["hash"]


def dataset_label(dataset: str) -> str:
    from shlo_env import corpus

    if dataset == "examples" or dataset in corpus.datasets():
        return dataset
    return os.path.abspath(dataset)


def short_label(dataset: str) -> str:
    return os.path.basename(dataset.rstrip("/")) + "/" if os.path.isabs(dataset) else dataset


def _sample(items: list, limit: int | None, seed: int) -> list:
    if limit is None or limit >= len(items):
        return list(items)
    keep = set(random.Random(seed).sample(range(len(items)), limit))
    return [x for i, x in enumerate(items) if i in keep]


def _info(program, name: str, metadata: dict) -> dict:
    from shlo_env.ir.hashing import dag_hash

    spec = lambda s: {"shape": list(s.shape), "dtype": str(s.dtype)}  # noqa: E731
    return {"hash": dag_hash(program), "name": name, "ops": program.num_ops(),
            "num_inputs": len(program.in_specs), "num_outputs": len(program.out_specs),
            "in_specs": [spec(s) for s in program.in_specs], "out_specs": [spec(s) for s in program.out_specs],
            "metadata": metadata}


def load_items(dataset: str, limit: int | None = None, seed: int = 0, examples_only: Sequence[str] | None = None,
               progress: bool = False, log=sys.stderr) -> list[Item]:
    """The programs of a dataset (a seeded sample of `limit` of them), loaded and hashed."""
    from shlo_env import corpus
    from shlo_env.bench import examples
    from shlo_env.execute import runtime
    from shlo_env.ir.program import lower

    label = dataset_label(dataset)
    out: list[Item] = []
    if dataset == "examples":
        for ex in _sample(examples.suite(list(examples_only) if examples_only is not None else None), limit, seed):
            p = lower(ex.fn, *ex.args(seed), name=ex.name)
            out.append(Item(label, f"examples/{ex.name}", ex.name, p,
                            _info(p, ex.name, {"description": ex.description, "library": "shlo_env.bench.examples"})))
        return out
    entries = _sample(corpus.entries(dataset), limit, seed)
    skipped = []
    if runtime.platform() != "cpu":  # LAPACK custom calls exist only on CPU
        skipped = [e.name for e in entries if e.metadata.get("custom_calls")]
        entries = [e for e in entries if not e.metadata.get("custom_calls")]
    if skipped:
        print(f"{short_label(label)}: skipping {len(skipped)} CPU-only programs (LAPACK custom calls): "
              f"{', '.join(skipped)}", file=log)
    it = entries
    if progress and len(entries) > 50:
        from tqdm import tqdm

        it = tqdm(entries, desc=f"loading {short_label(label)}", unit="program", file=log, leave=False)
    for e in it:
        try:
            p = corpus.load(e.uri)
        except Exception as err:  # noqa: BLE001 - e.g. a file of the user's that does not parse
            print(f"skipping {e.uri}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  file=log)
            continue
        out.append(Item(label, e.uri, e.name, p, _info(p, e.name, dict(e.metadata))))
    return out


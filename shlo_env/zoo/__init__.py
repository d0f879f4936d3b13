"""The zoo: third-party library models (transformers Flax, flax examples, haiku, equinox, jraph,
keras) as stored StableHLO, the programs the search must win on. Kept apart from the corpus.

    >>> from shlo_env import zoo
    >>> [e.name for e in zoo.entries()][:2]
    ['hf_bert_mlm_infer', 'hf_bert_cls_train']
    >>> p = zoo.load("hf_gpt2_lm_train")            # = shlo_env.corpus.load("zoo/hf_gpt2_lm_train")

The zoo is the `zoo` dataset of `shlo_env.corpus` (`corpus.entries("zoo")`, URIs `zoo/<name>`), so
`shlo-env bench --dataset zoo` runs it. Loading needs only jax; regenerating it needs the
libraries (`pip install shlo_env[zoo]`, then `python -m shlo_env.zoo.generate`). See README.md here.
"""

from __future__ import annotations

from shlo_env.corpus import ZOO, ZOO_DATA, Entry, index_info
from shlo_env.ir.program import Program

DATA = ZOO_DATA


def entries() -> list[Entry]:
    """The zoo's programs with their metadata (library, kind, config, ops, runtime_ms, ...)."""
    from shlo_env import corpus

    return corpus.entries(ZOO)


def load(name: str) -> Program:
    """The zoo program `name` (or a `zoo/<name>` URI); example_args is None."""
    from shlo_env import corpus

    return corpus.load(name if name.startswith(f"{ZOO}/") else f"{ZOO}/{name}")


def info() -> dict:
    """The zoo index's header: versions used, generation time, failures."""
    return index_info(ZOO)


__all__ = ["DATA", "ZOO", "entries", "info", "load"]

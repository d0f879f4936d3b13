"""The embedded corpus of real JAX programs and the sub-graph datasets cut out of it.

    >>> from shlo_env import corpus
    >>> corpus.datasets()
    ['corpus', 'inst-10-20', 'inst-20-40', 'zoo', 'science']
    >>> e = corpus.entries("corpus")[0]; e.uri, e.metadata["library"]
    ('corpus/linen_mlp_train', 'flax.linen')
    >>> program = corpus.load("inst-10-20/17")      # or "inst-10-20/<name>", or a file path

URIs: `corpus/<name>`, `inst-10-20/<index or name>`, `inst-20-40/<index or name>`, or a path to a
`.mlir` / `.mlirbc` file (also `.mlir.xz`, `.mlir.gz`). `entries()` also takes a directory of such
files (`load_dir`). Loaded programs have `example_args=None`: callers make random inputs
(`runtime.random_inputs(program.in_specs, seed)`). Nothing here needs flax, equinox or optax;
only regenerating the data does (`python -m shlo_env.corpus.generate`, see README.md here).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import lzma
import os
import threading
import zipfile
from pathlib import Path
from typing import Any

from shlo_env.ir.program import BYTECODE_MAGIC, Program, parse_module, program_from_module

DATA = Path(__file__).parent / "data"
CORPUS = "corpus"
SUBGRAPH_DATASETS = {"inst-10-20": (10, 20), "inst-20-40": (21, 40)}  # op-count ranges, inclusive
ZOO = "zoo"  # third-party library models, stored apart from the corpus (shlo_env/zoo/, its README)
ZOO_DATA = Path(__file__).parent.parent / "zoo" / "data"
SCIENCE = "science"  # the scientific zoo: diffrax, numpyro, jax-md, ... (shlo_env/zoo/science/, its README)
SCIENCE_DATA = Path(__file__).parent.parent / "zoo" / "science" / "data"
# The datasets stored as one .mlir.xz file per program plus index.json, and their generators.
_STORED = {CORPUS: DATA / CORPUS, ZOO: ZOO_DATA, SCIENCE: SCIENCE_DATA}
_GENERATORS = {CORPUS: "shlo_env.corpus.generate", ZOO: "shlo_env.zoo.generate",
               SCIENCE: "shlo_env.zoo.science.generate"}
PROGRAM_SUFFIXES = (".mlir", ".mlirbc", ".mlir.xz", ".mlir.gz")


class CorpusError(LookupError):
    """An unknown dataset, entry or URI, or missing data files."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One program of a dataset: `load(entry.uri)` gives it; metadata is what the index stores.

    Corpus metadata: name, library, library_version, uses (other libraries and versions), kind
    ("train_step", "optimizer_update", "inference", "simulation"), training, description, ops
    (ops in main, nested regions included), ops_total (all functions), in_specs/out_specs
    ([{"shape", "dtype"}]), custom_calls, dag_hash, runtime_ms (measured at generation, CPU),
    jax/jaxlib versions. Sub-graph metadata: source (the corpus program), ops (ops in main's
    body, constants included), in_specs, out_specs, op_counts, dag_hash.
    """

    uri: str
    name: str
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def load(self) -> Program:
        return load(self.uri)


def datasets() -> list[str]:
    """The embedded datasets."""
    return [CORPUS, *SUBGRAPH_DATASETS, ZOO, SCIENCE]


# --- indexes ------------------------------------------------------------------------------------

@functools.cache
def _index(dataset: str) -> dict:
    if dataset in _STORED:
        path = _STORED[dataset] / "index.json"
        if not path.exists():
            raise CorpusError(f"{dataset} data missing ({path}); run `python -m {_GENERATORS[dataset]}`")
        return json.loads(path.read_text())
    path = DATA / f"{dataset}.zip"
    if not path.exists():
        raise CorpusError(f"dataset {dataset!r} missing ({path}); run "
                          "`python -m shlo_env.corpus.generate --only subgraphs`")
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("index.json"))


@functools.cache
def _entries(dataset: str) -> tuple[Entry, ...]:
    return tuple(Entry(f"{dataset}/{m['name']}", m["name"], m) for m in _index(dataset)["entries"])


@functools.cache
def _by_name(dataset: str) -> dict[str, int]:
    return {e.name: i for i, e in enumerate(_entries(dataset))}


def index_info(dataset: str) -> dict:
    """The dataset's index header: versions used, generation statistics (without the entries)."""
    return {k: v for k, v in _index(_check_dataset(dataset)).items() if k != "entries"}


def _check_dataset(dataset: str) -> str:
    if dataset not in datasets():
        raise CorpusError(f"unknown dataset {dataset!r}; the datasets are {', '.join(datasets())} "
                          "(or pass a directory of .mlir/.mlirbc files)")
    return dataset


def entries(dataset: str | os.PathLike) -> list[Entry]:
    """The entries of an embedded dataset, or of a directory of `.mlir`/`.mlirbc` files."""
    if isinstance(dataset, os.PathLike) or (isinstance(dataset, str) and dataset not in datasets()
                                            and os.path.isdir(dataset)):
        return load_dir(dataset)
    return list(_entries(_check_dataset(str(dataset))))


def load_dir(path: str | os.PathLike) -> list[Entry]:
    """Entries for every program file in a directory (sorted by name; not recursive).

    Each entry's uri is the file's path, so `load(entry.uri)` works. Files are not parsed here.
    """
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"not a directory: {root}")
    out = []
    for p in sorted(root.iterdir()):
        suffix = next((s for s in PROGRAM_SUFFIXES if p.name.endswith(s)), None)
        if suffix is None or not p.is_file():
            continue
        out.append(Entry(str(p), p.name[: -len(suffix)],
                         {"path": str(p), "format": suffix.lstrip("."), "bytes": p.stat().st_size}))
    if not out:
        raise CorpusError(f"no {'/'.join(PROGRAM_SUFFIXES)} files in {root}")
    return out


# --- loading ----------------------------------------------------------------------------------

_zip_lock = threading.Lock()
_zips: dict[tuple[str, int], zipfile.ZipFile] = {}  # one open archive per (dataset, process)


def _read_text(dataset: str, entry: Entry) -> str:
    if dataset in _STORED:
        folder = _STORED[dataset]
        return lzma.decompress((folder / entry.metadata["file"]).read_bytes()).decode()
    with _zip_lock:
        key = (dataset, os.getpid())  # a forked child must not share the parent's file offset
        z = _zips.get(key)
        if z is None:
            z = _zips[key] = zipfile.ZipFile(DATA / f"{dataset}.zip")
        return z.read(entry.metadata["file"]).decode()


def _load_file(path: Path) -> Program:
    raw = path.read_bytes()
    if path.name.endswith(".xz"):
        raw = lzma.decompress(raw)
    elif path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    data: bytes | str = raw if raw.startswith(BYTECODE_MAGIC) else raw.decode("utf-8", errors="replace")
    name = path.name.split(".")[0]
    return program_from_module(parse_module(data, what=str(path)), name=name, source=str(path))


def resolve(uri: str) -> Entry:
    """The entry a dataset URI names (`dataset/name` or `dataset/index`)."""
    dataset, sep, item = str(uri).partition("/")
    if dataset not in datasets():
        raise CorpusError(f"unknown dataset {dataset!r} in URI {uri!r} (and no such file); use "
                          f"corpus/<name>, inst-10-20/<index or name>, inst-20-40/<index or name>, zoo/<name>, "
                          f"science/<name>, or a path to a .mlir/.mlirbc file")
    if not sep or not item:
        raise CorpusError(f"URI {uri!r} names a dataset, not a program; use {dataset}/<name> "
                          f"(list them with shlo_env.corpus.entries({dataset!r}))")
    all_entries = _entries(dataset)
    i = _by_name(dataset).get(item)
    if i is None and item.isdigit() and dataset != CORPUS:
        i = int(item)
        if i >= len(all_entries):
            raise CorpusError(f"{uri!r}: index {i} out of range; {dataset} has {len(all_entries)} programs")
    if i is None:
        examples = ", ".join(e.name for e in all_entries[:3])
        raise CorpusError(f"no program {item!r} in {dataset} ({len(all_entries)} programs, e.g. {examples})")
    return all_entries[i]


def load(uri: str | os.PathLike | Entry) -> Program:
    """The Program a URI names: `corpus/<name>`, `inst-10-20/<index or name>`, ..., or a file path."""
    if isinstance(uri, Entry):
        uri = uri.uri
    text_uri = str(uri)
    dataset = text_uri.partition("/")[0]
    is_dataset_uri = (not isinstance(uri, os.PathLike) and dataset in datasets()
                      and not text_uri.endswith(PROGRAM_SUFFIXES))
    if not is_dataset_uri:
        path = Path(uri)
        if path.is_dir():
            raise CorpusError(f"{path} is a directory; use entries({str(path)!r}) or load_dir")
        if path.is_file():
            return _load_file(path)
        if isinstance(uri, os.PathLike) or text_uri.endswith(PROGRAM_SUFFIXES):
            raise CorpusError(f"no such file: {uri}")
    uri = text_uri
    entry = resolve(uri)
    text = _read_text(dataset, entry)
    module = parse_module(text, what=entry.uri)
    return program_from_module(module, name=entry.name, source=entry.uri)


def cache_clear() -> None:
    """Forget cached indexes (after regenerating the data in this process)."""
    with _zip_lock:
        for z in _zips.values():
            z.close()
        _zips.clear()
    for f in (_index, _entries, _by_name):
        f.cache_clear()


__all__ = ["CorpusError", "Entry", "datasets", "entries", "index_info", "load", "load_dir", "resolve",
           "SUBGRAPH_DATASETS", "DATA", "ZOO", "ZOO_DATA", "SCIENCE", "SCIENCE_DATA", "cache_clear"]

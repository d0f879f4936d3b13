"""`shlo-env bench`: sweep datasets of programs, store every measurement, print the paper's Table 2.

    shlo-env bench                                   # the quick suite: examples + corpus, short budget
    shlo-env bench --dataset inst-10-20 --limit 200 --strategy pick-first beam --budget 10
    shlo-env bench --dataset path/to/my_mlir_dir --executor ray --workers 4
    shlo-env bench --noise-profile                   # re-measure this machine's noise first

For every program of every dataset and every strategy, the program search every front end runs
(`shlo_env.api.search_program`, without the persistent cache) runs
(noise, search with verification of every candidate, confirmation, a final independent
measurement) on an executor (`shlo_env.bench.executors`: local processes by default, or Ray), and the
result goes to the results database (`shlo_env.measure.results_db`, default `./results/shlo_env.sqlite`)
in one transaction. A sweep that is interrupted (Ctrl-C, `kill -9`, a reboot) resumes when run
again with the same options: finished measurements are read from the database, not redone.

The table, per dataset and strategy, in the form of the HloEnv paper's Table 2: the runtime
ratio of the returned program against the original compiled by XLA (= `jax.jit`), measured side
by side: average, max, min, geomean; % faster and % slower by the machine's noise-profile
thresholds (`shlo_env.bench.noise_profile`); % identical to XLA's input (the returned program has the
original's DAG hash); and the roofline column (`shlo_env.measure.roofline`): the returned program's time
over the `cost_analysis` floor, geomean. Reports: Markdown, CSV (per program and summary) and
a PNG of the ratio distributions (matplotlib, an optional extra) in `--out`.

Modules: `options` (what a sweep takes: `SweepOptions`, and `BenchError`), `datasets` (the
programs of a dataset), `sweep` (measure, store, resume), `report` (the table, Markdown, CSV,
PNG) and `cli` (`shlo-env bench`: the only place that turns errors into exit codes).
"""

from shlo_env.bench.datasets import Item, dataset_label, load_items, short_label
from shlo_env.bench.options import DEFAULT_STRATEGY, QUICK_BUDGET_S, QUICK_SUITE, BenchError, SweepOptions
from shlo_env.bench.report import (
    IMPROVED_HEADER, TABLE_HEADER, SweepResult, format_table, improved_rows, markdown_report, summarize, table_rows, write_reports,
)
from shlo_env.bench.sweep import measurement_config, sweep

__all__ = ["DEFAULT_STRATEGY", "IMPROVED_HEADER", "QUICK_BUDGET_S", "QUICK_SUITE", "TABLE_HEADER", "BenchError", "Item",
           "SweepOptions", "SweepResult", "dataset_label", "format_table", "improved_rows", "load_items", "markdown_report",
           "measurement_config", "short_label", "summarize", "sweep", "table_rows", "write_reports"]

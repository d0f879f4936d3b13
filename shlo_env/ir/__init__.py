"""IR and import: MLIR facts, the Program, building ops, the alternatives op, the DAG hash."""

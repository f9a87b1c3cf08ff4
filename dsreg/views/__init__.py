"""L4 how a revision is served: the view rule three ways (rule: numpy, sql: DuckDB, sparse: the
evaluator) and Dataset.
"""

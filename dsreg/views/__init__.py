"""L4 how a revision is served: the view rule three ways, side by side (rule: numpy, the
reference; sql: DuckDB; sparse: the evaluator's), held equal by tests/views/test_rule_parity.py,
and Dataset over the first. Imports point one way: dataset -> rule, sql; sql, sparse -> verified.
"""

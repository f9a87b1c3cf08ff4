"""L0 plumbing: atomic files, worker processes, the progress protocol. Imports nothing of dsreg but
errors.
"""

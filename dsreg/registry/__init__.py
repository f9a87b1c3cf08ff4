"""L3 one registry folder: locating it, the lock, manifests in and out, refs and the log, state,
what is reachable.
"""

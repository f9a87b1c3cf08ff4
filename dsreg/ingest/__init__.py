"""L4 data in: tree scans, sources, payload objects, snapshots, DVC imports."""

"""L5 corrections in: writing overlays, human votes, and the detector composed with the registry."""

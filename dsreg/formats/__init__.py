"""L2 values and formats: names, manifests and their vocabularies, canonical JSON, schemas,
table layouts.
"""

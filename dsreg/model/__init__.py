"""L2 the data model as values: names, manifests and their vocabularies, canonical JSON, schemas,
table layouts.
"""

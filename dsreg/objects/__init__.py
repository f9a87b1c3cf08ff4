"""L1 bytes and digests: the only BLAKE3 caller, the object layout, the object store and batches."""

"""The registry: content-addressed store, manifests, refs, names, checkout, verify and gc."""

"""L5 transfer: remote configuration, a remote's store, push, pull, clone and fetch."""

"""A registry published for readers: pinned views (a revision's labels as a content-addressed
Parquet object any engine reads by URL) and the static website of a remote."""

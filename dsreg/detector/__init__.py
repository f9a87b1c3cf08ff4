"""L3 confident learning on arrays (count, filter, rank): numpy in, numpy out; never the
registry."""

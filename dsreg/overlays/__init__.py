"""Overlays: corrections manifests, the confident-learning detector, vote import, the view rule."""

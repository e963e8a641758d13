"""Typed, frozen models of cluster profiles and recipes, and their YAML loaders.

May import: core, errors."""

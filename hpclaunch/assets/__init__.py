"""The offline asset store: staging from a hub endpoint, manifests, verification, packing; staging here for a
login node's store over SSH (overssh).

May import: config, core, errors."""

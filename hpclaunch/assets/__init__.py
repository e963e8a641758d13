"""The offline asset store: staging from a hub endpoint, manifests, verification, packing."""

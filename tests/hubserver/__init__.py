"""A hub-compatible HTTP server on 127.0.0.1 with injectable faults, and tiny repos to serve.

Fixtures for tests: ``hub_root`` (repos generated once per session), ``hub`` (a started server),
``asset_env`` (a profile ``hubtest`` whose store lies in tmp_path and whose mirror is the server).
"""

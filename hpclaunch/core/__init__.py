"""The ground floor: what every stage uses and nothing of hpclaunch below it — external commands (cmd),
shell quoting (shell), hpclaunch's folders and the bundled files (paths), optional dependencies (extras),
the content-addressed cache (cache), the launcher and scheduler name tables (backends), the version, and where
the cluster's commands run: here or on a login node over one multiplexed SSH connection (remote).

May import: errors."""

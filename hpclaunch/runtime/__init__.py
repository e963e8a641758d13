"""What runs inside a job, never imported by the login side (an import-linter contract): node/ is the
standard-library supervision every node runs, train/ the library recipe scripts use in the ranks.

May import: what its two packages each say (node/, train/); never the login side's stages."""

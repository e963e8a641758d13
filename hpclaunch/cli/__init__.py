"""The command line: one small module per command. Only this layer prints and exits.

May import: api, mcp (to start the server), core, errors: the face, never a stage below it (an
import-linter contract)."""

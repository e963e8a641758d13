"""The command line: one small module per command. Only this layer prints and exits.

May import: api, mcp and ui (to start the MCP server and the web view), core, errors: the face, never a stage
below it (an import-linter contract)."""

"""The Model Context Protocol server (`hpclaunch mcp`, docs/agents.md): hpclaunch's tools for coding agents.

Each tool calls one function of hpclaunch.api and answers with its result through the one encoder (the JSON of the
matching `hpclaunch ... --json`), its notes in a second text block; a failure is an error result with the CLI's
own message. No click, no captured streams.

    server.py   the server: its instructions and every tool registered; serve() over stdio
    answer.py   a result or an error as the tool's answer; `run` calls the api in a worker thread
    before.py   before a job: profiles, recipes, plan, avail, submit (a dry run unless confirmed)
    jobs.py     about jobs: jobs, status, wait (progress while it waits), logs, diagnose, report, compare, cancel

May import: api, core, errors, and the `mcp` SDK (the `mcp` extra), which only `hpclaunch mcp` imports.
"""

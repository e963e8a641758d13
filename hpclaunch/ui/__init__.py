"""The web view (`hpclaunch ui`, docs/ui.md): your jobs in a browser, read-only, safe on a shared login node.

A face over hpclaunch.api, like the CLI and the MCP server: every page is made from the api's results (jobs,
status, curves, diagnose, logs, plan, avail); it cancels, submits and writes nothing. It serves on 127.0.0.1 only,
asks for the token it printed at start, refuses other hosts and other sites, serves only what the registry records
(never a path a request names), and the page loads nothing from anywhere else (no CDN: uPlot is vendored).

    serve.py     the server: the port on 127.0.0.1, the token, uvicorn; `check` (`hpclaunch ui --check`)
    guard.py     every request's checks (Host, cross-site, GET only, the token then its cookie) and headers (CSP)
    app.py       the routes, the JSON ui.js polls, the static files by name
    pages.py     the jobs across profiles, the plan of a recipe, the availability; a page that failed
    jobpage.py   one job (timeline, curves, goodput, recoveries, diagnosis, health, checkpoints, logs); a sweep
    gantt.py     the timeline as a Gantt chart, the ledger's bar, sparklines (SVG, drawn here)
    html.py      escaping by default, the page frame
    tunnel.py    `--profile REMOTE`: the view run on a profile's login node, reached through an SSH tunnel
    static/      ui.js, ui.css and uPlot 1.6.32 (MIT), served from the package (static/README.md)

May import: api, core, errors, and Starlette and uvicorn (the `ui` extra), which only `hpclaunch ui` imports.
"""

"""The web console (``fastmq-admin console``): a small read-mostly page over :class:`Admin`.

``app`` serves the pages and the JSON API on aiohttp, ``views`` turns Admin's answers into that
JSON, ``history`` keeps each group's lag over the last minutes in memory, ``guard`` holds what
keeps it safe (Host and Origin checks, the write token, the confirmation). The pages are plain
HTML, CSS and JavaScript in ``static/`` (shipped in the wheel, no network needed).
"""

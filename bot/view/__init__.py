"""The gate's page: one static HTML file a reviewer reads to see why a gate decided as it did.

Open ``page.py`` to build and render it (``build`` reads a gate's JSON and its run folders, ``render``
writes the HTML); ``run_folder.py`` reads one run folder (its turns, kernel trace, checks, diff and
delivery), as data that is never trusted; ``anchors`` lives in ``bot.gate.report``, so the gate's markdown
and the page agree on every link.
"""

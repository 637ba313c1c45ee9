"""The run viewer (`python -m hcu.osworld.view`): a run directory as web pages, served or exported.

- `data.py`: the run read lazily (run-level records, one row per attempt from its result.json, cached while
  the file is unchanged); `attempt_data.py`: one attempt folder in full, for its page; `compare.py`: two runs
  paired task by task.
- `index_page.py` (with `figures.py`), `task_page.py` (with `steps.py`), `compare_page.py`: the pages, rendered
  from the data with a `links.py` object that says where links point.
- `charts.py`: the run page's and the compare page's charts, drawn by `plots.py` (kinds of chart from plain
  figures) over `svg.py` (scales, ticks, axes, marks: SVG written by hcu, no script or library).
- `site.py`: the runs being viewed and how each page is made; `server.py` serves it (aiohttp), `export.py`
  writes it as files that open from disk.
- `paths.py` (which run files may be handed out) and `redact.py` (no secret reaches a page).
- `static/`: the viewer's own CSS and JS; pages load nothing else.
"""

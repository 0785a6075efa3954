"""The Space's app as a package: `build_demo(model)` builds the UI, app.py (the Space's entry point) loads a model
and launches it.

    texts.py      what the app shows for a model (prompt, examples, sample text) and shared wording
    render.py     colours, the canvas and the other views, as HTML
    worker.py     the one model thread every torch call runs on
    checks.py     input checks: one gr.Error line per bad value
    endpoints.py  each endpoint's parameters by name, and `event`, which binds a handler to its components
    api.py        the API's and MCP's endpoints: the same handlers, text and numbers out
    handlers.py   what the buttons run
    race.py       the Compare tab's race (the two orders and the autoregressive twin) and its takeaway
    controls.py   controls shared by the tabs (options, seeds, run/Stop, replay)
    tabs/         one module per tab
    rewrite_panel.py     the Rewrite panel below Generate, Infill and Compare (three rewrites of a span, Pick, Undo)
    rewrite_handlers.py  what its buttons run
    order_view.py        each character of a run tinted by the pass that wrote it
    layout.py     build_demo
    loading.py    the model, its word list and demo.json, the warm-up pass
    serving.py    the checks of --host and --port, before the model loads
"""

from mdlm_space.layout import build_demo

__all__ = ["build_demo"]

"""One module per view, each with its `draw(run)`; ui/registry.py lists them."""

"""One module per view, each with its `draw(ctx)` (ui/view_context.py); ui/registry.py lists them."""

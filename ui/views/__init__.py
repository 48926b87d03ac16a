"""One module per view, each with its `draw(ctx)` (ui/state/view_context.py); ui/page/registry.py lists them."""

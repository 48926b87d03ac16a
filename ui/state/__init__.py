"""What a visitor has chosen: the URL parameters and their bounds (state.py, url_values.py), the widgets' callbacks
(actions.py), the context every view draws from (view_context.py), and a continuation's text (written.py)."""

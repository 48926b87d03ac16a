"""The page around the views: its outline and layouts (outline.py, layout.py, present.py), the sidebar and sentence
form (controls.py), what the views share to show figures, tables and text (page.py), the report (report.py), and
the views' table (registry.py)."""

"""One layer's real forward pass recorded for the shape flow: every step's tensor and line of code (trace.py,
source_lines.py), and each step's title, axes and words (steps.py)."""

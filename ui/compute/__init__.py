"""The work behind the page: cached computations (computations.py), a sentence's run, trace and batch (runs.py), a
causal model's continuation (generation.py), the loaded models (models.py), the bounded stores and the compute
and heavy slots (stores.py, slots.py, limits.py), CPU priority (priority.py) and attention flow's worker
processes (workers.py)."""

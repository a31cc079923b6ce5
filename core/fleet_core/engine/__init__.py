"""The DSPy Turn engine: routing, direct/rlm/flex programs, delegation, budgets, LMs.

Only this package imports dspy, and only in its submodules: importing ``fleet_core.engine``
itself stays light. ``fleet_core.turns`` loads ``fleet_core.engine.program`` in the worker thread.
"""

"""GEPA optimization of the Turn program (see docs/optimization.md)."""

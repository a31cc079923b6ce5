"""Evaluation tests share the observability fixtures (a real local MLflow store per session)."""

from __future__ import annotations

from observability.conftest import make_config, mlflow_state, obs_config, tracer

__all__ = ["make_config", "mlflow_state", "obs_config", "tracer"]

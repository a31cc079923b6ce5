"""Tracing (MLflow), redaction and immutable replays.

The only package that imports mlflow, and only lazily: importing any module here or creating a
tracer does not load mlflow; the first trace exported (or read) does. Rooms, none of which import
back up the chain: ``records`` (trace data) <- ``spans`` (events to spans) <- ``tracing`` (the
tracer) <- ``export`` (the durable queue's worker); ``mlflow_backend`` (MLflow I/O) reads
``records`` and ``traceview`` (read back, and the one renderer; a stored outcome's view is built
through ``spans``). ``attributes``, a leaf, names every key a trace is written and read with.
"""

"""Every MLflow call of the product, against one explicit destination.

mlflow is imported on first use, never at module import. MLflow keeps process-global state (the
tracking URI, the active experiment and run, the tracer provider); this module never reads or
sets it: every call goes through ``MlflowClient(tracking_uri=...)`` / ``TracingClient(uri)`` and
explicit experiment ids, so two destinations in one process (a runtime and an evaluation run,
two test stores) stay apart. Traces are written whole, at the end of a Turn (``write_trace``),
instead of through MLflow's span processor, which exports to the global tracking URI.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fleet_core.observability import attributes as attr
from fleet_core.observability.destination import MlflowDestination, Scope
from fleet_core.observability.errors import TraceNotFound, TracingUnavailable
from fleet_core.observability.records import SpanRecord, TraceRecord
from fleet_core.observability.redaction import NO_SECRETS, Redactor
from fleet_core.observability.traceview import TraceView, build_view
from fleet_core.offline import apply_offline_defaults
from fleet_core.store.database import advisory_lock

log = logging.getLogger(__name__)
LABELS_ASSESSMENT = "fleet.labels"
# the advisory lock key MLflow's store initialization takes in a PostgreSQL tracking database
# (fleet's own migrations take store.database.MIGRATION_LOCK_KEY)
MLFLOW_SCHEMA_LOCK = 0x666C_6D6C_666C_7731  # "flmlflw1"
# mlflow's package imports are circular: two threads importing it at once (the trace exporter
# and a reader) can see a partly initialized module. Every first import goes through this lock.
_IMPORT_LOCK = threading.Lock()


# MLflow's HTTP client retries a failed request 7 times with exponential backoff and waits 120 s
# per attempt by default: a trace read during an outage hung for minutes. Our bounds instead: one
# attempt, a bounded timeout; the export queue retries with its own per-row backoff. An operator
# who sets these variables keeps their values.
HTTP_BOUNDS = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")


def bound_http_requests(timeout: float, environ: MutableMapping[str, str] | None = None) -> None:
    """Set MLflow's HTTP retries to 0 and its timeout to ``timeout`` seconds where unset (MLflow
    reads them from the environment at every request; there is no per-client setting)."""
    environ = os.environ if environ is None else environ
    environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(timeout))))
    # a database tracking store's own pool, per process (docs/deployment.md, Connection sizing)
    environ.setdefault("MLFLOW_SQLALCHEMYSTORE_POOL_SIZE", "2")
    environ.setdefault("MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW", "2")


@dataclass(frozen=True, slots=True)
class TraceInfoView:
    """The identity fields of a stored trace (for labeling)."""

    trace_id: str
    session_id: str | None
    turn_id: str | None
    replay_sha256: str | None
    replay_selected: bool
    state: str
    experiment_id: str | None


class MlflowBackend:
    """Reads and writes traces, assessments and evaluation runs at one destination."""

    def __init__(self, destination: MlflowDestination, *, redactor: Redactor = NO_SECRETS) -> None:
        if destination.kind == "off" or not destination.tracking_uri:
            raise TracingUnavailable('MLflow is off ([mlflow] destination = "off")')
        self.destination = destination
        self.tracking_uri: str = destination.tracking_uri
        self.redactor = redactor
        self._lock = threading.Lock()
        self._experiments: dict[Scope, str] = {}
        self._client: Any = None
        self._tracing: Any = None

    # clients --------------------------------------------------------------------------------

    def _clients(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                if self.destination.kind == "local" and self.destination.artifact_location:
                    Path(self.tracking_uri.removeprefix("sqlite:///")).parent.mkdir(
                        parents=True, exist_ok=True
                    )
                # MLflow prices LM spans with LiteLLM's cost map: the bundled one, never a
                # download (fleet_core.offline; already applied when fleet_core was imported).
                apply_offline_defaults()
                bound_http_requests(self.destination.request_timeout)
                self._reach_database()
                with _IMPORT_LOCK:
                    from mlflow import MlflowClient
                    from mlflow.tracing.client import TracingClient

                # the clients open (and migrate) the store: one process at a time
                with advisory_lock(self.tracking_uri, MLFLOW_SCHEMA_LOCK):
                    self._client = MlflowClient(tracking_uri=self.tracking_uri)
                    self._tracing = TracingClient(self.tracking_uri)
            return self._client, self._tracing

    def _reach_database(self) -> None:
        """A database tracking URI's server must accept a TCP connection within the request
        timeout: MLflow retries creating its store for about 100 s before failing."""
        parts = urlsplit(self.tracking_uri)
        if parts.scheme.split("+")[0] not in ("postgresql", "postgres", "mysql", "mssql"):
            return
        defaults = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}
        try:
            host = parts.hostname or "localhost"
            port = parts.port or defaults[parts.scheme.split("+")[0]]
        except ValueError:
            return  # MLflow reports a malformed URI itself
        try:
            socket.create_connection((host, port), timeout=self.destination.request_timeout).close()
        except OSError as exc:
            raise TracingUnavailable(
                f"MLflow's tracking database at {host}:{port} is unreachable "
                f"({exc.strerror or exc})"
            ) from None

    def experiment_id(self, scope: Scope) -> str:
        """The id of the scope's experiment, created on first use."""
        with self._lock:
            found = self._experiments.get(scope)
        if found is not None:
            return found
        client, _ = self._clients()
        name = self.destination.experiment(scope)
        try:
            experiment = client.get_experiment_by_name(name)
            if experiment is not None:
                experiment_id = str(experiment.experiment_id)
            else:
                experiment_id = self._create_experiment(client, name, scope)
        except TracingUnavailable:
            raise
        except Exception as exc:
            raise TracingUnavailable(
                f"MLflow at {self.destination.describe()['trackingUri']} is unavailable: "
                f"{self.redactor.error(exc, 500)}"
            ) from None
        with self._lock:
            self._experiments[scope] = experiment_id
        return experiment_id

    def _create_experiment(self, client: Any, name: str, scope: Scope) -> str:
        artifact_location = None
        if self.destination.artifact_location:
            artifact_location = f"{self.destination.artifact_location}/{scope}"
        try:
            return str(client.create_experiment(name, artifact_location=artifact_location))
        except Exception:
            experiment = client.get_experiment_by_name(name)  # created concurrently
            if experiment is None:
                raise
            return str(experiment.experiment_id)

    def close(self) -> None:
        with self._lock:
            self._client = self._tracing = None

    # traces ---------------------------------------------------------------------------------

    def write_trace(self, record: TraceRecord, scope: Scope) -> str:
        """Write a finished Turn trace (spans, info, session metadata) to the scope's experiment."""
        from mlflow.entities import TraceData, TraceInfo, TraceLocation, TraceState

        experiment_id = self.experiment_id(scope)
        _, tracing = self._clients()
        spans = [_mlflow_span(record.trace_id, span) for span in record.spans]
        info = TraceInfo(
            trace_id=record.trace_id,
            trace_location=TraceLocation.from_experiment_id(experiment_id),
            request_time=record.request_time_ms,
            state=TraceState.OK if record.state == "OK" else TraceState.ERROR,
            request_preview=record.request_preview,
            response_preview=record.response_preview,
            client_request_id=record.client_request_id,
            execution_duration=record.duration_ms,
            trace_metadata={"mlflow.trace_schema.version": "3", **record.metadata},
            tags={"mlflow.traceName": "fleet_turn", **record.tags},
        )
        logged_spans = False
        if self.destination.kind != "databricks":
            try:
                tracing.log_spans(experiment_id, spans)
                logged_spans = True
            except NotImplementedError:
                logged_spans = False
        returned = tracing.start_trace(info)
        if not logged_spans or returned.tags.get("mlflow.trace.spansLocation") != "TRACKING_STORE":
            tracing._upload_trace_data(returned, TraceData(spans=spans))
        return record.trace_id

    def _get_trace(self, trace_id: str, attempts: int = 1) -> Any:
        _, tracing = self._clients()
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                return tracing.get_trace(trace_id)
            except Exception as exc:
                last = exc
                if attempt + 1 < attempts:
                    time.sleep(0.5)
        code = getattr(last, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND") or "not found" in str(last).lower():
            raise TraceNotFound(f"No trace '{trace_id}' at the configured MLflow destination")
        raise TracingUnavailable(
            f"Cannot read trace '{trace_id}': {self.redactor.error(last or RuntimeError(), 500)}"
        )

    def load_trace(self, trace_id: str) -> TraceView:
        """The stored trace as a ``TraceView`` (labels from its expectations included)."""
        trace = self._get_trace(trace_id)
        spans = [_span_record(span) for span in trace.data.spans]
        if not spans:
            raise TraceNotFound(f"Trace '{trace_id}' has no spans (not a Fleet Turn trace?)")
        return build_view(trace_id, spans, labels=_labels(trace.info.assessments))

    def trace_info(self, trace_id: str) -> TraceInfoView:
        trace = self._get_trace(trace_id)
        info = trace.info
        root = next((s for s in trace.data.spans if s.parent_id is None), None)
        inputs = (root.inputs if root is not None else None) or {}
        attrs = (root.attributes if root is not None else None) or {}
        return TraceInfoView(
            trace_id=trace_id,
            session_id=info.trace_metadata.get(attr.TRACE_SESSION),
            turn_id=info.trace_metadata.get(attr.TURN_ID) or info.client_request_id,
            replay_sha256=info.tags.get(attr.REPLAY_SHA256) or attrs.get(attr.REPLAY_SHA256),
            replay_selected=bool(inputs.get("replay_snapshot_selected")),
            state=str(info.state),
            experiment_id=getattr(info, "experiment_id", None),
        )

    def search_trace_ids(self, scope: Scope, max_results: int = 100) -> list[str]:
        _, tracing = self._clients()
        found = tracing.search_traces(
            locations=[self.experiment_id(scope)], max_results=max_results
        )
        return [t.info.trace_id for t in found]

    # assessments ----------------------------------------------------------------------------

    def log_labels(
        self, trace_id: str, labels: Mapping[str, Any], *, source_type: str, source_id: str
    ) -> None:
        """Write labels as expectations: the whole set as ``fleet.labels`` plus MLflow's own
        ``expected_response`` / ``expected_facts`` for its built-in judges."""
        from mlflow.entities import AssessmentSource, Expectation

        _, tracing = self._clients()
        source = AssessmentSource(source_type=source_type, source_id=source_id)
        payload = json.loads(json.dumps(dict(labels)))
        entries: list[tuple[str, Any]] = [(LABELS_ASSESSMENT, payload)]
        if payload.get("expected_answer"):
            entries.append(("expected_response", payload["expected_answer"]))
        if payload.get("expected_values"):
            entries.append(("expected_facts", list(payload["expected_values"])))
        for name, value in entries:
            tracing.log_assessment(trace_id, Expectation(name=name, value=value, source=source))

    def read_labels(self, trace_id: str) -> dict[str, Any] | None:
        """The newest ``fleet.labels`` expectation of a trace, or ``None``."""
        trace = self._get_trace(trace_id)
        labels = _labels(trace.info.assessments)
        return labels or None

    def log_feedback(
        self,
        trace_id: str,
        name: str,
        value: Any,
        *,
        rationale: str | None = None,
        run_id: str | None = None,
        source_id: str = "fleet-eval",
    ) -> None:
        from mlflow.entities import AssessmentSource, Feedback

        _, tracing = self._clients()
        metadata = {"mlflow.assessment.sourceRunId": run_id} if run_id else None
        feedback = Feedback(
            name=name,
            value=value,
            rationale=self.redactor.text(rationale, 2_000) if rationale else None,
            source=AssessmentSource(source_type="CODE", source_id=source_id),
            metadata=metadata,
        )
        tracing.log_assessment(trace_id, feedback)

    # evaluation runs ------------------------------------------------------------------------

    def start_run(self, scope: Scope, name: str, tags: Mapping[str, str] | None = None) -> str:
        client, _ = self._clients()
        run = client.create_run(
            self.experiment_id(scope),
            run_name=name,
            tags={"mlflow.runName": name, **dict(tags or {})},
        )
        return str(run.info.run_id)

    def log_run(
        self,
        run_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        tables: Mapping[str, list[dict[str, Any]]] | None = None,
        texts: Mapping[str, str] | None = None,
    ) -> None:
        client, _ = self._clients()
        for key, value in (params or {}).items():
            client.log_param(run_id, key, self.redactor.text(str(value), 500))
        stamp = int(time.time() * 1000)
        for key, value in (metrics or {}).items():
            client.log_metric(run_id, key, float(value), timestamp=stamp, step=0)
        for path, rows in (tables or {}).items():
            client.log_table(
                run_id, data=self.redactor.value(rows_to_columns(rows)), artifact_file=path
            )
        for path, text in (texts or {}).items():
            client.log_text(run_id, self.redactor.text(text, None), path)

    def log_metric_steps(self, run_id: str, series: Mapping[str, list[float]]) -> None:
        """One metric per key with one step per value (e.g. scores per validation pass)."""
        client, _ = self._clients()
        stamp = int(time.time() * 1000)
        for key, values in series.items():
            for step, value in enumerate(values):
                if value == value:  # NaN: no observation in that step
                    client.log_metric(run_id, key, float(value), timestamp=stamp, step=step)

    def link_traces(self, run_id: str, trace_ids: list[str]) -> None:
        client, _ = self._clients()
        try:
            client.link_traces_to_run(trace_ids=trace_ids, run_id=run_id)
        except Exception as exc:  # older servers: the feedback's run metadata still links them
            log.info("could not link traces to run %s: %s", run_id, self.redactor.error(exc))

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        client, _ = self._clients()
        client.set_terminated(run_id, status=status)

    def get_run(self, run_id: str) -> Any:
        client, _ = self._clients()
        return client.get_run(run_id)


def rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    return {k: [_scalar(row.get(k)) for row in rows] for k in keys}


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _labels(assessments: Any) -> dict[str, Any]:
    newest: tuple[int, dict[str, Any]] | None = None
    for assessment in assessments or []:
        if getattr(assessment, "name", None) != LABELS_ASSESSMENT:
            continue
        if getattr(assessment, "valid", True) is False:
            continue
        expectation = getattr(assessment, "expectation", None)
        value = getattr(expectation, "value", None)
        if not isinstance(value, dict):
            continue
        stamp = assessment.last_update_time_ms or assessment.create_time_ms or 0
        if newest is None or stamp >= newest[0]:
            newest = (stamp, value)
    return dict(newest[1]) if newest else {}


def _mlflow_span(trace_id: str, span: SpanRecord) -> Any:
    from mlflow.entities import Span, SpanStatus, SpanStatusCode
    from mlflow.tracing.utils import build_otel_context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan

    otel_trace = int(trace_id.removeprefix("tr-"), 16)
    attributes = {key: json.dumps(value, default=str) for key, value in span.attributes.items()}
    attributes |= {
        "mlflow.traceRequestId": json.dumps(trace_id),
        "mlflow.spanType": json.dumps(span.span_type),
        "mlflow.spanInputs": json.dumps(span.inputs, default=str),
        "mlflow.spanOutputs": json.dumps(span.outputs, default=str),
    }
    status = SpanStatusCode.ERROR if span.status == "ERROR" else SpanStatusCode.OK
    readable = ReadableSpan(
        name=span.name,
        context=build_otel_context(otel_trace, span.span_id),
        parent=build_otel_context(otel_trace, span.parent_id) if span.parent_id else None,
        start_time=span.start_ns,
        end_time=span.end_ns,
        attributes=attributes,
        status=SpanStatus(status, span.status_message).to_otel_status(),
        resource=Resource.get_empty(),
    )
    return Span(readable)


def _span_record(span: Any) -> SpanRecord:
    attributes = dict(span.attributes or {})
    for key in (
        "mlflow.traceRequestId",
        "mlflow.spanType",
        "mlflow.spanInputs",
        "mlflow.spanOutputs",
    ):
        attributes.pop(key, None)
    status_code = str(getattr(span.status, "status_code", "OK"))
    return SpanRecord(
        span_id=int(span.span_id, 16),
        parent_id=int(span.parent_id, 16) if span.parent_id else None,
        name=span.name,
        span_type=str(span.span_type),
        kind=str(attributes.get(attr.KIND) or ("turn" if span.parent_id is None else "other")),
        start_ns=int(span.start_time_ns),
        end_ns=int(span.end_time_ns) if span.end_time_ns else None,
        inputs=span.inputs if isinstance(span.inputs, dict) else {"value": span.inputs},
        outputs=span.outputs if isinstance(span.outputs, dict) else {"value": span.outputs},
        attributes=attributes,
        status="ERROR" if status_code.endswith("ERROR") else "OK",
        status_message=str(getattr(span.status, "description", "") or ""),
    )

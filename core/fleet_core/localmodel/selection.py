"""Which model each role uses, without starting anything or opening the store (``config show``,
``doctor``, ``model status``, the demo's first check): a configured endpoint, the embedded model,
or nothing (with what to set). :class:`ModelInUse` is the one record of a role's model, for these
and for ``fleet_core.api.diagnostics.check_models`` (which adds the endpoint probe's problem)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet_core.config import EffectiveConfig
from fleet_core.endpoints import CONFIGURE_HINT, Role, endpoint_configured, resolve_spec
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel.supervisor import LocalModel


@dataclass(frozen=True, slots=True)
class ModelInUse:
    """One role's model: a configured endpoint (``problem``: its probe's, '' when it answered or
    was not probed), the ``embedded`` model (the local server; ``api_base`` only while it runs),
    or none (``model`` is None; ``problem`` and ``fix`` say what to set). Never a key."""

    role: Role
    model: str | None
    api_base: str | None
    embedded: bool = False
    problem: str = ""
    fix: str = ""

    @classmethod
    def missing(cls, role: Role, problem: str, fix: str) -> ModelInUse:
        """No model for ``role``: ``problem`` says why, ``fix`` what to set."""
        return cls(role, None, None, problem=problem, fix=fix)

    @property
    def configured(self) -> bool:
        """The role has a model: an endpoint's or the embedded one."""
        return self.model is not None

    @property
    def ok(self) -> bool:
        return self.configured and not self.problem

    def describe(self, *, detailed: bool = False, origin: str = "") -> str:
        """One line: ``m at https://x``, ``embedded m (running at ...)`` or ``none (why)``
        (``config show``). ``detailed`` (doctor): the probe's problem, the bare reason, and the
        embedded model named as such; ``origin``, where the endpoint and its key came from."""
        if not self.configured:
            why = self.problem.split(":")[0]
            return why if detailed else f"none ({why})"
        if self.embedded:
            where = f"running at {self.api_base}" if self.api_base else "starts on the first Turn"
            if detailed:
                return f"embedded offline model {self.model} ({where}; no endpoint is configured)"
            return f"embedded {self.model} ({where})"
        problem = f": {self.problem}" if self.problem else ""
        return f"{self.model} at {self.api_base}{problem}" + (f" ({origin})" if origin else "")

    def wire(self) -> dict[str, Any]:
        """camelCase for ``model status --json`` (``inUse``, keyed by role)."""
        return {
            "model": self.model,
            "apiBase": self.api_base,
            "embedded": self.embedded,
            "problem": self.problem or None,
        }


def models_in_use(
    config: EffectiveConfig, roles: tuple[Role, ...] = ("root", "sub")
) -> list[ModelInUse]:
    local = LocalModel.from_config(config)
    found: list[ModelInUse] = []
    running: str | None = None
    checked = False
    for role in roles:
        try:
            spec, _key = resolve_spec(config.settings.llm, config.secrets, role)
        except ModelUnavailable as exc:
            if endpoint_configured(config.settings.llm, role):
                found.append(ModelInUse.missing(role, exc.message, CONFIGURE_HINT))
                continue
            reason = local.unavailable_reason()
            if reason:
                fix = f"{CONFIGURE_HINT}; or {reason.split(': ', 1)[-1]}"
                found.append(ModelInUse.missing(role, f"{exc.message}; {reason}", fix))
                continue
            if not checked:
                running, checked = local.status().api_base, True
            found.append(ModelInUse(role, local.model_id, running, embedded=True))
            continue
        found.append(ModelInUse(role, spec.model, spec.api_base))
    return found

"""Which model each role uses, without starting anything or opening the store (``config show``,
``doctor``, ``model status``, the demo's first check): a configured endpoint, the embedded model,
or nothing (with what to set)."""

from __future__ import annotations

from dataclasses import dataclass

from fleet_core.config import EffectiveConfig
from fleet_core.endpoints import CONFIGURE_HINT, Role, endpoint_configured, resolve_spec
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel.supervisor import LocalModel


@dataclass(frozen=True, slots=True)
class ModelInUse:
    """One role's model: ``embedded`` (the local server; ``api_base`` only while it runs), a
    configured endpoint, or neither (``problem`` and ``fix`` say what to set)."""

    role: str
    model: str | None
    api_base: str | None
    embedded: bool = False
    problem: str = ""
    fix: str = ""

    @property
    def configured(self) -> bool:
        return not self.problem

    def describe(self) -> str:
        if self.problem:
            return "none (" + self.problem.split(":")[0] + ")"
        if self.embedded:
            where = f"running at {self.api_base}" if self.api_base else "starts on the first Turn"
            return f"embedded {self.model} ({where})"
        return f"{self.model} at {self.api_base}"


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
                found.append(ModelInUse(role, None, None, problem=exc.message, fix=CONFIGURE_HINT))
                continue
            reason = local.unavailable_reason()
            if reason:
                fix = f"{CONFIGURE_HINT}; or {reason.split(': ', 1)[-1]}"
                found.append(
                    ModelInUse(role, None, None, problem=f"{exc.message}; {reason}", fix=fix)
                )
                continue
            if not checked:
                running, checked = local.status().api_base, True
            found.append(ModelInUse(role, local.model_id, running, embedded=True))
            continue
        found.append(ModelInUse(role, spec.model, spec.api_base))
    return found

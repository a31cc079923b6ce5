"""Completion the host recognizes: an RLM for the small-model profile (docs/engine.md).

A small model often never calls SUBMIT: it re-sends a cell that already worked until the
deadline (docs/benchmarks.md). ``CompletingRLM`` is ``dspy.RLM`` with its iteration step
wrapped so that the host ends the loop itself:

- the proposed code repeats a cell that already succeeded: it is not run again, and the Turn
  finalizes with that cell's output;
- every artifact the task names exists and is unchanged by a successful cell that followed the
  one that wrote it: the Turn finalizes with the last output.

The answer is then built deterministically from the last non-empty output, or from the head of
the named artifacts when nothing was printed (never a model's retyped figures). Each action's
output is capped (``config={"max_tokens": ...}``) and, after a repeated failed cell, the next
action is asked with a little temperature.
"""

from __future__ import annotations

from typing import Any

import dspy
from dspy.predict.rlm import _strip_code_fences
from dspy.primitives.code_interpreter import CodeInterpreter, FinalOutput
from dspy.primitives.prediction import Prediction
from dspy.primitives.repl_types import REPLHistory, REPLVariable
from dspy.utils.exceptions import format_error_for_lm

from fleet_core.engine.adapter import OPTIONAL_OUTPUTS
from fleet_core.engine.codefirst import OUTPUT_CHARS, normalized
from fleet_core.engine.inspection import ArtifactReport, inspection_cell, parse_inspection
from fleet_core.engine.profile import REPEAT_TEMPERATURE

HOST_FINISH = "host: the task was complete"


#: The small profile's action instructions: short, and the same in every iteration and Turn
#: (an approved GEPA program's ``rlm.generate_action`` text replaces them).
SMALL_ACTION_INSTRUCTIONS = """Complete the user's `task` by writing Python that runs in a \
sandbox REPL. Variables and imports persist between steps. The working directory is the \
workspace: inputs are under files/ (read-only); write output files under artifacts/. When a \
dataset is selected, `context.path` is its file. pandas is installed.
Each step, reply with only one short ```python block, no explanation; you then see what it \
printed and the value of its last expression. Print the figures you compute.
As soon as the printed output answers the task, finish with SUBMIT(answer=...), building the \
answer from variables, never retyping figures. Never repeat a step that already worked.
Also available: llm_query(prompt) asks a sub-model; use_skill(name) reads a Skill of \
skills_catalog."""


class CompletingRLM(dspy.RLM):  # type: ignore[misc]
    """``dspy.RLM`` whose loop the host can end (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        targets: list[str] | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.targets = list(targets or [])
        self.max_tokens = max_tokens
        self._reset()

    def _reset(self) -> None:
        self._succeeded: dict[str, str] = {}  # normalized code -> its output
        self._failed: set[str] = set()
        self._last_output = ""
        # the named artifacts' sha256 after the last successful cell (None: one is missing)
        self._stamps: tuple[str | None, ...] | None = None
        self._warm = False

    def _process_final_output(
        self, result: FinalOutput, output_field_names: list[str]
    ) -> tuple[dict[str, Any] | None, str | None]:
        raw = result.output
        if isinstance(raw, dict) and set(raw) == {"output"} and "output" not in output_field_names:
            raw = {output_field_names[0]: raw["output"]}  # SUBMIT("...") with one value
            result = FinalOutput(raw)
        if isinstance(raw, dict):
            missing = {n: "" for n in OPTIONAL_OUTPUTS if n in output_field_names and n not in raw}
            if missing and len(missing) < len(output_field_names):
                result = FinalOutput({**raw, **missing})
        parsed: tuple[dict[str, Any] | None, str | None]
        parsed = super()._process_final_output(result, output_field_names)
        return parsed

    def _get_output_fields_info(self) -> list[dict[str, Any]]:
        """No fixed SUBMIT signature in the sandbox: SUBMIT(answer=...) may leave the optional
        fields out, and SUBMIT("...") is the answer (checked in ``_process_final_output``)."""
        return []

    def forward(self, **kwargs: Any) -> Prediction:
        self._reset()
        return super().forward(**kwargs)

    def _execute_iteration(
        self,
        repl: CodeInterpreter,
        variables: list[REPLVariable],
        history: REPLHistory,
        iteration: int,
        input_args: dict[str, Any],
        output_field_names: list[str],
        interpreter_factory: Any,
        sub_agent_rules: str,
    ) -> Prediction | REPLHistory:
        config: dict[str, Any] = {}
        if self.max_tokens is not None:
            config["max_tokens"] = self.max_tokens
        if self._warm:
            config["temperature"] = REPEAT_TEMPERATURE
        action = self.generate_action(
            signature=self._action_signature_for_current_factory(
                interpreter_factory, sub_agent_rules
            ),
            variables_info=[variable.format() for variable in variables],
            repl_history=history,
            iteration=f"{iteration + 1}/{self.max_iters}",
            config=config,
        )
        if getattr(action, "reasoning", None) is None:  # the small profile asks for code only
            action.reasoning = ""
        try:
            code = _strip_code_fences(action.code)
        except SyntaxError as exc:
            result: Any = f"[Error] {format_error_for_lm(exc)}"
            return self._process_execution_result(
                action, action.code, result, history, output_field_names
            )
        key = normalized(code)
        if key and key in self._succeeded:
            return self._finish(repl, history, output_field_names, self._succeeded[key])
        self._warm = key in self._failed
        result = self._execute_code(repl, code, input_args)
        processed = self._process_execution_result(
            action, code, result, history, output_field_names
        )
        if isinstance(processed, Prediction) or isinstance(result, FinalOutput):
            return processed
        if isinstance(result, str) and result.startswith("[Error]"):
            self._failed.add(key)
            return processed
        output = processed.entries[-1].output if processed.entries else ""
        shown = "" if output.startswith("(no output") else output
        self._succeeded[key] = shown
        if shown.strip():
            self._last_output = shown
        if self.targets:
            stamps = self._artifact_stamps(repl)
            if stamps is not None and stamps == self._stamps:
                return self._finish(repl, processed, output_field_names, self._last_output)
            self._stamps = stamps
        return processed

    # --- the host's finish -----------------------------------------------------------------

    def _host_cell(self, repl: CodeInterpreter, code: str, shown: str) -> str:
        run_cell = getattr(repl, "run_cell", None)
        if run_cell is None:
            return ""
        result = run_cell(code, None, bootstrap=True, shown=shown)
        return "" if result is None else str(result)

    def _artifacts(self, repl: CodeInterpreter) -> list[ArtifactReport]:
        """The named artifacts as they are now (one host cell, as code-first inspects them)."""
        code = inspection_cell(self.targets, [], [])
        return parse_inspection(self._host_cell(repl, code, "(host: artifact check)"), self.targets)

    def _artifact_stamps(self, repl: CodeInterpreter) -> tuple[str | None, ...] | None:
        """The sha256 of each named artifact; None while any is missing."""
        reports = self._artifacts(repl)
        return tuple(r.sha256 for r in reports) if all(r.written for r in reports) else None

    def _finish(
        self,
        repl: CodeInterpreter,
        history: REPLHistory,
        output_field_names: list[str],
        output: str,
    ) -> Prediction:
        parts = [output.strip() or self._last_output.strip()]
        for report in self._artifacts(repl) if self.targets else []:
            if report.head.strip():
                parts.append(f"Saved {report.path}:\n{report.head.strip()}")
        answer = "\n\n".join(p for p in parts if p)[:OUTPUT_CHARS]
        answer = answer or "The code ran and printed nothing."
        values = {name: "" for name in output_field_names}
        values[output_field_names[0]] = answer
        return Prediction(
            **values,
            trajectory=[e.model_dump() for e in history],
            final_reasoning=HOST_FINISH,
        )

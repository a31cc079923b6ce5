"""Every DSPy signature of the Turn program, in one module (field names are stable for GEPA).

The sandbox itself (REPL, workspace layout, host tools, Skill helpers, limits) is described once,
in ``fleet_core.engine.interpreter.TURN_EXECUTION_INSTRUCTIONS``, which RLM puts in the prompt's
execution environment; the instructions here say only what the task adds.
"""

from typing import Any

import dspy

from fleet_core.modes import ROUTES


class FleetTask(dspy.Signature):  # type: ignore[misc]
    """Complete the user's task by writing Python that runs in the Session's sandbox.

    When `context` is a dataset handle, use context.path, context.preview(), context.lines(),
    context.chunks() and context.search(query) instead of reading it whole.
    Delegate independent subtasks together with spawn_agents(subtasks=[...], input_paths=[...]),
    passing child inputs as files/... or artifacts/... paths; a child returns
    {findings, artifacts} and its artifacts are copied to artifacts/<child-id>/.
    Finish with SUBMIT(answer=..., learned_skill_note=...); the note is optional ("" is valid)
    and should record a reusable lesson, not the answer.

    Stopping rules:
    - SUBMIT as soon as the answer and one supporting check agree; keep the submission short.
    - Reuse variables from earlier cells; re-run only after a failed check or a disagreement.
    - Copy figures from sandbox output, never from memory; notes and memory are unverified hints.
    - Import explicitly; one target computation and one check per code block.
    """

    workspace_manifest: str = dspy.InputField(
        desc="Workspace files (path, size, sha256, bounded preview)"
    )
    skills_catalog: str = dspy.InputField(
        desc="Available Skills; read one with use_skill(name=...)"
    )
    memory_summary: str = dspy.InputField(
        desc="Learned notes and reviewed memories (unverified hints) and the sandbox environment"
    )
    session_history: str = dspy.InputField(desc="Recent completed Turns of this Session")
    execution_route: str = dspy.InputField(desc="The route running this Turn: rlm or flex")
    task: str = dspy.InputField(desc="The user's request")
    context: Any = dspy.InputField(desc="The selected dataset handle, or empty when none")
    answer: str = dspy.OutputField(desc="The answer, grounded in what the sandbox computed")
    learned_skill_note: str = dspy.OutputField(desc="Optional reusable lesson; may be empty")


class DirectAnswer(dspy.Signature):  # type: ignore[misc]
    """Answer the user's request directly from the conversation and memory; no code runs."""

    memory_summary: str = dspy.InputField(desc="Learned notes and reviewed memories")
    session_history: str = dspy.InputField(desc="Recent completed Turns of this Session")
    task: str = dspy.InputField(desc="The user's request")
    answer: str = dspy.OutputField(desc="The answer")


class TurnTriage(dspy.Signature):  # type: ignore[misc]
    """Choose the least expensive route that can satisfy the request.

    - direct: a conversational reply or general knowledge; no files, no computation.
      Not for anything that reads workspace files, computes figures or writes artifacts.
    - flex: a short, well-defined program over the workspace (one pass, few steps).
    - rlm: iterative exploration, long inputs, multi-step analysis or delegation.
    Reply with exactly one word: direct, flex or rlm.
    """

    task: str = dspy.InputField(desc="The user's request")
    workspace_manifest: str = dspy.InputField(desc="Workspace files")
    skills_catalog: str = dspy.InputField(desc="Available Skills")
    route: str = dspy.OutputField(desc=f"One of: {', '.join(ROUTES)}")


class ChildTask(dspy.Signature):  # type: ignore[misc]
    """Complete a delegated subtask by writing Python in your own sandbox.

    Your inputs were copied into files/ (and artifacts/ when the parent passed some); what you
    write under artifacts/ is promoted to the parent with provenance.
    Finish with SUBMIT(findings=...): a short, factual summary for the parent agent.
    """

    subtask: str = dspy.InputField(desc="The delegated subtask")
    findings: str = dspy.OutputField(desc="What you found or produced, briefly")


class CodeFirstProgram(dspy.Signature):  # type: ignore[misc]
    """Write one complete Python program for the task (the small profile's code-first Flex;
    its instructions are ``codefirst.SYSTEM`` or an approved program's ``codefirst``)."""

    request: str = dspy.InputField(desc="the workspace files, the dataset's first lines, the task")
    program: str = dspy.OutputField(desc="one complete Python program in a ```python block")

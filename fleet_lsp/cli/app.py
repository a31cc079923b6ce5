"""The ``fleet-lsp`` typer app: it registers every command, in the order ``--help`` lists
them. A command group is its module's ``typer.Typer``; a top-level command, a function of its
module registered here.

Imports stay lazy: ``fleet-lsp --help`` and ``fleet-lsp config show`` load neither pygls nor
SQLAlchemy (the command modules import typer and :mod:`fleet_lsp.cli.support` only; each
command imports what it needs when it runs), and ``fleet-lsp serve`` (stdio) never loads this
module (:func:`fleet_lsp.cli.main`).
"""

from __future__ import annotations

import os

import typer

from fleet_lsp.cli.commands import (
    config,
    demo,
    doctor,
    evaluation,
    local_model,
    memory,
    mlflow_ui,
    models,
    optimize,
    serve,
    sessions,
    trace_export,
)

# MLflow logs store creation and migrations at INFO on stderr; a CLI user needs only warnings.
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


app = typer.Typer(
    name="fleet-lsp",
    help="Fleet agent runtime: language server (serve) and command-line client.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# --help lists the top-level commands first, then the groups, each in the order given here
app.add_typer(sessions.artifacts_app, name="artifacts")
app.add_typer(sessions.trace_app, name="trace")
sessions.trace_app.command("export")(trace_export.trace_export)
app.add_typer(config.config_app, name="config")
app.add_typer(evaluation.eval_app, name="eval")
app.add_typer(mlflow_ui.mlflow_app, name="mlflow")
app.add_typer(memory.memory_app, name="memory")
app.add_typer(models.session_app, name="session")
app.add_typer(local_model.model_app, name="model")
for command in (
    serve.serve,
    sessions.sessions,
    sessions.turn,
    models.models,
    doctor.doctor,
    demo.demo,
    optimize.optimize,
):
    app.command()(command)

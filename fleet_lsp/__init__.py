"""fleet-lsp: the Fleet agent runtime over the Language Server Protocol, and its CLI."""

__version__ = "0.1.0"

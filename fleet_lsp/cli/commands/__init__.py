"""The command modules, one per command group. Only :mod:`fleet_lsp.cli.app` imports them
and registers their commands; they never import each other (tests/unit/test_invariants.py).
"""

"""``python -m fleet_lsp [serve ...]``: the same entry point as the ``fleet-lsp`` script."""

from fleet_lsp.cli import main

if __name__ == "__main__":
    main()

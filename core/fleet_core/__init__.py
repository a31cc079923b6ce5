"""Fleet's application core (see docs/ARCHITECTURE.md).

Importing it first keeps the heavy libraries that Fleet loads later off the network
(:mod:`fleet_core.offline`): run time reaches only the endpoints the user configured.
"""

from fleet_core.offline import apply_offline_defaults

apply_offline_defaults()

"""The sandbox environment line: Python, the data packages with versions, the int→str limit.

The local sandbox runs the project's interpreter, so the line describes this process's
environment. Versions come from ``importlib.metadata`` (distribution metadata): no package is
ever imported to describe it. The probe runs once per process (``host_environment``).
"""

from __future__ import annotations

import functools
import platform
import sys
from dataclasses import dataclass
from importlib import metadata

#: The packages the line reports: distribution name -> import name.
ENV_PACKAGES: dict[str, str] = {
    "numpy": "numpy",
    "pandas": "pandas",
    "scipy": "scipy",
    "sympy": "sympy",
    "polars": "polars",
    "pyarrow": "pyarrow",
    "scikit-learn": "sklearn",
}


@dataclass(frozen=True, slots=True)
class SandboxEnvironment:
    python: str
    packages: tuple[tuple[str, str | None], ...]  # (distribution, version or None if missing)
    int_max_str_digits: int  # 0: unlimited

    @property
    def missing(self) -> list[str]:
        return [name for name, version in self.packages if version is None]

    def line(self) -> str:
        return environment_line(self.python, dict(self.packages), self.int_max_str_digits)


def _label(name: str, version: str) -> str:
    module = ENV_PACKAGES.get(name, name)
    return f"{name} {version}" + (f" (import {module})" if module != name else "")


def digit_limit_hint(digits: int) -> str:
    if digits <= 0:
        return "int→str conversion has no digit limit"
    return (
        f"int→str conversion is limited to {digits} digits; use sys.set_int_max_str_digits(0) "
        "for bigger numbers"
    )


def environment_line(python: str, packages: dict[str, str | None], int_max_str_digits: int) -> str:
    """``Sandbox: Python 3.12.3; available packages: numpy 2.1.0, ...; not installed: ...;
    int→str conversion is limited to 4300 digits; use sys.set_int_max_str_digits(0) ...``"""
    have = [_label(name, v) for name, v in packages.items() if v is not None]
    missing = [name for name, v in packages.items() if v is None]
    line = f"Sandbox: Python {python or 'unknown'}"
    if have:
        line += f"; available packages: {', '.join(have)}"
    if missing:
        line += f"; not installed: {', '.join(missing)}"
    return f"{line}; {digit_limit_hint(int_max_str_digits)}."


def package_version(name: str) -> str | None:
    """The installed distribution's version (``None``: not installed); never imports it."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def probe_environment() -> SandboxEnvironment:
    packages = tuple((name, package_version(name)) for name in ENV_PACKAGES)
    return SandboxEnvironment(platform.python_version(), packages, sys.get_int_max_str_digits())


@functools.cache
def host_environment() -> SandboxEnvironment:
    """This process's environment (probed once per process)."""
    return probe_environment()

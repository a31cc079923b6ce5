"""scripts/local-model: the prebuilt runtime by default, the llama-cpp-python build (the fallback
it pays once per machine) only where the CPU needs it, consistent with the project (the sdist
uv.lock pins, the portable flags uv uses too), and it reports honestly."""

from __future__ import annotations

import re
import tomllib
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    loader = SourceFileLoader("local_model_script", str(REPO / "scripts" / "local-model"))
    module = ModuleType(loader.name)
    module.__file__ = loader.path
    loader.exec_module(module)
    return module


def test_it_builds_the_sdist_uv_lock_pins_for_the_extra(script: ModuleType) -> None:
    version, url, sha256 = script.locked_sdist()
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"llama-cpp-python[server]=={version}" in extra[script.SOURCE_EXTRA]
    assert not [dep for dep in extra["local-model"] if dep.startswith("llama-cpp-python")]
    assert url.endswith(f"llama_cpp_python-{version}.tar.gz")
    assert re.fullmatch(r"[0-9a-f]{64}", sha256)


def test_its_flags_are_the_portable_ones_uv_uses_too(script: ModuleType) -> None:
    uv = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]
    assert uv["extra-build-variables"]["llama-cpp-python"]["CMAKE_ARGS"] == script.PORTABLE
    assert "-DGGML_NATIVE=OFF" in script.PORTABLE  # -march=native enabled the crashing AMX kernels
    assert "AMX" not in script.PORTABLE and "-DGGML_AVX512=OFF" in script.PORTABLE


def test_a_cached_wheel_is_found_in_the_wheel_cache(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_WHEEL_CACHE", str(tmp_path))
    assert script.cached_wheel("0.3.36") is None
    wheel = tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"")
    (tmp_path / "llama_cpp_python-0.3.35-py3-none-linux_x86_64.whl").write_bytes(b"")
    assert script.cached_wheel("0.3.36") == wheel


def test_progress_names_the_step_and_never_promises_less_than_measured(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(script.os, "cpu_count", lambda: 2)
    log = tmp_path / "build.log"
    log.write_text("-- Configuring done\n")
    assert "configuring" in script._progress(log, 5.0)
    log.write_text("[1/193] gcc a.c\n[96/193] g++ b.cpp\n")
    early = script._progress(log, 120.0)  # fast cheap steps: the measured 15 min still holds
    assert "step 96/193" in early and "2:00 elapsed" in early and "about 13 min left" in early
    late = script._progress(log, 20 * 60.0)  # past the measured total: the steps' own pace
    assert "about 20 min left" in late


def test_the_prebuilt_runtime_is_the_default_and_the_cpu_decides_the_fallback(
    script: ModuleType, tmp_path: Path
) -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [dep for dep in extra["local-model"] if dep.startswith("xllamacpp==")]
    from fleet_core.localmodel.runtime import XLLAMACPP

    assert set(script.PREBUILT_NEEDS) == XLLAMACPP.requires  # one truth for both
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx f16c fma avx2 bmi2\n")
    assert script.cpu_lacks(cpuinfo) == []
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 sse4_2 popcnt avx\n")
    assert script.cpu_lacks(cpuinfo) == ["avx2", "fma", "f16c"]  # -> the source build
    assert script.cpu_lacks(tmp_path / "missing") == []  # unknown: the supervisor's probe decides

"""Which llama.cpp server runs the embedded model (fleet_core.localmodel.runtime): chosen by what
the CPU's flags allow (fake /proc/cpuinfo files), and a runtime that dies of SIGILL while it loads
(tests/localmodel/sigill_server.py, started through the real supervisor and guard) is recorded and
passed over for the next one, on that start and every later one on this CPU."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from fleet_core.config import LocalModelSettings
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel.runtime import (
    AVX2,
    AVX512,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    RUNTIMES,
    XLLAMACPP,
    Runtime,
    Verdicts,
    choose,
    cpu_flags,
    crash_reason,
)
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.localmodel.weights import WeightsSpec

# /proc/cpuinfo of the two kinds of machine this project has run on (flags shortened)
AMD_ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 sha_ni vaes

processor\t: 1
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 sha_ni vaes
"""
INTEL_SPR = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum
flags\t\t: fpu sse sse2 fma avx f16c avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl \
avx512_vnni avx512_bf16 amx_tile
"""
OLD_X86 = """processor\t: 0
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt
"""
FAKE = "tests.localmodel.fake_llama_server"


def fake(name: str, runner: str, requires: frozenset[str] = frozenset()) -> Runtime:
    """A runtime of the real kind (llama-server's flags, its key variable) run as a module."""
    return Runtime(
        name=name, package="pytest", module="tests", dialect="llama-server", requires=requires,
        runner=runner,
    )  # fmt: skip


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_the_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    flags = cpu_flags(write(tmp_path, AMD_ZEN3))
    assert flags is not None and flags >= AVX2 and "avx512f" not in flags
    assert cpu_flags(tmp_path / "missing") is None  # unreadable: the start's probe decides
    assert cpu_flags(write(tmp_path, "processor : 0\n")) is None


@pytest.mark.parametrize(
    ("cpuinfo", "expected", "skipped"),
    [
        # AVX-512 present: the AVX-512 build first, the portable prebuilt behind it
        (INTEL_SPR, ["avx512-build", "portable", "source"], {}),
        # AVX2 without AVX-512 (this project's AMD machines): the portable prebuilt
        (AMD_ZEN3, ["portable", "source"], {"avx512-build": "the CPU lacks avx512bw"}),
        # no AVX2: only the source build, compiled on the machine
        (OLD_X86, ["source"], {"avx512-build": "the CPU lacks avx", "portable": "lacks avx"}),
    ],
)
def test_the_runtimes_are_chosen_by_the_cpus_features(
    tmp_path: Path, cpuinfo: str, expected: list[str], skipped: dict[str, str]
) -> None:
    runtimes = (
        fake("avx512-build", FAKE, AVX512),
        fake("portable", FAKE, AVX2),
        fake("source", FAKE),
    )
    choice = choose(runtimes, cpu_flags(write(tmp_path, cpuinfo)))
    assert [runtime.name for runtime in choice.candidates] == expected
    reasons = dict(choice.skipped)
    for name, why in skipped.items():
        assert why in reasons[name]


def test_the_product_runtimes_need_what_their_builds_use() -> None:
    assert [runtime.name for runtime in RUNTIMES] == [
        "llama-server",
        "xllamacpp",
        "llama-cpp-python",
    ]
    assert LLAMA_SERVER.requires >= {"avx512f", "avx512bw", "avx512vl"}
    assert XLLAMACPP.requires == AVX2 and not LLAMA_CPP_PYTHON.requires  # built on the machine
    assert XLLAMACPP.key_env() == LLAMA_SERVER.key_env() == "LLAMA_API_KEY"
    assert LLAMA_CPP_PYTHON.key_env() == "API_KEY"


def test_a_crash_signal_is_told_from_other_exits() -> None:
    assert "SIGILL" in crash_reason(-signal.SIGILL)  # a process's own code
    assert "SIGILL" in crash_reason(128 + signal.SIGILL)  # the guard's 128 + N
    assert "SIGSEGV" in crash_reason(128 + signal.SIGSEGV)
    assert crash_reason(1) == crash_reason(0) == crash_reason(None) == ""
    assert crash_reason(128 + signal.SIGTERM) == ""  # stopped, not unable to run


def _starts(record: Path) -> list[dict]:
    lines = record.read_text().splitlines() if record.exists() else []
    return [entry for entry in map(json.loads, lines) if entry["event"] == "start"]


def test_a_runtime_that_dies_of_sigill_is_passed_over_now_and_later(
    tmp_path: Path, home: Path, weights: WeightsSpec, record: Path
) -> None:
    cpuinfo = write(tmp_path, INTEL_SPR)  # the flags say yes: only running it tells
    runtimes = (
        fake("avx512-build", "tests.localmodel.sigill_server", AVX512),
        fake("portable", FAKE, AVX2),
    )
    settings = LocalModelSettings(start_timeout_seconds=30)
    model = LocalModel(settings, home, weights=weights, poll_seconds=0.2, runtimes=runtimes,
                       cpuinfo=cpuinfo)  # fmt: skip
    try:
        endpoint = model.ensure()
        assert endpoint.runtime == "portable"
        first, second = _starts(record)
        assert first["runtime"] == "sigill" and "--alias" in second["argv"]
        # recorded beside the weights, keyed by the runtime's version and the CPU's flags
        (reason,) = json.loads((home / "runtimes.json").read_text()).values()
        assert "SIGILL" in reason and "illegal instruction" in reason
        assert model.status().runtime == "portable"
        choice = model.runtime_choice()
        assert [r.name for r in choice.candidates] == ["portable"]
        assert "SIGILL" in dict(choice.skipped)["avx512-build"]
        model.stop()
        again = model.ensure()  # the crashed build is not tried again on this CPU
        assert again.runtime == "portable" and len(_starts(record)) == 3
        assert "sigill" not in {entry.get("runtime") for entry in _starts(record)[2:]}
    finally:
        model.stop()
    # another CPU (other flags) is another key: there it would be tried
    assert not Verdicts(home / "runtimes.json").failed(
        runtimes[0],
        cpu_flags(write(tmp_path, INTEL_SPR.replace("amx_tile", "amx_tile avx512_fp16"))),
    )


def test_when_every_runtime_crashes_the_start_says_to_build_one(
    tmp_path: Path, home: Path, weights: WeightsSpec, record: Path
) -> None:
    runtimes = (fake("only", "tests.localmodel.sigill_server"),)
    settings = LocalModelSettings(start_timeout_seconds=30)
    model = LocalModel(settings, home, weights=weights, poll_seconds=0.2, runtimes=runtimes,
                       cpuinfo=write(tmp_path, AMD_ZEN3))  # fmt: skip
    with pytest.raises(ModelUnavailable, match=r"SIGILL.*scripts/local-model build"):
        model.ensure()
    model.release()
    assert not model.status().running
    # and from then on the model is reported unavailable, with why, before anything starts
    assert "only: died of SIGILL" in model.unavailable_reason()


def test_a_cpu_without_the_features_gets_a_reason_not_a_crash(
    tmp_path: Path, home: Path, weights: WeightsSpec, record: Path
) -> None:
    runtimes = (fake("avx512-build", FAKE, AVX512), fake("portable", FAKE, AVX2))
    model = LocalModel(LocalModelSettings(), home, weights=weights, runtimes=runtimes,
                       cpuinfo=write(tmp_path, OLD_X86))  # fmt: skip
    reason = model.unavailable_reason()
    assert "avx512-build: the CPU lacks avx" in reason and "portable: the CPU lacks avx" in reason
    with pytest.raises(ModelUnavailable):
        model.ensure()
    model.release()
    assert not _starts(record)  # nothing was started

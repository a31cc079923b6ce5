"""Every JSON-RPC error code the server sends means one thing: a client maps codes to kinds."""

from __future__ import annotations

from fleet_lsp import protocol


def test_each_error_code_names_one_kind() -> None:
    by_code: dict[int, set[str]] = {}
    for kind, code in protocol.ERROR_CODES.items():
        if code != protocol.INVALID_PARAMS:  # InvalidInput and LabelInvalid are bad params
            by_code.setdefault(code, set()).add(kind)
    transport = {
        protocol.PARSE_ERROR: "ParseError",
        protocol.INVALID_REQUEST: "InvalidRequest",
        protocol.METHOD_NOT_FOUND: "MethodNotFound",
        protocol.SERVER_NOT_INITIALIZED: "ServerNotInitialized",
        protocol.SERVER_BUSY: "ServerBusy",
        protocol.FLEET_ERROR: "FleetError",
    }
    for code, kind in transport.items():
        by_code.setdefault(code, set()).add(kind)
    shared = {code: kinds for code, kinds in by_code.items() if len(kinds) > 1}
    assert shared == {}, f"error codes with more than one meaning: {shared}"

"""The registry of wire error codes: one status and hint per code, shared and service codes alike."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared_contract import CONTRACT_CODES, EDGE_CODES, SHARED_CODES, ErrorCodeSpec, register_codes, registered_codes
from shared_contract import error_codes as registry_module


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Codes a test registers stay in that test."""
    monkeypatch.setattr(registry_module, "_REGISTERED", dict(registered_codes()))


def spec(code: str = "TEST_CODE", status: int = 500, hint: str = "Do this.") -> ErrorCodeSpec:
    return ErrorCodeSpec(code=code, status=status, hint=hint)


def test_the_shared_codes_are_the_edges_and_the_contract_layers_and_registered() -> None:
    assert set(SHARED_CODES) == set(EDGE_CODES) | set(CONTRACT_CODES)
    assert not set(EDGE_CODES) & set(CONTRACT_CODES)
    for code, shared in SHARED_CODES.items():
        assert registered_codes()[code] == shared
    assert SHARED_CODES["INVALID_REQUEST"].status == 422
    assert SHARED_CODES["QDRANT_UNAVAILABLE"].status == 503


def test_registering_is_idempotent_and_refuses_a_second_spec_for_a_code() -> None:
    register_codes([spec()])
    register_codes([spec()])
    assert registered_codes()["TEST_CODE"] == spec()
    with pytest.raises(ValueError, match="already registered"):
        register_codes([spec(hint="Do that.")])
    with pytest.raises(ValueError, match="already registered"):
        register_codes([spec(status=503)])
    with pytest.raises(ValueError, match="already registered"):
        register_codes([spec("QDRANT_UNAVAILABLE", 503, "A service's own idea.")])


def test_a_refused_batch_registers_nothing() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_codes([spec("OTHER_CODE"), spec("OTHER_CODE", hint="Another.")])
    assert "OTHER_CODE" not in registered_codes()


@pytest.mark.parametrize(
    ("code", "status", "hint"),
    [("TEST_CODE", 500, " "), ("lower_case", 500, "Do this."), ("TEST_CODE", 200, "Do this."), ("TEST_CODE", 600, "x")],
)
def test_a_spec_needs_an_upper_case_code_an_error_status_and_a_hint(code: str, status: int, hint: str) -> None:
    with pytest.raises(ValidationError):
        ErrorCodeSpec(code=code, status=status, hint=hint)


def test_the_registry_is_read_only_from_outside() -> None:
    with pytest.raises(TypeError):
        registered_codes()["TEST_CODE"] = spec()  # type: ignore[index]

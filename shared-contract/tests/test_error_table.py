"""The error table type: most specific row wins, row values over the code's, the fallback for the rest."""

from __future__ import annotations

import pytest

from shared_contract import ErrorCodeSpec, registered_codes
from shared_contract import error_codes as registry_module
from shared_contract.error_table import ErrorTable, error_row

OWN_HINT = "Retry the thing."
FAULT = ErrorCodeSpec(code="TEST_FAULT", status=500, hint="Report it.")
GONE = ErrorCodeSpec(code="TEST_GONE", status=404, hint=OWN_HINT)


class DomainError(Exception):
    pass


class GoneError(DomainError):
    pass


class SizedError(DomainError):
    def __init__(self, size: int) -> None:
        super().__init__(f"internal: {size} bytes at host-1")
        self.size = size


class StoreDown(Exception):
    pass


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_REGISTERED", dict(registered_codes()))


def make_table() -> ErrorTable:
    return ErrorTable(
        [
            error_row(DomainError, "TEST_FAULT", message="Something failed."),
            error_row(GoneError, "TEST_GONE", server_fault=False),
            error_row(
                SizedError,
                "INVALID_REQUEST",
                lambda exc: 413 if exc.size > 10 else 422,
                message="Too big.",
                detail=lambda exc: f"The body has {exc.size} bytes." if exc.size > 10 else None,
                hint="Send less.",
            ),
            error_row(StoreDown, "QDRANT_UNAVAILABLE", message="The store is down.", cause_only=True),
        ],
        codes=[FAULT, GONE],
        fallback_code="TEST_FAULT",
        fallback_message="Unexpected failure.",
    )


def test_building_a_table_registers_its_codes() -> None:
    make_table()
    assert registered_codes()["TEST_GONE"].hint == OWN_HINT
    assert registered_codes()["TEST_FAULT"] == FAULT


def test_the_most_specific_row_wins_and_fills_in_from_its_code() -> None:
    table = make_table()
    gone = table.classify(GoneError("No such thing."))
    assert (gone.status, gone.code, gone.message, gone.hint) == (404, "TEST_GONE", "No such thing.", OWN_HINT)
    base = table.classify(DomainError("internal detail"))
    assert (base.status, base.code, base.message, base.hint) == (500, "TEST_FAULT", "Something failed.", "Report it.")


def test_a_subclass_without_a_row_answers_from_its_parents() -> None:
    class NearlyGone(GoneError):
        pass

    table = make_table()
    assert table.row_of(NearlyGone) is table.rows[GoneError]
    assert table.classify(NearlyGone("Not here.")).code == "TEST_GONE"


def test_status_and_message_can_be_read_from_the_error() -> None:
    table = make_table()
    big = table.classify(SizedError(20))
    assert (big.status, big.message, big.hint) == (413, "The body has 20 bytes.", "Send less.")
    small = table.classify(SizedError(5))
    assert (small.status, small.message) == (422, "Too big.")  # no built message: the fixed one


def test_an_error_no_row_covers_gets_the_fallback_with_a_traceback() -> None:
    table = make_table()
    bug = table.classify(RuntimeError("a bug"))
    assert (bug.status, bug.code, bug.message, bug.hint) == (500, "TEST_FAULT", "Unexpected failure.", "Report it.")
    assert bug.log_traceback
    with pytest.raises(LookupError, match="RuntimeError"):
        table.row_of(RuntimeError)


def test_only_5xx_server_faults_without_cause_only_log_a_traceback() -> None:
    table = make_table()
    assert table.classify(DomainError("x")).log_traceback
    assert not table.classify(GoneError("x")).log_traceback
    assert not table.classify(SizedError(20)).log_traceback
    assert not table.classify(StoreDown("x")).log_traceback


def test_a_row_with_an_unregistered_code_or_a_second_row_for_a_class_is_refused() -> None:
    with pytest.raises(LookupError, match="TEST_NOBODY"):
        ErrorTable([error_row(GoneError, "TEST_NOBODY")], fallback_code="TEST_FAULT", fallback_message="x")
    with pytest.raises(ValueError, match="two rows"):
        ErrorTable(
            [error_row(GoneError, "INVALID_REQUEST"), error_row(GoneError, "INVALID_REQUEST")],
            codes=[FAULT],
            fallback_code="TEST_FAULT",
            fallback_message="x",
        )

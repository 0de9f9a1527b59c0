"""The one error table type both services build theirs with.

A table has one row per domain error class: its wire code, its status (the code's unless the row
says otherwise), its message for callers, a hint where the code's own is too broad, and how the
failure is logged. An error answers from the row of its most specific class that has one (its
MRO); an error no row covers is a fault of the service, answered with the table's fallback code.
The codes come from ``shared_contract.error_codes``: the shared ones are registered there, a
table registers its service's own when it is built. Pure data: the HTTP edge turns a classified error
into the response (``rag_runtime.http.classified_response``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from shared_contract.error_codes import ErrorCodeSpec, register_codes, registered_codes

_E = TypeVar("_E", bound=Exception)


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """What one domain error class answers. Build rows with :func:`error_row`, which checks the readers' types."""

    error_type: type[Exception]
    code: str
    # None: the code's status. A callable reads it from the error (a status that depends on its values).
    status: int | Callable[[Any], int] | None
    # The fixed message for callers; None: the error's own text, written to be shown.
    message: str | None
    # A message built from the error's values; when it returns None the fixed message applies.
    detail: Callable[[Any], str | None] | None
    # Where one code covers causes with different remedies; None: the code's hint.
    hint: str | None
    # False: an outcome the caller caused or expects (a timeout, a shutdown, load), not a failure.
    server_fault: bool
    # A typed dependency failure whose text is the whole story: logged with its cause, no traceback.
    cause_only: bool


def error_row(
    error_type: type[_E],
    code: str,
    status: int | Callable[[_E], int] | None = None,
    *,
    message: str | None = None,
    detail: Callable[[_E], str | None] | None = None,
    hint: str | None = None,
    server_fault: bool = True,
    cause_only: bool = False,
) -> ErrorRow:
    """One table row; ``status`` and ``detail`` may read the error's own values."""
    return ErrorRow(error_type, code, status, message, detail, hint, server_fault, cause_only)


@dataclass(frozen=True, slots=True)
class Classified:
    """What one error answers on the wire, and whether its log line needs the traceback."""

    status: int
    code: str
    message: str
    hint: str
    log_traceback: bool


class ErrorTable:
    """A service's one error table: ``rows``, its own ``codes``, and the fallback for uncovered errors."""

    def __init__(
        self,
        rows: Iterable[ErrorRow],
        *,
        codes: Iterable[ErrorCodeSpec] = (),
        fallback_code: str,
        fallback_message: str,
    ) -> None:
        own = tuple(codes)
        self.codes: Mapping[str, ErrorCodeSpec] = MappingProxyType({spec.code: spec for spec in own})
        by_type: dict[type[Exception], ErrorRow] = {}
        for each in rows:
            if each.error_type in by_type:
                raise ValueError(f"{each.error_type.__name__} has two rows")
            self.spec(each.code)  # a code nobody registered is refused here, not on the first failure
            by_type[each.error_type] = each
        self._rows = by_type
        fallback = self.spec(fallback_code)
        self.fallback = Classified(fallback.status, fallback_code, fallback_message, fallback.hint, log_traceback=True)
        # Last: a table refused above registers nothing.
        register_codes(own)

    @property
    def rows(self) -> Mapping[type[Exception], ErrorRow]:
        """Every row by its error class (read-only)."""
        return MappingProxyType(self._rows)

    @property
    def error_types(self) -> tuple[type[Exception], ...]:
        """The classes with a row (each needs an exception handler)."""
        return tuple(self._rows)

    def spec(self, code: str) -> ErrorCodeSpec:
        """The registered spec of ``code``: this service's own, or a shared one."""
        spec = self.codes.get(code) or registered_codes().get(code)
        if spec is None:
            raise LookupError(f"{code} is not a registered error code")
        return spec

    def row_for(self, error_type: type[Exception]) -> ErrorRow | None:
        """The row of ``error_type``'s most specific class that has one, or None."""
        for cls in error_type.__mro__:
            found = self._rows.get(cls)
            if found is not None:
                return found
        return None

    def row_of(self, error_type: type[Exception]) -> ErrorRow:
        """Like :meth:`row_for`, for a class the table must cover."""
        found = self.row_for(error_type)
        if found is None:
            raise LookupError(f"no row of the error table covers {error_type.__name__}")
        return found

    def classify(self, exc: Exception) -> Classified:
        """Status, code, message, hint and log treatment of ``exc`` (the fallback when no row covers it)."""
        found = self.row_for(type(exc))
        if found is None:  # a bug: its log line needs the traceback
            return self.fallback
        spec = self.spec(found.code)
        status = found.status(exc) if callable(found.status) else found.status or spec.status
        built = found.detail(exc) if found.detail is not None else None
        message = built or found.message or str(exc)
        log_traceback = status >= 500 and found.server_fault and not found.cause_only
        return Classified(status, found.code, message, found.hint or spec.hint, log_traceback)

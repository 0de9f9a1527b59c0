"""A rejected secret never appears in the start-up error (its traceback is printed to the log)."""

from __future__ import annotations

import traceback

import pytest
from pydantic import ValidationError

from retrieval_agent.settings import Settings
from shared_contract import ContractConfigError, load_settings

SHORT_KEY = "hunter2-short-secret"


def test_a_short_api_key_is_not_in_the_validation_error() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(api_key=SHORT_KEY)
    assert "API_KEY" in str(caught.value).upper()
    assert SHORT_KEY not in str(caught.value)
    assert SHORT_KEY not in repr(caught.value)


def test_a_short_api_key_is_not_in_the_config_error_or_its_traceback() -> None:
    with pytest.raises(ContractConfigError) as caught:
        load_settings(Settings, api_key=SHORT_KEY)
    assert str(caught.value).startswith("API_KEY")
    assert SHORT_KEY not in str(caught.value)
    assert SHORT_KEY not in repr(caught.value)
    assert SHORT_KEY not in "".join(traceback.format_exception(caught.value))

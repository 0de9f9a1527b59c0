"""The multipart form read by its model: each field's text turned into its value, refusals worded per field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingestion_service.api.models import IngestForm
from ingestion_service.api.validation import invalid_request

BASE = {"file_id": "f1", "filename": "a.md", "collection_name": "file-f1", "user_id": "u1"}


def _refusal(fields: dict[str, str]) -> str:
    with pytest.raises(ValidationError) as caught:
        IngestForm.model_validate(fields)
    return str(invalid_request(caught.value, form=True))


def test_text_fields_become_their_values() -> None:
    form = IngestForm.model_validate(
        {**BASE, "overwrite": "No", "force": "Y", "tags": " a, b ,,a", "attributes": '{"n": 1}', "category": " "}
    )
    assert (form.overwrite, form.force) == (False, True)
    assert form.tags == ["a", "b"]
    assert form.attributes == {"n": 1}
    assert form.category is None
    assert form.collection_type == "file"
    assert IngestForm.model_validate({**BASE, "tags": '["x", "y"]', "overwrite": ""}).tags == ["x", "y"]
    assert IngestForm.model_validate({**BASE, "overwrite": ""}).overwrite is True


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({**BASE, "zz": "1", "aa": "2"}, "Invalid request: unknown form field(s) 'aa', 'zz'."),
        ({**BASE, "file_id": "   "}, "Invalid request: form field 'file_id' is required."),
        ({k: v for k, v in BASE.items() if k != "user_id"}, "Invalid request: form field 'user_id' is required."),
        ({**BASE, "force": "maybe"}, "Form field 'force' must be a boolean (true/false/1/0/yes/no)."),
        (
            {**BASE, "tags": "[1]"},
            "Invalid request: form field 'tags' must be comma-separated or a JSON array of strings.",
        ),
        ({**BASE, "attributes": "[]"}, "Invalid request: form field 'attributes' must be a JSON object."),
        (
            {**BASE, "attributes": '{"a": NaN}'},
            "Invalid request: form field 'attributes' is not valid JSON (NaN and Infinity are not JSON numbers).",
        ),
        # The first field's refusal, in the order the fields are read, over other fields' pydantic errors.
        (
            {**BASE, "collection_name": "a b", "overwrite": "maybe"},
            "Form field 'overwrite' must be a boolean (true/false/1/0/yes/no).",
        ),
    ],
)
def test_each_refusal_is_worded_for_its_field(fields: dict[str, str], message: str) -> None:
    assert _refusal(fields) == message


def test_other_errors_name_the_field_and_pydantic_s_reason() -> None:
    assert (
        _refusal({**BASE, "filename": "a/b"})
        == "Invalid request: filename: Value error, must be a file name, not a path"
    )

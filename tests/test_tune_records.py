"""What tune reads of an existing study's record (`study.stored_request`): the wait for a
record another worker is about to write follows `RECORD_WAIT_SECONDS` as it is at the call,
so a setting (or a test's patch) made after import is the one in force."""

from __future__ import annotations

import pytest

from purejaxppo.drivers.tune import study as studies


class EmptyStudy:
    """A study with no record and no trials (as one just created by another worker looks);
    counts how often its trials are read."""

    user_attrs: dict = {}

    def __init__(self):
        self.reads = 0

    def get_trials(self, deepcopy: bool = True) -> list:
        self.reads += 1
        return []


@pytest.mark.parametrize("patched, wait", [(0.0, None), (60.0, 0.0)])
def test_the_record_wait_is_read_at_the_call(monkeypatch, patched, wait):
    monkeypatch.setattr(studies, "RECORD_WAIT_SECONDS", patched)
    study = EmptyStudy()
    with pytest.raises(ValueError, match="was not made by purejaxppo tune"):
        studies.stored_request(study, "study 'tune'", **({} if wait is None else {"wait": wait}))
    # no wait: refused on the first read (a default bound at import waited 10 s, ~50 reads)
    assert study.reads == 1

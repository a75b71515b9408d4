"""Names re-exported by the package's namespaces are the defining modules' objects."""

from __future__ import annotations

import importlib

import pytest

import thermonet.evidence as ev


@pytest.mark.parametrize("name", ev.__all__)
def test_evidence_exports(name):
    obj = getattr(ev, name)
    module = ev._LAZY.get(name, "thermonet.evidence._result")
    assert obj is getattr(importlib.import_module(module), name)


def test_evidence_unknown_name():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ev.nope  # noqa: B018


def test_evidence_all_is_complete():
    assert set(ev.__all__) == {"EvidenceResult", *ev._LAZY}

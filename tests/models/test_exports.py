"""Every lazy export of `calibrl.models` resolves to the object its module defines."""

from __future__ import annotations

import importlib

import calibrl.models as models
from calibrl.protocol.tags import TAGS


def test_every_export_resolves():
    for name in models.__all__:
        module = importlib.import_module(models._EXPORTS[name])
        assert getattr(models, name) is getattr(module, name)
    assert models.TAGS is TAGS

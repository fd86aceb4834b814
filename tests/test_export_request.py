"""One export signature: `export_torch` and `export_onnx` take `ExportRequest`'s
arguments, checked before torch is imported."""

from __future__ import annotations

import inspect

import pytest

import purejaxppo as pjp
from purejaxppo.export import ExportRequest


def test_exporters_share_the_request_signature():
    signature = inspect.signature(pjp.export_torch)
    assert signature == inspect.signature(pjp.export_onnx)
    assert list(signature.parameters) == [
        f.name for f in ExportRequest.__dataclass_fields__.values() if f.name != "_"
    ]
    keyword_only = [n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY]
    assert keyword_only == ["index", "overwrite", "networks"]
    assert pjp.export_torch.__name__ == "export_torch" and "overwrite" in pjp.export_onnx.__doc__


def test_bad_arguments_fail_like_a_plain_function():
    with pytest.raises(TypeError, match=r"export_torch\(\): too many positional"):
        pjp.export_torch({}, pjp.PPOConfig(), "p.pt", None, None, 0)  # index is keyword-only
    with pytest.raises(TypeError, match=r"export_onnx\(\): .*'bogus'"):
        pjp.export_onnx({}, pjp.PPOConfig(), "p.onnx", bogus=1)

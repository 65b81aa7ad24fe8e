"""The stable public names of ``docs/ARCHITECTURE.md`` are reachable from ``import rass_theory``."""
import subprocess
import sys

import pytest


def test_torch_subpackage_is_reachable_lazily():
    """``rt.torch`` resolves on first use and only then imports torch."""
    pytest.importorskip("torch")
    code = ("import sys, rass_theory as rt; before = 'torch' in sys.modules; "
            "v = rt.torch.verifiers.rass(); print(before, 'torch' in sys.modules, callable(v))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"], out


def test_unknown_attribute_raises_attribute_error():
    import rass_theory as rt

    with pytest.raises(AttributeError):
        rt.no_such_name  # noqa: B018

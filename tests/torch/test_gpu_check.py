"""``bench/gpu_check.py --device cpu --quick`` runs unattended and writes a complete JSON report."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "bench", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_cpu_mode_writes_report(tmp_path):
    out = tmp_path / "check.json"
    # the pytest subset itself is what this suite runs, so the in-process smoke test skips it
    rc = load_script().main(["--device", "cpu", "--out", str(out), "--quick", "--skip-tests"])
    report = json.loads(out.read_text())
    assert rc == 0 and report["ok"] is True
    assert report["environment"]["device"] == "cpu"
    assert report["exactness"]["rass"]["passed"] is True
    assert report["exactness"]["mutant_single_draft_residual"]["passed"] is False
    row = report["throughput"][0]
    assert "error" not in row, row
    for name in ("rmc", "dgrs", "rass", "threshold", "resample"):
        assert row[f"{name}_samples_per_s"] > 0
    assert not os.path.exists(f"{out}.tmp")


def test_missing_cuda_is_a_clear_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_script().main(["--device", "cuda", "--out", str(tmp_path / "x.json"), "--quick"])

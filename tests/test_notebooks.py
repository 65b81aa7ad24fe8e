"""Execute the tutorial notebooks (nbclient, python3 kernel, cwd = notebooks/)."""
import json
import time
from pathlib import Path

import nbformat
import pytest

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT_S = 120


def test_at_least_three_notebooks():
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_without_outputs_and_in_sync_with_generator(name, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_nb_build", NB_DIR / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(tmp_path)
    stored = json.loads((NB_DIR / name).read_text())
    assert stored == json.loads((tmp_path / name).read_text()), \
        f"{name} differs from notebooks/_build.py; run `python notebooks/_build.py`"
    for cell in stored["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name):
    from nbclient import NotebookClient

    nb = nbformat.read(NB_DIR / name, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError (with the traceback) if any cell fails
    elapsed = time.perf_counter() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    print(f"{name}: executed in {elapsed:.1f} s")

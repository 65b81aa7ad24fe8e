"""Checkpoint and resume: interrupted runs end with the uninterrupted counts, bit for bit."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rass_theory as rt
from rass_theory.stats.checkpoint import load_checkpoint
from rass_theory.stats.config import build_node, harness_config

from _stats_stubs import Named, resample

KW = dict(K=4, delta=0.5, dim=8, n_samples=10_000, chunk_size=2_000, n_bins=512, two_sample_size=300, rng=12)
N_CHUNKS = 2 * 5  # float64 and float32 passes of 5 chunks each
CALLS = 7  # verifier calls per chunk: batches of 1, 2, 3, 7 rows, the rest, and two sequence-probe calls


def test_keyboard_interrupt_writes_checkpoint_and_resume_matches(tmp_path):
    path = tmp_path / "run.npz"
    reference = rt.check_exactness(Named(resample), **KW)
    with pytest.raises(KeyboardInterrupt):
        rt.check_exactness(Named(resample, interrupt_at=3 * CALLS), checkpoint=path, checkpoint_every=100, **KW)
    assert path.exists()
    cfg = harness_config(Named(resample), 4, 0.5, 8, n_samples=KW["n_samples"], rng=12, chunk_size=KW["chunk_size"],
                         n_bins=KW["n_bins"], two_sample_size=KW["two_sample_size"], checkpoint=path, checkpoint_every=100)
    counts, next_chunk, complete = load_checkpoint(path, cfg.fingerprint(), build_node(cfg), 2)
    assert next_chunk == 3 and not complete and counts[0].n_rows == 3 * 2_000  # nothing lost
    resumed = rt.check_exactness(Named(resample), checkpoint=path, **KW)
    assert resumed.resumed_from_chunk == 3
    assert all(a.equal(b) for a, b in zip(resumed.pass_counts, reference.pass_counts))
    assert [t.pvalue for t in resumed.tests] == [t.pvalue for t in reference.tests]
    # a completed checkpoint returns the same verdict without running anything
    again = rt.check_exactness(Named(resample, interrupt_at=0), checkpoint=path, **KW)
    assert again.counts.equal(reference.counts) and again.resumed_from_chunk == N_CHUNKS


def test_killed_subprocess_resumes_bit_for_bit(tmp_path):
    path = tmp_path / "killed.npz"
    stubs_dir = os.path.dirname(__file__)
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {stubs_dir!r})
        import rass_theory as rt
        from _stats_stubs import Named, resample
        def slow(*args):
            time.sleep(0.3)
            return resample(*args)
        rt.check_exactness(Named(slow), checkpoint={str(path)!r}, checkpoint_every=1, **{KW!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 120
        while not path.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(0.5)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    cfg = harness_config(Named(resample), 4, 0.5, 8, n_samples=KW["n_samples"], rng=12, chunk_size=KW["chunk_size"],
                         n_bins=KW["n_bins"], two_sample_size=KW["two_sample_size"], checkpoint=path, checkpoint_every=1)
    _, next_chunk, complete = load_checkpoint(path, cfg.fingerprint(), build_node(cfg), 2)
    assert 1 <= next_chunk < N_CHUNKS and not complete
    resumed = rt.check_exactness(Named(resample), checkpoint=path, **KW)
    reference = rt.check_exactness(Named(resample), **KW)
    assert resumed.resumed_from_chunk == next_chunk
    assert all(a.equal(b) for a, b in zip(resumed.pass_counts, reference.pass_counts))


def test_foreign_checkpoint_is_refused_and_kept(tmp_path):
    path = tmp_path / "run.npz"
    rt.check_exactness(Named(resample), checkpoint=path, **KW)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"different run configuration.*delta"):
        rt.check_exactness(Named(resample), checkpoint=path, **{**KW, "delta": 0.6})
    with pytest.raises(ValueError, match=r"verifier"):
        rt.check_exactness(Named(resample, name="other"), checkpoint=path, **KW)
    with pytest.raises(ValueError, match=r"seed"):
        rt.check_exactness(Named(resample), checkpoint=path, **{**KW, "rng": 13})
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", [b"", b"not a zip file at all", None])
def test_corrupt_checkpoint_is_refused_and_kept(tmp_path, content):
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez(path, something=np.arange(3))  # a valid npz that is not ours
        content = path.read_bytes()
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=str(path.name)):
        rt.check_exactness(Named(resample), checkpoint=path, **KW)
    assert path.read_bytes() == content


def test_bad_checkpoint_paths(tmp_path):
    with pytest.raises(ValueError, match="checkpoint directory"):
        rt.check_exactness(Named(resample), checkpoint=tmp_path / "missing" / "x.npz", **KW)
    with pytest.raises(ValueError, match="checkpoint"):
        rt.check_exactness(Named(resample), checkpoint=tmp_path, **KW)


def test_default_grid_resumes_every_cell(tmp_path):
    """The default (grid) run checkpoints one file per cell and resumes them bit for bit."""
    kw = dict(n_samples=2_000, chunk_size=1_000, n_bins=256, two_sample_size=100, rng=5)
    path = tmp_path / "grid.npz"
    reference = rt.check_exactness(Named(resample), **kw)
    with pytest.raises(KeyboardInterrupt):
        rt.check_exactness(Named(resample, interrupt_at=30), checkpoint=path, checkpoint_every=1, **kw)
    assert (tmp_path / "grid.cell0.npz").exists()
    resumed = rt.check_exactness(Named(resample), checkpoint=path, **kw)
    assert [t.pvalue for t in resumed.tests] == [t.pvalue for t in reference.tests]
    assert any(r.resumed_from_chunk > 0 for r in resumed.cells)

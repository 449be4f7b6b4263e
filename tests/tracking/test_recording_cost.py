"""What keeps recording a trial cheap, and that it changes nothing in what is recorded:
plots come out byte for byte as ``savefig`` draws them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from result_docs import make_sweep

from sweep import plots


def test_plots_are_the_same_pngs_as_savefig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [doc for _, doc in make_sweep(tmp_path / "sweep")]

    def digests(out: Path) -> list[str]:
        written = plots.trial_plots(docs[0], out / "trial") + plots.sweep_plots(docs, out / "sweep")
        return [hashlib.sha256(p.read_bytes()).hexdigest() for p in written]

    ours = digests(tmp_path / "agg")

    def savefig(fig, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        return path

    monkeypatch.setattr(plots, "_save", savefig)
    assert len(ours) == 4 and ours == digests(tmp_path / "savefig")

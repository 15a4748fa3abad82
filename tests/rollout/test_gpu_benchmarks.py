"""The GPU benchmarks (benchmarks/gpu) run end to end on a CPU with their tiny setting, so they
are ready when a GPU is lent (slow: each builds a model and trains or generates)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["bench_generation.py", "bench_train_step.py"])
def test_gpu_benchmark_runs_tiny_on_cpu(script, tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks/gpu" / script), "--tiny",
                    "--out", str(out)], check=True, cwd=tmp_path, timeout=600,
                   env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin",
                        "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)})
    result = json.loads(out.read_text())
    if script == "bench_generation.py":
        assert set(result["results"]) == {"turn1_calibrl", "turn1_transformers",
                                          "turn2_calibrl", "turn2_transformers"}
        # equal lengths on both sides: no EOS, exactly --new-tokens each
        assert result["results"]["turn1_calibrl"]["tokens"] == \
            result["results"]["turn1_transformers"]["tokens"]
    else:
        for name in ("plain", "gradient_checkpointing"):
            median = result["results"][name]["median"]
            parts = sum(median[k] for k in ("generation_s", "scoring_s", "forward_backward_s",
                                            "optimiser_s"))
            assert parts == pytest.approx(median["step_s"], rel=1e-6)

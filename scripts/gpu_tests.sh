#!/usr/bin/env bash
# Run the GPU-only tests on a machine with an NVIDIA GPU: HFEngine on CUDA, the vLLM engine
# (generation, seeds, in-place weight updates), the probe through vLLM, `calibrl train` with vLLM
# following the trained weights, and with 2+ GPUs a 2-GPU FSDP run (v1, full shard) checked
# against one GPU and resumed from its shards (tests/training/test_gpu_scale.py).
#
#   scripts/gpu_tests.sh            # creates .venv-gpu, installs calibrl[dev,vllm], runs them
#   VENV=/path/to/venv scripts/gpu_tests.sh -x -k vllm   # extra args go to pytest
#
# A separate virtual environment: vLLM pins its own CUDA build of torch, which must not replace
# the CPU torch of the development .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv-gpu}
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet -e ".[dev,vllm]"  # vLLM brings the torch it was built against

"$PY" - <<'PYEOF'
import torch
assert torch.cuda.is_available(), "no CUDA device visible: the GPU tests would all skip"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
PYEOF

# -rs lists skips: with vLLM and 2 GPUs there should be none (one GPU skips the FSDP test).
"$PY" -m pytest -q -rs -m gpu tests/rollout tests/probe tests/training "$@"

# The GPU speed benchmarks of issue 27 (benchmarks/gpu/README.md): generation against
# transformers' generate, and the two-turn RLCR step with and without gradient checkpointing,
# on Qwen2.5-0.5B- and 1.5B-shaped random models in bf16. GPU_BENCH=0 skips them.
if [ "${GPU_BENCH:-1}" = 1 ]; then
    for shape in 0.5b 1.5b; do
        "$PY" benchmarks/gpu/bench_generation.py --shape "$shape"
        "$PY" benchmarks/gpu/bench_train_step.py --shape "$shape"
    done
fi

#!/usr/bin/env bash
# The GPU checks that need no network: the CUDA tests, a CUDA training run in bf16, a 1-GPU
# FSDP (v1) run that checkpoints through accelerate's save_state and resumes, then the GPU speed
# benchmarks (benchmarks/gpu/README.md) and the 2-rank CPU tests. For a machine whose Python
# already has torch, transformers and accelerate; calibrl runs from src/. vLLM is not needed
# (its tests skip without it; scripts/gpu_tests.sh installs it).
#
#   scripts/gpu_checks.sh LOG_DIR
#   GPU_BENCH_SHAPES="0.5b" MULTI_PROCESS=0 scripts/gpu_checks.sh LOG_DIR   # fewer, shorter
#
# Logs: LOG_DIR/{env,pytest_gpu,train_cuda,train_fsdp,resume_fsdp,bench_*,pytest_multi_process}.log;
# the benchmarks' results go to benchmarks/results/gpu_*.json as usual.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:?give a folder for the logs}
mkdir -p "$LOG"
export PYTHONPATH="$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
status=0
step() {  # step NAME COMMAND...: run it, log it, remember a failure
    local name=$1; shift
    echo "== $name: $*" | tee "$LOG/$name.log"
    "$@" 2>&1 | tee -a "$LOG/$name.log" | tail -n 25
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc" | tee -a "$LOG/$name.log"
    [ "$rc" -eq 0 ] || status=1
}

step env "$PY" -c "import torch, transformers, accelerate; print('torch', torch.__version__, \
'transformers', transformers.__version__, 'accelerate', accelerate.__version__, \
torch.cuda.get_device_name(0))"
step pytest_gpu "$PY" -m pytest -q -rs -m gpu -p no:cacheprovider tests/rollout tests/probe \
    tests/training/test_gpu_scale.py

"$PY" -m calibrl data countdown --out "$WORK/data" --n 2000 --test-size 100 --numbers 2..4 \
    --max-number 30 --prompt-style compact > /dev/null
TRAIN=(--config configs/cpu_tiny.yaml model.path=tiny "data.train_path=$WORK/data/train.parquet"
       data.eval_path=null logging.tensorboard=false optim.total_steps=6 checkpoint.every=3)
step train_cuda "$PY" -m calibrl train "${TRAIN[@]}" optim.mixed_precision=bf16 \
    "logging.output_dir=$WORK/runs" logging.run_name=cuda
FSDP=(accelerate launch --num_processes 1 --use_fsdp --fsdp_version 1
      --fsdp_sharding_strategy FULL_SHARD --fsdp_auto_wrap_policy NO_WRAP
      --fsdp_state_dict_type SHARDED_STATE_DICT --fsdp_use_orig_params true
      --mixed_precision bf16 -m calibrl train "${TRAIN[@]}" "logging.output_dir=$WORK/runs")
step train_fsdp "${FSDP[@]}" logging.run_name=fsdp
# Resume the FSDP run from its step-3 checkpoint (the newer one removed) and finish it.
rm -rf "$WORK/runs/fsdp/checkpoint-000006" "$WORK/runs/fsdp/final-model"
step resume_fsdp "${FSDP[@]}" logging.run_name=fsdp checkpoint.resume=auto
ls -R "$WORK/runs" > "$LOG/runs_tree.txt" 2>&1

for shape in ${GPU_BENCH_SHAPES-0.5b 1.5b}; do
    step "bench_generation_$shape" "$PY" benchmarks/gpu/bench_generation.py --shape "$shape"
    step "bench_train_step_$shape" "$PY" benchmarks/gpu/bench_train_step.py --shape "$shape"
done
if [ "${MULTI_PROCESS:-1}" = 1 ]; then
    step pytest_multi_process "$PY" -m pytest -q -m slow -p no:cacheprovider \
        tests/training/test_multi_process.py
fi
exit $status

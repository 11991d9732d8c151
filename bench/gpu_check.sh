#!/usr/bin/env bash
# The checks that need a GPU, as one script for a machine with CUDA (the `device` tool's H100/H200 here).
#   bash bench/gpu_check.sh [tests|suite|bench]...   (default: tests bench)
# tests: tests/devices (CUDA parity: eager, aot_eager, inductor); suite: the not-slow suite with pytest-xdist
# (that machine has torch 2.11 and Python 3.12); bench: bench/frontend.py with inductor on CUDA, stillframe
# and torch.compile side by side; generate: GPT-2 and Llama generate() tokens per second, inductor, CUDA; optim: bench/optimizer_step.py
# (compile(opt.step)) with inductor on CUDA, without and with an lr scheduler. Logs and the benchmark's JSON go to $OUT (default ./gpu_out).
# Wheels of missing packages (immutables) may be carried in .whl/ (see /work/.library/device/README.md).
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c "import sys,torch,transformers;print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name())"
status=0
for what in "${@:-tests bench}"; do
  for step in $what; do
    case $step in
      tests) timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE tests/devices 2>&1 | tee "$OUT/cuda_tests.log" | tail -25 || status=1 ;;
      suite) timeout 300 python3 -m pytest -q -m "not slow" -p no:cacheprovider -n 14 -rfE 2>&1 | tee "$OUT/suite.log" | tail -40 || status=1 ;;
      bench) timeout 300 python3 bench/frontend.py --backend inductor --device cuda --quick --only gpt2 --only llama \
                 --only bert --only linear_chain --json "$OUT/bench_gpu.json" 2>&1 | tee "$OUT/bench.log" | tail -30 || status=1 ;;
      optim) for sched in "" --scheduler; do
                 timeout 200 python3 bench/optimizer_step.py --backend inductor --device cuda --steps 200 $sched \
                   2>&1 | tee -a "$OUT/optim.log" | tail -8 || status=1
               done ;;
      generate) timeout 240 python3 bench/dynamic.py --backend inductor --generate --tokens --device cuda \
                 2>&1 | tee "$OUT/generate.log" | tail -12 || status=1 ;;
      *) echo "unknown step $step" >&2; status=2 ;;
    esac
  done
done
exit $status

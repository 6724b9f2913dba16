#!/usr/bin/env bash
# hwnas on a CUDA machine: every path that picks the GPU when there is one (supernet strategies
# train on cuda by default, zoo training, the cuda device with ONNX Runtime's CUDA provider,
# NVML energy, --nproc on fewer GPUs than processes). Run from anywhere with hwnas installed:
#
#     bash experiments/cuda_check.sh 2>&1 | tee cuda_check.log
#
# Each step is bounded (timeout); the whole run takes about 6 minutes on one H100. What it
# printed on 2026-11-27 (one H100, torch 2.11 cu130, ONNX Runtime 1.30 without the CUDA
# provider) is in docs/supernets.md ("On a GPU").
set -u
work="$(mktemp -d)"; cd "$work" || exit 1
export HWNAS_HOME="$work/home"
step() { echo; echo "=== $*"; }
step env
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, onnxruntime as o; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'ort', o.__version__, o.get_available_providers())"
python3 -c "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); print('NVML total energy (mJ)', pynvml.nvmlDeviceGetTotalEnergyConsumption(h))" \
    || echo "no NVML (pip install 'hwnas[cuda]')"
step "measure on the cuda device (ONNX Runtime's CUDA provider)"
timeout 120 hwnas measure --device cuda --arch '|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|'
echo "exit $?"
for args in "gdas --device pixel3 --epochs 2" "darts --device fpga --epochs 1 --set order=2" \
            "fbnet --device pixel3 --epochs 1" "proxyless --device v100_64 --epochs 1" \
            "singlepath --device v100_64 --epochs 1" "oneshot --device pixel3 --epochs 1"; do
    step "search --strategy $args --data digits"
    # shellcheck disable=SC2086
    start=$(date +%s)
    timeout 300 hwnas search --strategy $args --data digits --no-zoo 2>&1 | tail -3
    echo "$(( $(date +%s) - start )) s wall"
done
step "--nproc 2 on a machine with one GPU (refused in one line when it has one)"
timeout 120 hwnas search --strategy gdas --device pixel3 --data digits --epochs 1 --nproc 2 --no-zoo
echo "exit $?"
step "a table search's zoo retrained on the GPU, then verified"
timeout 120 hwnas search --device pixel3 --budget 30 | tail -2
zoo="$(ls -d runs/*/zoo | head -1)"
timeout 300 hwnas train "$zoo" --data digits --epochs 2 | tail -3
timeout 120 hwnas zoo verify "$zoo" | tail -1

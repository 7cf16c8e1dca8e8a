#!/usr/bin/env bash
# What a GPU lease checks (docs/gpu.md, "A first GPU lease"): `pytest -k cuda` three times,
# then the throughput pieces; each step has its own time limit, and each part fits a 9-minute
# command. Logged to OUT_DIR/gpu_check.log.
#
#   scripts/gpu_check.sh docs/gpu_figures/LEASE [tests|figures]
set -uo pipefail

OUT=${1:?usage: scripts/gpu_check.sh OUT_DIR [tests|figures]}
PARTS=${2:-tests figures}
PYTHON=${PYTHON:-python3}
for part in $PARTS; do
    case $part in
        tests | figures) ;;
        *) echo "error: $part is no part: give tests, figures or neither" >&2; exit 2 ;;
    esac
done
OUT=$(realpath -m "$OUT")  # before the cd below
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
cd "$(dirname "$0")/.."
has() { "$PYTHON" -c "import $1" 2>/dev/null; }

echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)"
uptime

tests() {
    local order=() workers=()
    if has pytest_randomly; then order=(-p randomly); fi
    if has xdist; then workers=(-n 4); fi
    echo "== pytest -k cuda, 1 of 3"
    timeout 200 "$PYTHON" -m pytest -k cuda -p no:cacheprovider -rfEs "${order[@]}"
    for run in 2 3; do
        echo "== pytest -k cuda, $run of 3"
        timeout 120 "$PYTHON" -m pytest -k cuda -p no:cacheprovider -p no:randomly -rfEs \
            "${workers[@]}"
    done
}

# One piece of gpu_figures.py, with a limit a little above the piece's own.
piece() {
    local seconds=$1
    shift
    timeout $((seconds + 10)) "$PYTHON" benchmarks/gpu_figures.py --steps 5000 \
        --piece-seconds "$seconds" "$@"
}

figures() {
    echo "== the paper's config and uniform replay, CUDA graphs"
    piece 75 --out "$OUT/graphs" --only exact --set agent.cuda_graphs=true
    piece 75 --out "$OUT/graphs" --only uniform --set agent.cuda_graphs=true
    echo "== eight runs at once, CUDA graphs"
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        piece 90 --out "$OUT/graphs_mps" --only concurrent --set agent.cuda_graphs=true
        echo quit | nvidia-cuda-mps-control
    else
        piece 90 --out "$OUT/graphs" --only concurrent --set agent.cuda_graphs=true
    fi
    echo "== the paper's config, eager (the default)"
    piece 75 --out "$OUT/eager" --only exact
}

for part in $PARTS; do
    "$part"
done
uptime

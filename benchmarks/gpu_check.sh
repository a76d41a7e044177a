#!/usr/bin/env bash
# GPU check: install the package (and the baseline wheels in .whl/, if any) into a
# throw-away folder, run the GPU test suite with VISION_CUTS_REQUIRE_GPU=1 (a skip
# is a failure), the CPU suite, then the grid benchmark with both backends and the
# baselines in the same run. Logs go to $OUT (default /tmp/vc-gpu-check).
#
#   bash benchmarks/gpu_check.sh              # everything
#   bash benchmarks/gpu_check.sh quick        # GPU tests only
#   bash benchmarks/gpu_check.sh quick grabcut  # GPU tests + GrabCut evaluation
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/vc-gpu-check}
mkdir -p "$OUT"
SITE=/tmp/vc-site
rm -rf "$SITE" && mkdir -p "$SITE"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl
fi
if ! python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" . \
        >"$OUT/install.log" 2>&1; then
    echo "pip could not build the package here; copying the sources instead"
    cp -r vision_cuts "$SITE/" && cp -r kernels "$SITE/vision_cuts/kernels" \
        && cp -r datasets "$SITE/vision_cuts/datasets"
fi
export PYTHONPATH="$SITE"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
rc=0
# -P: do not put the source tree on sys.path (the installed package is tested)
VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider -m gpu tests \
    2>&1 | tee "$OUT/tests_gpu.log" || rc=1
if [ "${1:-}" != "quick" ]; then
    python3 -P -m pytest -q -p no:cacheprovider -m "not gpu and not gui" tests \
        2>&1 | tee "$OUT/tests_cpu.log" || rc=1
    python3 -P benchmarks/bench_grid.py --backend cpu gpu --sizes 0.3 2 4 8 \
        --volumes 128 256 --json "$OUT/bench_grid.json" 2>&1 | tee "$OUT/bench_grid.log" \
        || rc=1
fi
if [ "${1:-}" != "quick" ] || [ "${2:-}" = "grabcut" ]; then
    # GrabCut against cv2.grabCut: the benchmark images (needs VISION_CUTS_DATA) and a
    # 1920x1080 picture end to end
    if [ -n "${VISION_CUTS_DATA:-}" ]; then
        python3 -P benchmarks/eval_grabcut.py --backend cpu gpu \
            --json "$OUT/eval_grabcut.json" 2>&1 | tee "$OUT/eval_grabcut.log" || rc=1
        python3 -P benchmarks/eval_grabcut.py --backend cpu gpu --size-test \
            --json "$OUT/eval_grabcut_1080p.json" 2>&1 | tee "$OUT/eval_grabcut_1080p.log" \
            || rc=1
    else
        echo "VISION_CUTS_DATA is not set: GrabCut evaluation skipped"
    fi
fi
exit $rc

#!/usr/bin/env bash
# GPU check: install the package (and the baseline wheels in .whl/, if any) into a
# throw-away folder, then run the chosen sections. Logs go to $OUT (default
# /tmp/vc-gpu-check). Sections:
#   gputests    the GPU test suite with VISION_CUTS_REQUIRE_GPU=1 (a skip is a failure)
#   cputests    the CPU test suite against the installed package
#   grid        grid max-flow benchmark, both backends and PyMaxflow in the same run,
#               then the long-path energies (bench_grid_long_paths.py: the GPU
#               solver's hand-over to the CPU solver, the GPU run to the end beside it)
#   diagonal    the diagonal neighbourhoods: their GPU tests, the randomised
#               differential test of their solver settings (gpu_grid_check.py --diag),
#               then the grid benchmark
#               with 8-connected pictures (4-connected beside them) and 18- / 26-
#               connected volumes, PyMaxflow and the CPU in the same run, the cut-time
#               distribution of multi-label moves and volumes (diag_cut_times.py), and
#               GrabCut with 4 and 8 neighbours on the GPU against cv2.grabCut
#   grabcut     GrabCut evaluation against cv2.grabCut, plus the 1920x1080 size test
#               and every call's first and median time from an empty kernel cache
#   assignment  assignment benchmark against SciPy and lap in the same run
#   stereo      Middlebury stereo evaluation against cv2.StereoSGBM
#   refine      interactive GrabCut latency (box cut, then strokes) at ~1 MP
#   stress      the assignment stress tests (cost families of real callers), stacks
#               of small problems (square and rectangular) against the CPU, the
#               work of the GPU assignment on the optical flow's own cost stacks, and
#               the assignment benchmark's single problems (geometric up to 4000)
#   flow        optical flow: its GPU tests, the video benchmark (a 640x480 clip,
#               both backends, DIS and Farneback in the same run), then end to end
#               on both backends against PyrLK, Farneback and DIS (Middlebury)
#   graph       general-graph max-flow: its GPU tests, then the benchmark (RLG, genrmf,
#               ADG) against SciPy Dinic and the CPU backend in the same run
#   matching    bipartite matching: its GPU tests, then the benchmark against SciPy
#               and the CPU backend in the same run (APFB and APsB)
#   distributed vision_cuts.distributed against the single-process loop on the GPUs
#               present (stereo, GrabCut and flow; one worker per GPU with dask-cuda
#               from the wheels in .whl-dask/, installed here without dependencies)
#   fuzz        every front end on random inputs of its own, backend="gpu" against
#               the CPU and independent oracles (benchmarks/fuzz_backends.py, 5 min;
#               failures, notes and slow outliers in fuzz.json)
#   all         everything above (the default)
#   quick       the same as gputests
#
#   bash benchmarks/gpu_check.sh                 # everything
#   bash benchmarks/gpu_check.sh gputests grid   # GPU tests + grid benchmark
# The data sections need VISION_CUTS_DATA.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/vc-gpu-check}
mkdir -p "$OUT"
SECTIONS=" ${*:-all} "
SECTIONS=${SECTIONS/ quick / gputests }
want() { [[ "$SECTIONS" == *" all "* || "$SECTIONS" == *" $1 "* ]]; }

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
have_data() {
    [ -n "${VISION_CUTS_DATA:-}" ] && return 0
    echo "VISION_CUTS_DATA is not set: $1 skipped"
    return 1
}
# -P: do not put the source tree on sys.path (the installed package is tested)
if want gputests; then
    # --timeout: a stuck kernel ends the run with the test's name and stacks
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider -m gpu \
        --timeout 300 tests 2>&1 | tee "$OUT/tests_gpu.log" || rc=1
fi
if want cputests; then
    python3 -P -m pytest -q -p no:cacheprovider -m "not gpu and not gui" tests \
        2>&1 | tee "$OUT/tests_cpu.log" || rc=1
fi
if want grid; then
    python3 -P benchmarks/bench_grid.py --backend cpu gpu --sizes 0.3 2 4 8 \
        --volumes 128 256 --json "$OUT/bench_grid.json" 2>&1 | tee "$OUT/bench_grid.log" \
        || rc=1
    python3 -P benchmarks/bench_grid_long_paths.py --backend cpu gpu \
        --json "$OUT/bench_grid_long_paths.json" 2>&1 | tee "$OUT/bench_grid_long_paths.log" \
        || rc=1
fi
if want diagonal; then
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider -m gpu \
        --timeout 300 tests/test_grid_connectivity_gpu.py tests/test_segmentation.py \
        2>&1 | tee "$OUT/tests_diagonal.log" || rc=1
    python3 -P benchmarks/gpu_grid_check.py --diag 150 --repeats 2 --seed 71 --out "$OUT" \
        2>&1 | tee "$OUT/diff_diagonal.log" || rc=1
    python3 -P benchmarks/bench_grid.py --backend cpu gpu --sizes 0.3 2 4 \
        --connectivity 4 8 --volumes 64 128 --volume-connectivity 6 18 26 \
        --json "$OUT/bench_grid_diagonal.json" 2>&1 | tee "$OUT/bench_grid_diagonal.log" \
        || rc=1
    python3 -P benchmarks/diag_cut_times.py --json "$OUT/cut_times.json" 2>&1 \
        | tee "$OUT/cut_times.log" || rc=1
    if have_data "GrabCut with 8 neighbours"; then
        python3 -P benchmarks/eval_grabcut.py --backend gpu --connectivity 4 8 \
            --json "$OUT/eval_grabcut_connectivity.json" 2>&1 \
            | tee "$OUT/eval_grabcut_connectivity.log" || rc=1
    fi
fi
if want grabcut && have_data grabcut; then
    python3 -P benchmarks/eval_grabcut.py --backend cpu gpu --connectivity 4 8 \
        --json "$OUT/eval_grabcut.json" 2>&1 | tee "$OUT/eval_grabcut.log" || rc=1
    python3 -P benchmarks/eval_grabcut.py --backend cpu gpu --size-test \
        --json "$OUT/eval_grabcut_1080p.json" 2>&1 | tee "$OUT/eval_grabcut_1080p.log" \
        || rc=1
    python3 -P benchmarks/bench_grabcut_calls.py --json "$OUT/bench_grabcut_calls.json" \
        2>&1 | tee "$OUT/bench_grabcut_calls.log" || rc=1
fi
if want assignment; then
    python3 -P benchmarks/bench_assignment.py --backend cpu gpu \
        --single 1000 4000 8000 --geometric-max-n 4000 --baseline-max-n geometric=1000 \
        --gpu-repeat 7 --repeat 3 \
        --json "$OUT/bench_assignment.json" 2>&1 | tee "$OUT/bench_assignment.log" || rc=1
fi
if want graph; then
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider \
        tests/test_graph_maxflow.py 2>&1 | tee "$OUT/tests_graph.log" || rc=1
    python3 -P benchmarks/bench_graph.py --backend cpu gpu --scipy-max-nodes 40000 \
        --variants warp ballot --instances genrmf32x32 rlg128x256 rlg512x512 \
        genrmf64x64 adg2000 genrmf128x16 rlg1024x1024 genrmf128x128 \
        --json "$OUT/bench_graph.json" 2>&1 | tee "$OUT/bench_graph.log" || rc=1
    # the public call with its time budget on AK networks and the usual families
    python3 -P benchmarks/bench_graph.py --backend cpu gpu --variants \
        --scipy-max-nodes 40000 --instances ak250 ak1000 ak4000 rlg512x512 \
        genrmf64x64 genrmf128x16 --json "$OUT/bench_graph_budget.json" 2>&1 \
        | tee "$OUT/bench_graph_budget.log" || rc=1
fi
if want matching; then
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider \
        tests/test_matching.py 2>&1 | tee "$OUT/tests_matching.log" || rc=1
    python3 -P benchmarks/bench_matching.py --backend cpu gpu --sizes 100000 1000000 \
        --gpu-algorithms apfb apsb --repeat 5 \
        --json "$OUT/bench_matching.json" 2>&1 | tee "$OUT/bench_matching.log" || rc=1
fi
if want stereo && have_data stereo; then
    python3 -P benchmarks/eval_stereo.py --backend cpu gpu \
        --json "$OUT/eval_stereo.json" 2>&1 | tee "$OUT/eval_stereo.log" || rc=1
fi
if want stress; then
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider \
        tests/test_assignment_stress_gpu.py 2>&1 | tee "$OUT/tests_stress.log" || rc=1
    python3 -P benchmarks/bench_assignment_families.py --small --backend cpu gpu \
        --json "$OUT/bench_assignment_small.json" 2>&1 | tee "$OUT/bench_assignment_small.log" \
        || rc=1
    if have_data stress; then
        python3 -P benchmarks/diag_assignment_stall.py --variants default \
            --sequences Urban2 RubberWhale Grove2 2>&1 | tee "$OUT/diag_flow_stacks.log" \
            || rc=1
    fi
fi
if want flow; then
    VISION_CUTS_REQUIRE_GPU=1 python3 -P -m pytest -q -p no:cacheprovider -m gpu \
        tests/test_optical_flow.py tests/test_cli_optical_flow.py tests/test_fast_brief.py \
        2>&1 | tee "$OUT/tests_flow.log" || rc=1
    python3 -P benchmarks/bench_flow_video.py --frames 150 --backend cpu gpu \
        --json "$OUT/bench_flow_video.json" 2>&1 | tee "$OUT/bench_flow_video.log" || rc=1
    if have_data flow; then
        python3 -P benchmarks/eval_flow.py --backend cpu gpu gpu-cupy auto \
            --json "$OUT/eval_flow.json" 2>&1 | tee "$OUT/eval_flow.log" || rc=1
    fi
fi
if want refine; then
    python3 -P benchmarks/bench_refine.py --backend cpu gpu 2>&1 | tee "$OUT/bench_refine.log" \
        || rc=1
fi
if want distributed && have_data distributed; then
    if ls .whl-dask/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
            .whl-dask/*.whl
    fi
    python3 -P -m pytest -q -p no:cacheprovider tests/test_distributed.py 2>&1 \
        | tee "$OUT/tests_distributed.log" || rc=1
    ngpu=$(nvidia-smi -L | wc -l)
    # flow also with OpenCV's default thread count in the workers (the workers' own
    # is distributed._GPU_WORKER_OPENCV_THREADS)
    for spec in "stereo 200" "segment 200" "flow 301 0"; do
        set -- $spec
        python3 -P benchmarks/bench_distributed.py --kind "$1" --items "$2" --gpu \
            --workers $(seq 1 "$ngpu") --opencv-threads "${@:3}" --repeat 3 \
            --json "$OUT/bench_distributed_$1.json" 2>&1 \
            | tee "$OUT/bench_distributed_$1.log" \
            | grep -v -E "^[0-9-]+ [0-9:,]+ - distributed" || rc=1
    done
fi
if want fuzz; then
    # from another folder: the checkout's vision_cuts/ lacks the kernels folder the
    # installed package has
    repo=$(pwd)
    (cd /tmp && python3 -P "$repo/benchmarks/fuzz_backends.py" --minutes 5 --seed 1 \
        --out "$OUT/fuzz") 2>&1 | tail -20 | tee "$OUT/fuzz.log" || rc=1
fi
exit $rc

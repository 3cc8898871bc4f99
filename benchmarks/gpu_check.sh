#!/usr/bin/env bash
# The GPU acceptance check: every GPU test and benchmark in one run, 8 minutes at most on an H100.
#
#     bash benchmarks/gpu_check.sh                  # every stage
#     bash benchmarks/gpu_check.sh --dry-run        # the stages, commands and budgets; runs nothing
#     bash benchmarks/gpu_check.sh --stages pytest,kernels
#
# Each stage runs under its own `timeout`, so a hang costs that stage's budget and no more,
# and a failing stage does not stop the next. Every stage writes its whole output (stdout
# and stderr) to OUTDIR/<stage>.log; OUTDIR/summary.md gets the device, the versions, each
# stage's status and wall time, and the lines the docs quote (test counts, the tables).
# The summary is rewritten after every stage, so a run killed from outside still leaves one.
# OUTDIR is --out, else $OUT (a runner's folder of files to send back), else ./gpu_check_out.
#
# Exit status: 0 when every stage that ran passed (a skipped stage is no failure), 1 when a
# stage failed or ran out of time, 2 when the command line is wrong.
#
# Nothing is installed. The project runs from this checkout (PYTHONPATH), with the Python
# named by $PYTHON (default python3; it needs CuPy, PyTorch with CUDA, pytest, hypothesis).
# Warming the GPU up is each script's own business: they warm up for at least 1 s. The device
# stage fills CuPy's kernel cache for the stages after it (a stage run alone on a fresh
# machine compiles what it uses itself, and may run out of time doing so).
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
LIMIT_S=480 # the whole check, every budget, grace and the header included
GRACE_S=3   # after a stage's budget: SIGTERM, then this long before SIGKILL
HEADER_S=20 # nvidia-smi's device line and the versions, 10 s each at most

# ---- the stages ------------------------------------------------------------------------------
# name, budget (s), the script it runs ("" for none), optional (a missing script is skipped,
# not failed), the awk program that picks from its log what the summary shows, and the
# command (run by bash in the checkout's root).
NAMES=()
declare -A BUDGET SCRIPT OPTIONAL QUOTE COMMAND
stage() {
    NAMES+=("$1")
    BUDGET[$1]=$2 SCRIPT[$1]=$3 OPTIONAL[$1]=$4 QUOTE[$1]=$5 COMMAND[$1]=$6
}
py=$(printf '%q' "$PY")
has_gpu='import sys, minitorch_amp as mt; mt.device.cuda.device_count() or sys.exit("no GPU")'
# Budgets: the first run, on an NVIDIA H200 with 16 cores on 2026-11-27, measured simple_net
# (84 s), host_profile (36 s) and compare (9 s). device, pytest, kernels and optimizer timed
# out in it: each process compiled the cuda/*.cu files it used with NVRTC, one after another,
# seconds each (the Hopper GEMMs the longest), until CuPy's on-disk cache held them. So the
# device stage compiles them all into that cache first. A run on 2026-11-28 (an H200 again)
# found that warm-up past 70 s, each Hopper GEMM file one module of 18 instantiations: the
# GEMM files now compile a kernel at a time (kernels.register(split=True)), and the warm-up
# took 38.7 s (77 modules on 16 cores, 42 s with the process start), the report after it 4 s:
# device's budget. host_profile took 29 s and compare (13 rows: bf16 and FP8 eager and
# graphed, issue 28's FP8 graph row beside the float16 one) 20 s in that run. pytest -m gpu
# had 83 s with 4 workers on 2026-11-27, but ran past 95 s with 12 workers on 2026-11-28 (at
# 82% of its 680 tests): 8 workers and 130 s, an estimate, as are kernels and optimizer (20 s
# was too little for its four optimizers on 2026-11-28: each of its 8 rows warms both
# frameworks up for at least 1 s on a GPU; two optimizers now, 4 rows, 12 s on the 2-core CPU).
cores=$(nproc 2>/dev/null || echo 4)
warm_up="$py -m minitorch_amp --warm-kernel-cache -j $cores"
# Each part runs whatever the one before did (a module that fails to compile must not hide the
# report, the kernel checks and the device line); the stage fails if any part failed.
stage device 55 "" no '/^CuPy kernel cache: / { print }
    /^minitorch_amp environment report/ { on = 1 } on' \
    "failed=0; $warm_up || failed=1; nvidia-smi || echo 'nvidia-smi: not found'; \
$py -m minitorch_amp --no-compile || failed=1; $py -c '$has_gpu' || failed=1; exit \$failed"
# pytest-xdist where it is installed: 8 processes on the one GPU, each file's tests in one.
xdist=""
if timeout -k 1 10 "$PY" -c 'import xdist' >/dev/null 2>&1; then
    xdist=" -n 8 --dist loadfile"
fi
# SIGINT 10 s before the stage's budget ends: interrupted, pytest still prints the failures
# so far and the counts (a SIGTERM or SIGKILL from the stage's timeout would lose them).
# shellcheck disable=SC2016 # the $ are awk's
stage pytest 130 "" no '/^(FAILED|ERROR) / && n++ < 30
    / in [0-9.]+s|no tests ran/ { counts = $0 } END { if (counts) print counts }' \
    "timeout -s INT 120 $py -m pytest -m gpu -q --durations=15$xdist"
# kernels: the kernel table (about 60 s: each of its timings after 1 s of warm-up), then the
# FP8 GEMM's (about 9 s: ours and torch._scaled_mm at 2 sizes, each after 1 s of warm-up,
# 50 timed graph replays of 20).
stage kernels 70 benchmarks/kernels.py no '/^raw kernels on/ { on = 1 } on' \
    "$py benchmarks/kernels.py --fp8"
stage simple_net 90 benchmarks/simple_net.py no '/^SimpleNet on/ { on = 1 } on' \
    "$py benchmarks/simple_net.py --full --device gpu"
stage optimizer 25 benchmarks/optimizer_step.py no '/^µs of host time/ { on = 1 } on' \
    "$py benchmarks/optimizer_step.py --quick --optimizers SGD Adam --device gpu"
# shellcheck disable=SC2016 # the $ are awk's
stage host_profile 32 benchmarks/host_profile.py yes '/^### / { if (n++) print ""; print }
    /^\| part \|/ { on = 1 } on && /^$/ { on = 0 } on' \
    "$py benchmarks/host_profile.py --full --device gpu"
stage compare 25 examples/simple_net.py no '/^SimpleNet on/ { on = 1 } on' \
    "$py examples/simple_net.py --compare --full --graph --dtype float8 --device gpu"

usage() {
    cat <<EOF
usage: bash benchmarks/gpu_check.sh [--dry-run] [--stages a,b,...] [--out DIR] [--max-stage-s N]

  --dry-run        print the stages, their commands and budgets; run nothing
  --stages a,b     run only these stages (in the order above): ${NAMES[*]}
  --out DIR        where the logs and summary.md go (default: \$OUT, else ./gpu_check_out)
  --max-stage-s N  cap every stage's budget at N s (a smoke run on a short lease)
EOF
}

# ---- the command line ------------------------------------------------------------------------
dry_run=0 picked="" out=${OUT:-./gpu_check_out} cap=""
invocation="bash benchmarks/gpu_check.sh $*"
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) dry_run=1 ;;
        --stages | --out | --max-stage-s)
            if [ $# -lt 2 ] || [ -z "$2" ]; then
                echo "gpu_check.sh: $1 needs a value" >&2 && exit 2
            fi
            case $1 in --stages) picked=$2 ;; --out) out=$2 ;; *) cap=$2 ;; esac
            shift
            ;;
        -h | --help) usage && exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$1'" >&2 && usage >&2 && exit 2 ;;
    esac
    shift
done
if [ -n "$cap" ] && ! [[ $cap =~ ^[1-9][0-9]*$ ]]; then
    echo "gpu_check.sh: --max-stage-s takes whole seconds, got '$cap'" >&2 && exit 2
fi
selected=()
if [ -z "$picked" ]; then
    selected=("${NAMES[@]}")
else
    IFS=, read -ra wanted <<<"$picked"
    for name in "${wanted[@]}"; do
        if [ -z "$name" ] || [ -z "${BUDGET[$name]+set}" ]; then
            echo "gpu_check.sh: no stage '$name'; the stages are: ${NAMES[*]}" >&2 && exit 2
        fi
    done
    for name in "${NAMES[@]}"; do
        [[ ",$picked," == *",$name,"* ]] && selected+=("$name")
    done
fi
if [ -n "$cap" ]; then
    for name in "${NAMES[@]}"; do
        ((BUDGET[$name] > cap)) && BUDGET[$name]=$cap
    done
fi
total_s=$HEADER_S
for name in "${selected[@]}"; do
    total_s=$((total_s + BUDGET[$name] + GRACE_S))
done

case $out in /*) ;; *) out="$PWD/${out#./}" ;; esac # before the cd: relative to here
cd "$ROOT" || exit 2

echo "GPU check: ${#selected[@]} stages, at most ${total_s} s (limit ${LIMIT_S} s: the budgets," \
    "${GRACE_S} s each to stop a hung stage, ${HEADER_S} s for the device line and versions)"
if [ "$dry_run" = 1 ]; then
    echo "output: $out (summary.md and one <stage>.log per stage)"
    printf '%-13s %6s  %s\n' stage budget command
    for name in "${selected[@]}"; do
        note=""
        [ "${OPTIONAL[$name]}" = yes ] &&
            note="  [optional: skipped when ${SCRIPT[$name]} is not in this checkout]"
        printf '%-13s %4s s  %s%s\n' "$name" "${BUDGET[$name]}" "${COMMAND[$name]}" "$note"
    done
    exit 0
fi
if ! mkdir -p -- "$out"; then
    echo "gpu_check.sh: cannot make the output folder '$out'" >&2 && exit 2
fi

# ---- the header: device, versions, checkout --------------------------------------------------
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" # the checkout, not an installed copy
export PYTHONUNBUFFERED=1                             # a killed stage's log keeps its last lines
if command -v nvidia-smi >/dev/null; then
    device_line=$(timeout -k 1 10 nvidia-smi --query-gpu=name,memory.total,driver_version \
        --format=csv,noheader 2>&1 | paste -sd ';' -)
else
    device_line="no nvidia-smi here: no NVIDIA driver"
fi
versions=$(timeout -k 1 10 "$PY" -c '
import platform
from importlib import metadata
names = ["numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "ml_dtypes", "pytest", "hypothesis"]
found = []
for name in names:
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
print(", ".join([f"Python {platform.python_version()}", *found]))
' 2>&1 | tail -n 1)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) || commit="unknown (no .git here)"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit, with uncommitted changes"
fi
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t0=$(date +%s)

# ---- running a stage -------------------------------------------------------------------------
declare -A STATUS WALL
quote() { # what the summary shows of a stage's log: its stage's awk program picks it
    awk "${QUOTE[$1]}" "$2"
}

run_stage() {
    local name=$1 log="$out/$1.log" start rc
    if [ -n "${SCRIPT[$name]}" ] && [ ! -f "${SCRIPT[$name]}" ]; then
        if [ "${OPTIONAL[$name]}" = yes ]; then
            STATUS[$name]="skipped: not in this checkout"
        else
            STATUS[$name]="FAILED: ${SCRIPT[$name]} is missing"
        fi
        WALL[$name]=0
        return
    fi
    start=$(date +%s)
    timeout -k "$GRACE_S" "${BUDGET[$name]}" bash -c "${COMMAND[$name]}" </dev/null >"$log" 2>&1
    rc=$?
    WALL[$name]=$(($(date +%s) - start))
    case $rc in
        0) STATUS[$name]=ok ;;
        124 | 137) STATUS[$name]="TIMED OUT after ${BUDGET[$name]} s" ;;
        *) STATUS[$name]="FAILED (exit $rc)" ;;
    esac
}

fenced() { # a Markdown code block
    # shellcheck disable=SC2016 # the backquotes are Markdown's, not a command substitution
    printf '```text\n%s\n```\n' "$1"
}

write_summary() { # all of it again after each stage: a killed run still leaves a summary
    local name failed=() ok=0 skipped=0 pending=0 counts log text
    for name in "${selected[@]}"; do
        case ${STATUS[$name]:-} in
            "") pending=$((pending + 1)) ;;
            ok) ok=$((ok + 1)) ;;
            skipped*) skipped=$((skipped + 1)) ;;
            *) failed+=("$name") ;;
        esac
    done
    {
        echo "# GPU check"
        echo
        echo "- device: $device_line"
        echo "- versions: $versions"
        echo "- checkout: $commit"
        echo "- command: \`$invocation\`, started $started, $(($(date +%s) - t0)) s so far" \
            "(at most $total_s s)"
        counts="$ok ok, $skipped skipped"
        [ "$pending" -gt 0 ] && counts="$counts, $pending not run yet"
        if [ ${#failed[@]} -gt 0 ]; then
            echo "- result: FAILED: ${failed[*]}; $counts"
        else
            echo "- result: no stage failed; $counts"
        fi
        echo
        echo "| stage | status | wall s | budget s | command |"
        echo "|---|---|---|---|---|"
        for name in "${selected[@]}"; do
            echo "| $name | ${STATUS[$name]:-not run yet} | ${WALL[$name]:-} |" \
                "${BUDGET[$name]} | \`${COMMAND[$name]//|/\\|}\` |"
        done
        for name in "${selected[@]}"; do
            log="$out/$name.log"
            [ -f "$log" ] || continue
            echo
            echo "## $name: ${STATUS[$name]}"
            echo
            text=$(quote "$name" "$log")
            if [ -n "$text" ]; then
                fenced "$text"
            fi
            if [ "${STATUS[$name]:-}" != ok ] || [ -z "$text" ]; then
                printf '\nThe end of %s:\n\n' "$name.log"
                fenced "$(tail -n 15 "$log")"
            fi
        done
    } >"$out/summary.md"
}

# ---- the run ---------------------------------------------------------------------------------
echo "device: $device_line"
echo "versions: $versions"
echo "output: $out"
for name in summary.md "${selected[@]/%/.log}"; do # nothing left from an earlier run
    rm -f -- "${out:?}/$name"
done
i=0
for name in "${selected[@]}"; do
    i=$((i + 1))
    echo "[$i/${#selected[@]}] $name (budget ${BUDGET[$name]} s): ${COMMAND[$name]}"
    run_stage "$name"
    echo "    ${STATUS[$name]}, ${WALL[$name]} s"
    write_summary
done
echo
cat "$out/summary.md"
for name in "${selected[@]}"; do
    case ${STATUS[$name]} in ok | skipped*) ;; *) exit 1 ;; esac
done
exit 0

#!/usr/bin/env bash
# Nsight Compute's view of one EXL3 decode kernel inside `bench-device --what exl3` (issue 6, benchmark 1):
# the details page (speed of light, occupancy, warp states, scheduler, memory, instruction mix) and the
# SASS source page with its per-instruction warp-stall samples, reduced to the instructions where warps wait
# most (tools/device/ncu_source_top.py). Needs build-gpu (run_gpu_suite.sh first, in the same device call)
# and ncu. About a minute per kernel.
#   device: KERNEL=exl3MoeKernelILi4ELi2ELi0E TAG=moe bash scripts/gpu/profile_exl3_kernel.sh "$OUT"
# Env: KERNEL (a regex of the mangled name; default exl3KernelILi4ELi2ELi0E, the streaming linear kernel at
#      K = 4 MUL1), SKIP (launches of it skipped first, default 20: past the warm-up — bench-device runs that
#      kernel first in part (a)'s two-launch MoE, so the default profiles a gate/up launch of it at batch 1; the
#      4096→12288 GEMV rows come later and need a larger SKIP), TAG (result file tag). Results: $OUT/ncu_<tag>.txt,
#      $OUT/ncu_<tag>_source.txt, $OUT/sass_<tag>.txt. BENCH_WHAT (bench-device --what, default exl3; exl3-gemv4
#      runs only the GEMV at K = 4, so SKIP = 20 lands on the 4096→12288 MUL1 GEMV; exl3-moe only the MoE layer).
#      Results also: $OUT/ncu_<tag>_pipes.txt (utilisation of each functional pipe).
set -uo pipefail
source "$(dirname "$0")/cli_env.sh" "$@"  # OUT, CLI; the repository root
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 2; }
KERNEL=${KERNEL:-exl3KernelILi4ELi2ELi0E}; TAG=${TAG:-gemv}; SKIP=${SKIP:-20}
timeout 200 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$KERNEL" -s "$SKIP" -c 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats \
  $CLI bench-device --backend cuda --what "${BENCH_WHAT:-exl3}" --reps 3 >"$OUT/ncu_$TAG.txt" 2>&1
echo "ncu $TAG details: rc $?"
# Pipe utilisation (which functional unit the loop waits for: fma/fmaheavy carries IMAD and IDP, alu the
# logic and shifts, tensor the mma, lsu/shared the ring): every sm__inst_executed_pipe_* and sm__pipe_*
# metric as a fraction of its sustained peak over the active cycles, and the issue rate beside them.
timeout 200 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$KERNEL" -s "$SKIP" -c 1 \
  --metrics "regex:^sm__(inst_executed_pipe|pipe)_.*\.avg\.pct_of_peak_sustained_active$,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_active.avg" \
  $CLI bench-device --backend cuda --what "${BENCH_WHAT:-exl3}" --reps 3 >"$OUT/ncu_${TAG}_pipes.txt" 2>&1
echo "ncu $TAG pipes: rc $?"
timeout 200 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$KERNEL" -s "$SKIP" -c 1 --section SourceCounters \
  --section WarpStateStats --import-source no --page source --print-source sass --csv \
  $CLI bench-device --backend cuda --what "${BENCH_WHAT:-exl3}" --reps 3 >"$OUT/ncu_${TAG}_source.csv" 2>"$OUT/ncu_${TAG}_source.err"
echo "ncu $TAG source: rc $?"
python3 tools/device/ncu_source_top.py "$OUT/ncu_${TAG}_source.csv" --top 60 --buckets 100 >"$OUT/ncu_${TAG}_source.txt" 2>&1
xz -9f "$OUT/ncu_${TAG}_source.csv"
# The kernel's SASS (the instruction count of the hot loop): every function whose mangled name holds KERNEL,
# via cuobjdump on the binary itself — its fat binary holds every kernel of every object (the decode kernels are in
# cuda_exl3_k*.cu.o, the prefill GEMM in cuda_exl3_prefill.cu.o), and under PREBUILT=1 there are no objects at all.
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUOBJDUMP" -sass "$CLI" 2>"$OUT/sass_$TAG.err" | awk -v pat="$KERNEL" \
  '/Function : /{on = index($0, pat) > 0} on' >"$OUT/sass_$TAG.txt"
echo "sass $TAG: $(grep -c '/\*[0-9a-f]*\*/' "$OUT/sass_$TAG.txt") instructions"

#!/usr/bin/env bash
# The GPU check: one script, under 6 minutes, for a machine with one GPU (CI has none).
#
#   pip install -e ".[test,cuda12]"      # or cuda13; CuPy, NCCL's wheel, mpi4py >= 4.0.3
#   OUT=gpu-out bash benchmarks/gpu/check.sh
#
# Prints versions and what the backend selection detects; runs the GPU legs of the device
# tests (real CuPy) at 1 rank (NCCL) and at 2 and 4 ranks sharing the GPU (staged, plus
# CUDA-aware where MPI says it is), the op sweeps on "cuda" meshes at 1 rank, a bandwidth
# table (pinned/pageable host<->device copies; device all-reduce and all-gather of
# 1-256 MiB against host MPI) and examples/train.py on the GPU against the CPU.  Everything
# lands under $OUT (default: benchmarks/gpu/out); summary.txt says what passed.  Each step
# has a time limit, so a hang costs at most its limit.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/gpu/out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
MPIEXEC=${MTENSOR_MPIEXEC:-mpiexec}
export MTENSOR_MPI_SUITE=1 MTENSOR_TIMEOUT=60 PYTHONUNBUFFERED=1
: > "$OUT/summary.txt"

step() {   # step NAME LIMIT_S COMMAND...: run it, keep its log, say how it ended
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc in $((SECONDS - start))s" | tee -a "$OUT/summary.txt"
    tail -n 4 "$OUT/$name.log"
}

step versions 20 "$PY" - <<'PY'
import platform, numpy, mpi4py
from mpi4py import MPI
print("python", platform.python_version(), "numpy", numpy.__version__, "mpi4py", mpi4py.__version__)
print("MPI:", MPI.Get_library_version().splitlines()[0])
import cupy
rt = cupy.cuda.runtime
print("cupy", cupy.__version__, "CUDA runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion())
for i in range(rt.getDeviceCount()):
    p = rt.getDeviceProperties(i)
    print(f"GPU {i}: {p['name'].decode()} {p['totalGlobalMem'] / 2**30:.0f} GiB")
from mtensor.comm import select
print("NCCL loads:", select._nccl_loads("cuda"), end=" ")
try:
    print("version", cupy.cuda.nccl.get_version())
except Exception as e:
    print(f"({type(e).__name__}: {e})")
print("MPI CUDA-aware (asked, not tried):", select.mpi_cuda_aware())
import mtensor as mt
mesh = mt.init_device_mesh("cuda", (1,))
print("auto at 1 rank:", mesh.backends, "| mesh:", mesh)
PY

DEVICE_TESTS=(tests/mpi/test_device.py -k cupy --with-mpi -q -p no:cacheprovider -p no:randomly)
step legs-1-rank 60 "$MPIEXEC" -n 1 "$PY" -m pytest "${DEVICE_TESTS[@]}"
step legs-2-ranks-one-gpu 40 "$MPIEXEC" -n 2 "$PY" -m pytest "${DEVICE_TESTS[@]}"
step legs-4-ranks-one-gpu 40 "$MPIEXEC" -n 4 "$PY" -m pytest "${DEVICE_TESTS[@]}"
step sweeps-1-rank 60 env MTENSOR_TEST_DEVICE=cupy "$MPIEXEC" -n 1 "$PY" -m pytest \
    tests/mpi/test_ops.py tests/mpi/test_redistribute.py tests/mpi/test_grad.py \
    tests/mpi/test_numpy_references.py tests/mpi/test_compile.py --with-mpi -q \
    -p no:cacheprovider -p no:randomly
step bandwidth-1-rank 30 "$MPIEXEC" -n 1 "$PY" benchmarks/gpu/bandwidth.py \
    --sizes-mb 1,16,256 --json "$OUT/bandwidth-1.json"
step bandwidth-2-ranks 30 "$MPIEXEC" -n 2 "$PY" benchmarks/gpu/bandwidth.py \
    --sizes-mb 1,16,256 --json "$OUT/bandwidth-2.json"
TRAIN=(examples/train.py --steps 50 --hidden 512 --blocks 4 --batch 1024)
step train-cuda 30 "$MPIEXEC" -n 1 "$PY" "${TRAIN[@]}" --device cuda
step train-cpu 40 "$MPIEXEC" -n 1 "$PY" "${TRAIN[@]}"
for run in train-cuda train-cpu; do
    grep -a "^mesh\|^checksum" "$OUT/$run.log" | sed "s/^/$run: /" | tee -a "$OUT/summary.txt"
done
echo "== summary ($OUT/summary.txt)"
cat "$OUT/summary.txt"

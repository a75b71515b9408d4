#!/usr/bin/env bash
# The JAX engine on one GPU, in one prepared call: the replica-gradient benchmark, then six runs
# side by side on the same GPU (M(3) and M(1) global evidence on D500, two seeds each; Fig. 3
# of M(3) on D5000 from the prior to T = 0.01, two seeds), each stopped cleanly by SIGTERM after
# RUN_SECONDS, then `info` (and `analyse` for D5000) on every run. Results go to $OUT.
#
#   OUT=out RUN_SECONDS=360 bash scripts/gpu_engine_runs.sh
#
# Needs: python3 with JAX (CUDA), Numba, h5py, Click, SciPy, matplotlib; thermonet's
# entry points (an installed thermonet, or thermonet.egg-info beside the package).
set -u
OUT=${OUT:?set OUT to the output folder}
RUN_SECONDS=${RUN_SECONDS:-330}
BENCH_SECONDS=${BENCH_SECONDS:-120}
STAGE=${STAGE:-/tmp/stage}
mkdir -p "$OUT" "$STAGE"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false THERMONET_BLAS=numpy
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ls .whl/*.whl > /dev/null 2>&1; then   # packages the machine lacks (tomli-w), as wheels
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
TN="python3 -m thermonet"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }

log "start; $(nvidia-smi -L 2>/dev/null | head -1)"
python3 -c "import jax, numba; print('jax', jax.__version__, jax.devices(), 'numba', numba.__version__)" \
    2>&1 | tee -a "$OUT/session.log"

[ "${BENCH:-1}" = 1 ] && log "benchmark" && timeout "$BENCH_SECONDS" \
    python3 benchmarks/bench_engines.py --engines jax \
    --n ${BENCH_N:-500 5000 50000} --replicas 64 --min-time 1 \
    --numba-json benchmarks/results/engines_numba_cpu.json --json "$STAGE/bench_gpu.json" \
    2>&1 | tee "$OUT/bench_gpu.txt"

common=(--set run.engine=jax --set run.n_iterations=10000000 --quiet)
d500=(sample_runs/global_M3_D50_chain.toml --set data.name=D500 --set ladder.n_temperatures=64
      --set run.checkpoint_every=2000 "${common[@]}")
d5000=(sample_runs/nrpt_M3_D50.toml --set data.name=D5000 --set sampler.precision=mixed
       --set run.sample_every=200 --set run.checkpoint_every=1000 "${common[@]}")
DEFAULT_RUNS="d500_M3_s1 d500_M3_s2 d500_M1_s1 d500_M1_s2 d5000_M3_s1 d5000_M3_s2"
runs=()
pids=()
start() {  # name, args...; RUNS (names) selects some
    local name=$1; shift
    [[ " ${RUNS:-$DEFAULT_RUNS} " != *" $name "* ]] && return
    runs+=("$name")
    NUMBA_CACHE_DIR="/tmp/numba_$name" timeout -s TERM -k 60 "$RUN_SECONDS" \
        $TN run "$@" --out "runs/$name" > "$STAGE/$name.log" 2>&1 &
    pids+=($!)
}
log "runs for ${RUN_SECONDS}s"
start d500_M3_s1 "${d500[@]}" --set architecture.name=M3 --seed 1
start d500_M3_s2 "${d500[@]}" --set architecture.name=M3 --seed 2
start d500_M3_s3 "${d500[@]}" --set architecture.name=M3 --seed 3
start d500_M3_s4 "${d500[@]}" --set architecture.name=M3 --seed 4
start d500_M1_s1 "${d500[@]}" --set architecture.name=M1 --seed 1
start d500_M1_s2 "${d500[@]}" --set architecture.name=M1 --seed 2
start d5000_M3_s1 "${d5000[@]}" --seed 1
start d5000_M3_s2 "${d5000[@]}" --seed 2
(while sleep 30; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader \
    >> "$STAGE/gpu_util.txt" 2>/dev/null; done) &
watcher=$!
wait "${pids[@]}"
kill "$watcher" 2>/dev/null
log "runs stopped"

for name in "${runs[@]}"; do
    NUMBA_CACHE_DIR="/tmp/numba_$name" timeout "${INFO_SECONDS:-60}" $TN info "runs/$name" \
        > "$STAGE/$name.info.txt" 2>&1 &
done
for name in "${runs[@]}"; do
    [[ $name == d5000_* ]] || continue
    NUMBA_CACHE_DIR="/tmp/numba_$name" timeout 90 $TN analyse "runs/$name" --workers 6 \
        > "$STAGE/$name.analyse.txt" 2>&1 &
done
wait
log "analysed"

# the traces' per-iteration arrays (energies as float32), small enough to bring back
python3 - "$STAGE" "${runs[@]}" <<'EOF'
import sys, glob, numpy as np, h5py
out, names = sys.argv[1], sys.argv[2:]
for name in names:
    cols = {}
    try:   # the frozen ladder, exactly (info prints 4 digits)
        from thermonet.io.checkpoint import read_checkpoint
        cols["temperatures"] = [np.asarray(read_checkpoint(f"runs/{name}").temperatures)]
    except Exception as err:
        print(name, "no checkpoint:", err)
    for seg in sorted(glob.glob(f"runs/{name}/trace/*.h5")):
        with h5py.File(seg, "r") as f:
            for key in ("iteration", "energy_k", "swap_energy_k", "replica_k",
                        "swap_accepted_k", "n_accepted_k"):
                if key in f:
                    cols.setdefault(key, []).append(f[key][...])
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    # at most 4000 rows (every m-th iteration; restarts and round trips are counted by
    # `info` on the full trace)
    m = max(1, -(-len(arrays.get("iteration", [])) // 4000))
    arrays = {k: (v if k == "temperatures" else v[::m]) for k, v in arrays.items()}
    for k in ("energy_k", "swap_energy_k"):
        if k in arrays:
            arrays[k] = arrays[k].astype(np.float32)
    for k in ("replica_k", "swap_accepted_k", "n_accepted_k"):
        if k in arrays:
            arrays[k] = arrays[k].astype(np.int16)
    np.savez_compressed(f"{out}/{name}_trace.npz", every=m, **arrays)
    print(name, {k: v.shape for k, v in arrays.items()})
EOF
for name in "${runs[@]}"; do
    cp "runs/$name/config.toml" "$STAGE/${name}_config.toml" 2>/dev/null
    cp "runs/$name/analysis.csv" "$STAGE/${name}_analysis.csv" 2>/dev/null
    cp "runs/$name/analysis_pairs.csv" "$STAGE/${name}_analysis_pairs.csv" 2>/dev/null
done
# at most 8 files come back: the texts in one archive, the traces in two
tar czf "$OUT/texts.tar.gz" -C "$STAGE" --exclude='*.npz' . 2>/dev/null
for set in d500 d5000; do
    files=$(cd "$STAGE" && ls ${set}_*.npz 2>/dev/null)
    [ -n "$files" ] && tar cf "$OUT/${set}_traces.tar" -C "$STAGE" $files
done
ls -la "$OUT" | tee -a "$OUT/session.log"
log "done"

#!/usr/bin/env bash
# Submit a render and, after it completes, its video encoding:
#
#   slurm/submit.sh JOB.toml [sbatch options for the render]
#
# FARM_GPUS (default 4): GPUs per node, one worker rank each, plus the master rank.
# FARM_NODES (default 1). FARM_GPUS=0 asks for no GPU (CPU nodes; pass
# FARM_RENDER_ARGS=--share-devices so several workers share the CPU device).
set -euo pipefail
job=${1:?usage: slurm/submit.sh JOB.toml [sbatch options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
gpus=${FARM_GPUS:-4}
nodes=${FARM_NODES:-1}
workers=$(( gpus > 0 ? gpus * nodes : ${FARM_WORKERS:-2} ))
gpu_opt=()
[ "$gpus" -gt 0 ] && gpu_opt=(--gpus-per-node="$gpus")
read -r store video < <(${FARM:-farm} validate "$job" --json |
  python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["store"], d["video"])')
render=$(sbatch --parsable --nodes="$nodes" --ntasks=$((workers + 1)) "${gpu_opt[@]}" "$@" \
  "$here/farm.sbatch" "$job" ${FARM_RENDER_ARGS:-})
encode=$(sbatch --parsable --dependency=afterok:"$render" "$here/encode.sbatch" "$store" --video "$video")
echo "render job $render, encode job $encode (after $render completes)"
echo "watch:  farm status $store        squeue -j $render,$encode"

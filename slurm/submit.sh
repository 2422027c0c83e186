#!/usr/bin/env bash
# Queue a zoomfarm render on Slurm, and the video encoding after it:
#
#   slurm/submit.sh [options] JOB.toml [sbatch options for the render]
#
#   --python P   the Python the farm is installed in (env FARM_PYTHON). Default: the
#                active virtual environment, else this clone's .venv, else the Python of
#                the `farm` on PATH
#   --gpus N     GPUs a node, one worker rank each (env FARM_GPUS). Default: counted with
#                sinfo on the partition; 0 (or none found): CPU nodes
#   --nodes N    nodes (env FARM_NODES, default 1)
#   --workers N  CPU nodes only: workers a node (env FARM_WORKERS, default 1: one PoCL
#                worker already uses every core of its node)
#   --dry-run    print the two sbatch commands, queue nothing
#
# GPU nodes: --gres=gpu:N and N+1 tasks a node (the master shares the first node), 4 CPUs
# a task (a GPU worker prepares frames in two helper processes; --cpus-per-task overrides).
# CPU nodes: whole nodes (--exclusive), workers+1 tasks a node; --overcommit only where
# the nodes have fewer cores than tasks (the workers share the cores anyway).
# Several nodes: every node gets the same number of tasks, so nodes after the first run one
# worker more than they have devices (--share-devices); the encode job then takes the same
# nodes, one rank each with every core (each encodes a share of the video).
# Logs: next to the store, STEM-render-JOBID.out and STEM-encode-JOBID.out.
# Also read: FARM_RENDER_ARGS (more `farm render` options), FARM_ENCODE_SBATCH (sbatch
# options for the encode job; it gets the render's --partition, --account and --qos),
# FARM_LAUNCH and FARM_MAX_REQUEUES (slurm/farm.sbatch).
# Exit status: 0 queued; 1 Slurm is missing or refused a job; 2 bad usage, no farm, bad job.
set -euo pipefail
usage="usage: slurm/submit.sh [--python P] [--gpus N] [--nodes N] [--workers N] [--dry-run] JOB.toml [sbatch options]"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { local status=$1; shift; echo "submit.sh: $*" >&2; exit "$status"; }
note() { echo "submit.sh: $*" >&2; }

# ------------------------------------------------------------------ options
python=${FARM_PYTHON:-} python_from=FARM_PYTHON
gpus=${FARM_GPUS:-} gpus_from=FARM_GPUS
nodes=${FARM_NODES:-1} nodes_from=FARM_NODES
workers=${FARM_WORKERS:-1} workers_from=FARM_WORKERS
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --python=* | --gpus=* | --nodes=* | --workers=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --python | --gpus | --nodes | --workers)
      [ $# -ge 2 ] || die 2 "$1: needs a value ($usage)"
      case $1 in
        --python) python=$2 python_from=--python ;;
        --gpus) gpus=$2 gpus_from=--gpus ;;
        --nodes) nodes=$2 nodes_from=--nodes ;;
        --workers) workers=$2 workers_from=--workers ;;
      esac
      shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) die 2 "$1: not an option of submit.sh (sbatch options go after JOB.toml; $usage)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die 2 "$usage"
job=$1
shift
whole() {  # whole NAME VALUE MIN: VALUE is a whole number >= MIN
  if [[ ! $2 =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ]; then die 2 "$1: '$2' must be a whole number >= $3"; fi
}
[ -z "$gpus" ] || whole "$gpus_from" "$gpus" 0
whole "$nodes_from" "$nodes" 1
whole "$workers_from" "$workers" 1
if [ -n "${FARM:-}" ] && [ -z "$python" ]; then
  die 2 "FARM is no longer read: set FARM_PYTHON (or --python) to the Python the farm is installed in"
fi

# The user's sbatch options that the encode job shares, and the partition to count GPUs in.
shared=() partition=${SBATCH_PARTITION:-}
opts=("$@")
for ((i = 0; i < ${#opts[@]}; i++)); do
  o=${opts[i]} value=""
  case $o in
    -p | -A | -q | --partition | --account | --qos) value=${opts[i + 1]:-} ;;
    --partition=* | --account=* | --qos=*) value=${o#*=} o=${o%%=*} ;;
    -p?* | -A?* | -q?*) value=${o:2} o=${o:0:2} ;;
    *) continue ;;
  esac
  case $o in -p | --partition) o=--partition partition=$value ;; -A) o=--account ;; -q) o=--qos ;; esac
  shared+=("$o=$value")
done

# ------------------------------------------------------------------ the farm
shebang_python() {  # the interpreter named on the first line of the console script $1
  local line words
  IFS= read -r line <"$1" && [ "${line:0:2}" = "#!" ] || return 1
  read -ra words <<<"${line:2}"
  if [ "${words[0]}" = /usr/bin/env ]; then command -v "${words[1]:-}"; else echo "${words[0]}"; fi
}
if [ -z "$python" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    python=$VIRTUAL_ENV/bin/python python_from="the active virtual environment"
  elif [ -x "$here/../.venv/bin/python" ]; then
    python=$(cd "$here/.." && pwd)/.venv/bin/python python_from="this clone's .venv"
  elif farm=$(command -v farm) && python=$(shebang_python "$farm"); then
    python_from="the farm on PATH ($farm)"
  else
    die 2 "no farm found: activate the virtual environment it is installed in, or give --python P (FARM_PYTHON)"
  fi
fi
case $python in
  /*) ;;
  */*) python=$PWD/$python ;;
  *) python=$(command -v "$python") || die 2 "$python_from: '$python' is not a command" ;;
esac
if [ ! -f "$python" ] || [ ! -x "$python" ]; then
  die 2 "$python_from: $python is not an executable file"
fi

err=$(mktemp)
trap 'rm -f "$err"' EXIT
info=$("$python" -m farm validate "$job" --json 2>"$err") && status=0 || status=$?
if [ "$status" -ne 0 ]; then
  if grep -q '^farm: ' "$err" && ! grep -q '^Traceback' "$err"; then
    cat "$err" >&2  # the farm's own one-line error (2: a bad job file)
    exit "$status"
  fi
  die 2 "$python -m farm does not run ($python_from): $(grep . "$err" | tail -n 1)"
fi
cat "$err" >&2  # the farm's warnings, if any
{ IFS= read -r store_rel; IFS= read -r store; IFS= read -r video; IFS= read -r job; } < <(
  "$python" -c 'import json, os, sys; d = json.load(sys.stdin)
print(d["store"], os.path.abspath(d["store"]), os.path.abspath(d["video"]), os.path.abspath(sys.argv[1]), sep="\n")' \
    "$job" <<<"$info")
stem=$(basename "$store_rel")
stem=${stem%.*}
logs=$(dirname "$store")

# ------------------------------------------------------------------ the cluster
gpu_count() {  # "gpu:a100:4(S:0-1),shard:8" -> 4; "(null)" -> 0
  local item n total=0 items
  # shellcheck disable=SC2001  # drop "(S:0-1)"
  IFS=, read -ra items <<<"$(sed 's/([^)]*)//g' <<<"$1")"
  for item in "${items[@]}"; do
    case $item in
      gpu | gpu:*) n=${item##*:}; [[ $n =~ ^[0-9]+$ ]] || n=1; total=$((total + n)) ;;
    esac
  done
  echo "$total"
}
cpus=""  # the fewest CPUs of a node of the partition, when sinfo says
if [ "$dry" -eq 0 ] || [ -z "$gpus" ]; then
  command -v sinfo >/dev/null || die 1 "sinfo not found: run this where Slurm's commands are"
  if [ -n "$partition" ]; then
    rows=$(sinfo -h -p "$partition" -o '%G|%c' 2>"$err") || die 1 "sinfo: $(grep . "$err" | tail -n 1)"
    where="partition $partition"
  else
    rows=$(sinfo -h -o '%P|%G|%c' 2>"$err" | sed -n 's/^[^|]*\*|//p') ||
      die 1 "sinfo: $(grep . "$err" | tail -n 1)"
    where="the default partition"
  fi
  [ -n "$rows" ] || die 2 "$where: sinfo lists no nodes (no such partition? sinfo -s lists them)"
  least=0 most=0
  while IFS='|' read -r gres c; do
    n=$(gpu_count "$gres")
    c=${c%+}
    [ "$n" -gt "$most" ] && most=$n
    [ "$n" -gt 0 ] && { [ "$least" -eq 0 ] || [ "$n" -lt "$least" ]; } && least=$n
    [[ $c =~ ^[0-9]+$ ]] && { [ -z "$cpus" ] || [ "$c" -lt "$cpus" ]; } && cpus=$c
  done <<<"$rows"
  if [ -z "$gpus" ]; then
    gpus=$least
    if [ "$gpus" -gt 0 ]; then
      note "$where: $gpus GPU(s) a node (sinfo; --gpus N or FARM_GPUS to choose)"
    else
      note "$where: no GPUs (sinfo): CPU nodes"
    fi
  elif [ "$gpus" -gt "$most" ]; then
    if [ "$most" -eq 0 ]; then
      die 2 "$gpus_from: $gpus GPU(s) a node, but $where has no GPUs; $gpus_from 0 renders on its CPUs"
    fi
    die 2 "$gpus_from: $gpus GPU(s) a node, but the nodes of $where have at most $most"
  fi
fi

# ------------------------------------------------------------------ the request
render_args=()
if [ "$gpus" -gt 0 ]; then
  per_node=$((gpus + 1))
  layout=(--nodes="$nodes" --ntasks-per-node="$per_node" --gres=gpu:"$gpus" --cpus-per-task=4)
  what="$nodes node(s), $gpus GPU(s) a node"
else
  per_node=$((workers + 1))
  if [ -n "$cpus" ] && [ "$per_node" -gt "$cpus" ]; then
    note "$per_node tasks a node on nodes of $cpus CPU(s): --overcommit (the workers share the cores)"
    layout=(--nodes="$nodes" --ntasks=$((nodes * per_node)) --overcommit --exclusive)
  else
    layout=(--nodes="$nodes" --ntasks-per-node="$per_node" --exclusive)
  fi
  what="$nodes CPU node(s), $workers worker(s) a node"
  [ "$workers" -gt 1 ] && render_args+=(--share-devices)
fi
[ "$nodes" -gt 1 ] && render_args+=(--share-devices)
read -ra extra <<<"${FARM_RENDER_ARGS:-}"
read -ra encode_opts <<<"${FARM_ENCODE_SBATCH:-}"
# several nodes: the video too, one rank a node with every core of it (slurm/encode.sbatch)
[ "$nodes" -gt 1 ] && encode_opts=(--nodes="$nodes" --ntasks-per-node=1 --exclusive "${encode_opts[@]}")
render_cmd=(sbatch --parsable --job-name="zoomfarm-$stem" "${layout[@]}"
  --output="$logs/$stem-render-%j.out" "$@"
  "$here/farm.sbatch" --python "$python" "$job" --store "$store" "${render_args[@]}" "${extra[@]}")
encode_cmd() {  # the encode job's sbatch command, after the render job $1
  encode_cmd=(sbatch --parsable --job-name="zoomfarm-encode-$stem" --dependency=afterok:"$1"
    --kill-on-invalid-dep=yes --output="$logs/$stem-encode-%j.out" "${shared[@]}" "${encode_opts[@]}"
    "$here/encode.sbatch" --python "$python" "$store" --video "$video")
}
if [ "$dry" -eq 1 ]; then
  note "$what: $((nodes * per_node)) ranks; would run:"
  printf '%q ' "${render_cmd[@]}"; echo
  encode_cmd RENDER_JOBID
  printf '%q ' "${encode_cmd[@]}"; echo
  exit 0
fi

# ------------------------------------------------------------------ queue
command -v sbatch >/dev/null || die 1 "sbatch not found: run this where Slurm's commands are"
mkdir -p "$logs" || die 2 "cannot create $logs for the logs"
sbatch_error() { grep -m 1 . "$err" | sed -e "s/^sbatch: error: //" -e "s/^sbatch: //"; }
render=$("${render_cmd[@]}" 2>"$err") || die 1 "sbatch refused the render job: $(sbatch_error)"
render=${render%%;*}
encode_cmd "$render"
encode=$("${encode_cmd[@]}" 2>"$err") ||
  die 1 "render job $render queued, but sbatch refused the encode job: $(sbatch_error) (FARM_ENCODE_SBATCH gives it sbatch options; or encode later: farm encode $store_rel)"
encode=${encode%%;*}
farm_cmd=farm
command -v farm >/dev/null || farm_cmd="$python -m farm"
echo "render job $render, encode job $encode (after $render completes): $what, $((nodes * per_node)) ranks"
echo "logs:   $(dirname "$store_rel")/$stem-render-$render.out, $(dirname "$store_rel")/$stem-encode-$encode.out"
echo "watch:  $farm_cmd status $store_rel        squeue -j $render,$encode"

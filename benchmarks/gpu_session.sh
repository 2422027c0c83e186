#!/usr/bin/env bash
# One GPU session (benchmarks on the lent machine): checks, then the measurements of
# BENCHMARKS.md in its order. Run from the repository root after benchmarks/gpu_prelude.sh;
# logs and tables go to $OUT (see benchmarks/README.md).
# Usage: source benchmarks/gpu_prelude.sh && OUT=/some/dir bash benchmarks/gpu_session.sh [steps]
#   steps: any of
#   devices tests kernels quick ptx bench perturb skipping skipvariants steprun zoom zoomskip
#   farm scaling pipeline wholescaling packsweep expmap samples depth videoprofile floor
#   sinktrace limits encodenodes encodelimit rendernodes film deepfind
#   (default: devices tests kernels farm)
set -u
OUT=${OUT:-/tmp/farm-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=${*:-devices tests kernels farm}
log() { echo "== $* ($(date +%T))"; }
timed() {  # timed LABEL TABLE CMD...: run CMD (stderr to $OUT/LABEL.err), its wall seconds to TABLE
  local label=$1 table=$2 t0 t1
  shift 2
  t0=$EPOCHREALTIME
  "$@" > /dev/null 2> "$OUT/$label.err" || echo "failed: $*"
  t1=$EPOCHREALTIME
  echo "$label: $(awk "BEGIN {printf \"%.2f\", $t1 - $t0}") s" | tee -a "$OUT/$table"
}
for step in $steps; do
  case $step in
    devices)
      log devices
      nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$OUT/gpu.txt"
      python3 -c "import h5py, numpy, mpmath; print('h5py', h5py.version.version, 'hdf5', h5py.version.hdf5_version)"
      python3 -m farm devices | tee "$OUT/devices.txt" ;;
    tests)
      log "tests on the GPU"
      FARM_TEST_DEVICES=gpu python3 -m pytest -q -m "" -p no:cacheprovider tests/test_fp128.py tests/test_qs.py \
        tests/test_kernel_f64.py tests/test_histogram.py tests/test_deep.py tests/test_perturb.py \
        tests/test_bla.py tests/test_skip.py tests/test_reference.py tests/test_distance.py \
        tests/test_samples.py tests/test_perturb_channels.py tests/test_expmap_synth.py \
        tests/test_color_kernel.py tests/test_prep.py > "$OUT/tests.txt" 2>&1
      tail -4 "$OUT/tests.txt"
      log "fp128 tests without PTX"
      FARM_NO_PTX=1 FARM_TEST_DEVICES=gpu python3 -m pytest -q -p no:cacheprovider tests/test_fp128.py \
        tests/test_deep.py 2>&1 | tail -2 ;;
    quick)
      log "kernels, default launch configuration"
      python3 benchmarks/kernels.py --quick --ptx "$OUT/bin" 2>&1 | tee "$OUT/quick.txt"
      tar -C "$OUT" -czf "$OUT/binaries.tgz" bin && rm -rf "$OUT/bin" ;;
    bench)
      log "farm bench"
      python3 -m farm bench 2>&1 | tee "$OUT/bench.txt"
      log "quad-single, the previous loop (-DQS_REFERENCE_LOOP)"
      FARM_CL_OPTIONS=-DQS_REFERENCE_LOOP python3 -m farm bench --formats quad-single 2>&1 \
        | tee -a "$OUT/bench.txt" ;;
    perturb)
      log "perturbation: crossover and skipping"
      python3 benchmarks/skipping.py --depths 2>&1 | tee "$OUT/perturb.txt" ;;
    skipping)
      log "skipping against minibrot references (issue 14): the 1080p targets"
      FARM_TEST_DEVICES=gpu python3 -m pytest -q -p no:cacheprovider tests/test_skip.py \
        tests/test_bla.py 2>&1 | tail -3 | tee "$OUT/skipping_tests.txt"
      python3 benchmarks/skipping.py --json 2>&1 | tee "$OUT/skipping.txt" ;;
    steprun)
      # escape_pixel's passes (a warp whose pixels diverge pays for both the skip and
      # the step branch): variants, each a comma-separated list of build options and
      # FARM_ knobs (STEPRUN_VARIANTS, space-separated; "-" is the default)
      log "kernel variants (no exact check)"
      python3 benchmarks/skipping.py --no-check --frames seahorse > /dev/null 2>&1  # warm-up
      for v in ${STEPRUN_VARIANTS:--}; do
        opts=() knobs=()
        for item in ${v//,/ }; do
          case $item in -) ;; FARM_*=*) knobs+=("$item") ;; *) opts+=("$item") ;; esac
        done
        echo "-- ${knobs[*]} ${opts[*]}"
        env "${knobs[@]}" FARM_CL_OPTIONS="${opts[*]}" python3 benchmarks/skipping.py --no-check 2>&1 \
          | grep -E "^(seahorse|minibrot) .* farm"
      done 2>&1 | tee "$OUT/steprun.txt" ;;
    skipvariants)
      # the open questions of issue 14 on a GPU (BENCHMARKS.md, "Skipping: what is left"):
      # the shortest skip taken (fewer, longer skips diverge less within a warp), looser
      # tables, register caps; the plain loop's rate; the kernel's registers
      log "skipping variants (no exact check)"
      { python3 -m farm bench --formats perturb 2>&1 | grep -i "perturb "
        for j in 1 2 3 4 5; do  # (the kernel's -DBLA_MIN_LEVEL comes from LaunchConfig)
          echo "-- FARM_MIN_SKIP_LEVEL=$j"
          FARM_MIN_SKIP_LEVEL=$j python3 benchmarks/skipping.py --no-check 2>&1 | grep -E "^(seahorse|minibrot)"
        done
        echo "-- FARM_CL_OPTIONS=-cl-nv-maxrregcount=48"
        FARM_CL_OPTIONS=-cl-nv-maxrregcount=48 python3 benchmarks/skipping.py --no-check 2>&1 \
          | grep -E "^(seahorse|minibrot)"
        echo "-- quadratic maps only"
        python3 benchmarks/skipping.py --no-check --quadratic 2>&1 | grep -E "^(seahorse|minibrot)"
        for e in 1e-15 1e-14; do
          echo "-- eps $e"
          python3 benchmarks/skipping.py --no-check --eps $e 2>&1 | grep -E "^(seahorse|minibrot)"
        done
        echo "-- registers"
        FARM_CL_OPTIONS=-cl-nv-verbose PYOPENCL_COMPILER_OUTPUT=1 python3 benchmarks/skipping.py \
          --no-check --frames seahorse 2>&1 | grep -E "Used .* registers" | sort | uniq -c
      } 2>&1 | tee "$OUT/skipvariants.txt" ;;
    ptx)
      log "fp128 without PTX"
      FARM_NO_PTX=1 python3 benchmarks/kernels.py --quick --formats fp128 2>&1 | tee "$OUT/noptx.txt" ;;
    kernels)
      log "kernel sweep"
      python3 benchmarks/kernels.py --ptx "$OUT/ptx" --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.txt" ;;
    farm)
      log "farm: one GPU, full render vs kernel alone"
      python3 benchmarks/gpu_scaling.py --phase "${FARM_JOB:-benchmarks/jobs/scaling_deep_1024.toml}" \
        --workers 1 --kernel-every 8 --work /tmp/scal 2>&1 | tee "$OUT/farm1.txt" ;;
    zoom)
      log "a zoom from 4 to 1e-300 on the farm: one process, then mpiexec with one worker"
      python3 -m farm render benchmarks/jobs/zoom_1e300.toml --no-video --restart 2>&1 | tail -3 \
        | tee "$OUT/zoom.txt"
      mpiexec -n 2 python3 -m farm render benchmarks/jobs/zoom_1e300.toml --no-video --quiet \
        --store /tmp/zoom_mpi.h5 2>&1 | tail -1
      python3 -c "import h5py, numpy as np; a, b = h5py.File('/tmp/zoom_1e300.h5'), h5py.File('/tmp/zoom_mpi.h5'); \
print('mpi store identical:', all(np.array_equal(a[k][...], b[k][...]) for k in ('iterations', 'fraction', 'histogram')))" \
        | tee -a "$OUT/zoom.txt" ;;
    zoomskip)
      # the whole job against the frames' host preparation (BENCHMARKS.md, "The whole job
      # on the GPU"): 30 frames of one nucleus reference; quadratic or degree-4 tables,
      # prepared on a thread or in a helper process (the default)
      # (ZOOM_FRAMES=120: the same zoom in 120 frames, where the preparation's steady state shows)
      log "a ${ZOOM_FRAMES:-30}-frame 1080p Seahorse zoom: render, device busy, waiting for frame preparation"
      sed "s/^frames = 30/frames = ${ZOOM_FRAMES:-30}/" benchmarks/jobs/seahorse_zoom_1080p.toml > /tmp/zoomskip.toml
      for round in 1 2; do
        for knobs in "FARM_SKIP_DEGREE=2 FARM_PREP_PROCESSES=0" "FARM_PREP_PROCESSES=0" \
                     "FARM_SKIP_DEGREE=2" ""; do
          echo "-- ${knobs:-defaults}"
          env $knobs python3 -m farm render /tmp/zoomskip.toml --no-video --restart 2>&1 | grep -E "timeline|device busy"
        done
      done 2>&1 | tee "$OUT/zoomskip.txt" ;;
    pipeline)
      log "the whole job (issue 11): heavy and light 1080p, 1 and 2 GPUs, video; encode and frames"
      OUT="$OUT" python3 benchmarks/pipeline.py 2>&1 | tee "$OUT/pipeline.txt" | tail -14
      python3 benchmarks/encode.py --frames 120 --repeat 2 2>&1 | tee "$OUT/encode.txt" | tail -16 ;;
    expmap)
      log "exponential maps (issue 13): frames against expmap, synthesis"
      python3 benchmarks/expmap.py synth 2>&1 | tee "$OUT/synth.txt"
      python3 benchmarks/expmap.py render --size 1920x1080 --doublings 12 --out /tmp/em1 2>&1 | tee "$OUT/expmap1.txt"
      python3 benchmarks/expmap.py render --size 960x540 --doublings 12 --width0 1e-10 --out /tmp/em2 \
        2>&1 | tee "$OUT/expmap2.txt" ;;
    samples)
      log "samples and the distance estimate (issue 12)"
      python3 benchmarks/samples.py --device gpu --side 1024 --sections cost 2>&1 | tee "$OUT/samples.txt"
      python3 benchmarks/samples.py --device gpu --perturbed --sections cost quality --side 1024 \
        --size 480x270 2>&1 | tee -a "$OUT/samples.txt" ;;
    scaling)
      n=$(nvidia-smi -L | wc -l)
      ws=1; [ "$n" -ge 2 ] && ws=1,2; [ "$n" -ge 4 ] && ws=1,2,4
      log "scaling over $ws GPU(s)"
      for job in ${SCALING_JOBS:-benchmarks/jobs/scaling_deep_1024.toml benchmarks/jobs/scaling_perturb.toml}; do
        python3 benchmarks/gpu_scaling.py --phase "$job" --workers "$ws" --work /tmp/scal \
          --no-single --kernel-every 8 2>&1 | tee -a "$OUT/scaling.txt"
      done ;;
    wholescaling)
      # issue 22: the whole job, video included, on 1 and N GPUs of the host, in one process
      # and under mpiexec (BENCHMARKS.md, "Scaling over GPUs"); needs the ffmpeg wheels
      n=$(nvidia-smi -L | wc -l)
      cf=1,mpi1,1nv; [ "$n" -ge 2 ] && cf=1,2,mpi1,mpi2,1nv,2nv
      log "the whole job on configurations $cf"
      python3 benchmarks/gpu_scaling.py --jobs heavy_1080p,minibrot_1080p,light_4k --configs "$cf" \
        --ffmpeg-ks 16 --work /tmp/wsc 2>&1 | grep -v '^[a-z_0-9]* [a-z0-9]*: {' | tee "$OUT/wholescaling.txt"
      python3 benchmarks/gpu_scaling.py --jobs minibrot_expmap_1080p --configs "${cf%%,mpi1*}" \
        --work /tmp/wsc 2>&1 | tail -4 | tee -a "$OUT/wholescaling.txt" ;;
    packsweep)
      # the render phase against the number of packing threads (farm/schedule/packer.py)
      log "packing threads"
      for p in 4 8 16 31; do
        echo "-- FARM_PACK_THREADS=$p"
        FARM_PACK_THREADS=$p python3 -m farm render benchmarks/jobs/minibrot_1080p.toml --store /tmp/ps.h5 \
          --restart --no-video --workers 1 2>&1 | grep -A1 "^farm: timeline"
      done 2>&1 | tee "$OUT/packsweep.txt" ;;
    encodenodes)
      # `farm encode` of a finished store on 1, 2 and 4 nodes emulated on this host (4 cores
      # each: FARM_NODE and taskset, docs/howto-cluster.md "Nodes on one machine"), each
      # layout twice, alternated; the whole command's wall seconds (BENCHMARKS.md, "The video
      # on every node"). ENCODE_JOB (default the 360-frame 1080p minibrot zoom) is rendered first.
      log "encode on emulated nodes"
      job=${ENCODE_JOB:-benchmarks/jobs/minibrot_1080p.toml}
      store=/tmp/farm-encodenodes.h5
      python3 -m farm render "$job" --store "$store" --no-video --restart --quiet
      ranks() {  # mpiexec arguments for $1 nodes of 4 cores
        local k args=()
        for ((k = 0; k < $1; k++)); do
          [ "$k" -gt 0 ] && args+=(":")
          args+=(-n 1 -x "FARM_NODE=n$k" taskset -c "$((4 * k))-$((4 * k + 3))" python3 -m farm encode
                 "$store" --video "/tmp/farm-encodenodes-$1.mp4")
        done
        printf '%s ' "${args[@]}"
      }
      for round in 1 2; do
        for n in 1 2 4; do
          if [ "$n" -eq 1 ]; then
            cmd=(env FARM_NODE=n0 taskset -c 0-3 python3 -m farm encode "$store" --video /tmp/farm-encodenodes-1.mp4)
          else
            read -ra cmd <<<"mpiexec --bind-to none --oversubscribe $(ranks "$n")"
          fi
          timed "encodenodes-$n-$round" encodenodes.txt "${cmd[@]}"
        done
      done ;;
    rendernodes)
      # the whole `farm render` with its video on 1, 2 and 4 nodes of 4 cores emulated on this
      # host, all sharing its GPU (node 0: the master and a worker; the others a worker), each
      # layout twice, alternated (BENCHMARKS.md, "The video on every node")
      log "render with video on emulated nodes"
      job=${ENCODE_JOB:-benchmarks/jobs/minibrot_1080p.toml}
      for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
        for n in ${NODES:-1 2 4}; do
          out=(--store /tmp/farm-rendernodes-$n.h5 --video /tmp/farm-rendernodes-$n.mp4 --restart)
          [ "${QUIET:-1}" = 0 ] || out+=(--quiet)  # QUIET=0: the timeline and the shares' lines in the .err
          if [ "$n" -eq 1 ]; then
            cmd=(env FARM_NODE=n0 taskset -c 0-3 python3 -m farm render "$job" "${out[@]}")
          else
            cmd=(mpiexec --bind-to none --oversubscribe -n 2 -x FARM_NODE=n0 taskset -c 0-3
                 python3 -m farm render "$job" "${out[@]}" --share-devices)
            for ((k = 1; k < n; k++)); do
              cmd+=(: -n 1 -x "FARM_NODE=n$k" taskset -c "$((4 * k))-$((4 * k + 3))"
                    python3 -m farm render "$job" "${out[@]}" --share-devices)
            done
          fi
          timed "rendernodes-$n-$round" rendernodes.txt "${cmd[@]}"
        done
      done ;;
    film)
      # issue 42's film at full shape (6,240 frames of 1080p expmap) on the whole host as one
      # node, the whole command with its video; its progress lines kept in $OUT/film-*.err
      log "the 6,240-frame film on one 16-core node"
      for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
        t0=$EPOCHREALTIME
        python3 -m farm render benchmarks/jobs/minibrot_expmap_6240.toml --restart \
          > /dev/null 2> "$OUT/film-$round.err" || echo "failed: film"
        echo "film-$round: $(awk "BEGIN {printf \"%.2f\", $EPOCHREALTIME - $t0}") s" | tee -a "$OUT/film.txt"
        tail -3 "$OUT/film-$round.err"
      done ;;
    deepfind)
      # issue 45: a minibrot at 1e-100000 found from the antenna's tip (the default: along a
      # Misiurewicz point's spiral), then its 1080p frame rendered; each command timed, the
      # job, the frame and the progress lines in $OUT
      log "a minibrot at 1e-100000: farm find, then farm render"
      rm -f renders/deep100k.toml renders/deep100k.h5 renders/deep100k.png
      mkdir -p renders
      timed deepfind-find deepfind.txt python3 -m farm find -1.7687 0.0017 --depth 1e-100000 \
        --frames 1 --out renders/deep100k.toml
      timed deepfind-render deepfind.txt python3 -m farm render renders/deep100k.toml
      tail -2 "$OUT/deepfind-find.err"; grep timeline "$OUT/deepfind-render.err"
      cp renders/deep100k.toml renders/deep100k.png "$OUT/" ;;
    encodelimit)
      # what x264 alone does on the same split (the bound of `encodenodes`): the minibrot
      # zoom's frames as raw planes, encoded by plain ffmpeg on 1 x 4, 2 x 4 and 4 x 4 cores
      log "plain x264 on 4-core sets"
      ff=$(python3 -c "from farm.runtime.media import ffmpeg_binary; print(ffmpeg_binary())")
      python3 -m farm render "${ENCODE_JOB:-benchmarks/jobs/minibrot_1080p.toml}" --store /tmp/farm-limit.h5 \
        --video /tmp/farm-limit.mp4 --restart --quiet
      "$ff" -v error -i /tmp/farm-limit.mp4 -f rawvideo -pix_fmt yuv420p -y /tmp/farm-limit.yuv
      frame=$((1920 * 1080 * 3 / 2))
      (cd /tmp && split -d -b $((frame * 180)) farm-limit.yuv farm-limit-h && split -d -b $((frame * 90)) farm-limit.yuv farm-limit-q)
      enc() { taskset -c "$1" "$ff" -v error -f rawvideo -pix_fmt yuv420p -s 1920x1080 -r 30 -i "$2" \
                -c:v libx264 -preset faster -crf 18 -f mp4 -y "$2.mp4"; }
      halves() { enc 0-3 /tmp/farm-limit-h00 & enc 4-7 /tmp/farm-limit-h01 & wait; }
      quarters() { for k in 0 1 2 3; do enc "$((4 * k))-$((4 * k + 3))" "/tmp/farm-limit-q0$k" & done; wait; }
      for round in 1 2; do
        timed "encodelimit-1x4-$round" encodelimit.txt enc 0-3 /tmp/farm-limit.yuv
        timed "encodelimit-2x4-$round" encodelimit.txt halves
        timed "encodelimit-4x4-$round" encodelimit.txt quarters
      done ;;
    depth)
      # issue 23: 1080p frames at 1e-10000 and 1e-100000 and the 600-frame zoom to 1e-10000
      # (jobs made beforehand on a CPU machine, carried as out/depthjobs: `python
      # benchmarks/depth.py --find-only --size 1920x1080 --out out/depthjobs`); 10k twice,
      # the first with the kernels' build cache cold
      log "depth"
      python3 benchmarks/depth.py --only 10k,10k,10k-deep,100k,zoom-10k --out out/depthjobs 2>&1 \
        | tee "$OUT/depth.txt" ;;
    videoprofile)
      # the video: where the expmap video's and the minibrot render's video time
      # goes (py-spy, every thread; the sink's subprocess too)
      log "video profile"
      mkdir -p /tmp/farm-bench
      python3 -m farm render benchmarks/jobs/minibrot_expmap_1080p.toml --restart --no-video --quiet
      for enc in "" --encode "--plain 1,4,16"; do
        py-spy record -r 100 --threads --nonblocking --format raw -o "$OUT/sink${enc%% *}.raw" -- \
          python3 benchmarks/encode.py --store /tmp/farm-bench/minibrot_expmap.h5 --sink --first 1200 \
          --count 600 $enc 2>&1 | grep -v py-spy | tee -a "$OUT/videoprofile.txt"
      done
      py-spy record -r 100 --threads --subprocesses --nonblocking --format raw -o "$OUT/minibrot_video.raw" -- \
        python3 -m farm render benchmarks/jobs/minibrot_1080p.toml --restart --quiet 2>&1 | tail -3
      python3 -m farm status /tmp/farm-bench/minibrot.h5 --json > "$OUT/minibrot_status.json" ;;
    floor)
      # issue 21's start-up: what any pyopencl program takes to its first kernel, against
      # the farm's steps on the heavy job (the second run: warm caches)
      log "start-up floor"
      python3 benchmarks/startup.py --floor | tee "$OUT/floor.txt"
      python3 benchmarks/startup.py benchmarks/jobs/heavy_1080p.toml > /dev/null 2>&1
      python3 benchmarks/startup.py benchmarks/jobs/heavy_1080p.toml | tee "$OUT/startup_heavy.txt" ;;
    sinktrace)
      # the video's frame work alone, one x264 fed by the sink, and plain ffmpeg on the
      # same frames (the bound a video cannot beat)
      log "sink"
      mkdir -p /tmp/farm-bench
      python3 -m farm render benchmarks/jobs/minibrot_1080p.toml --restart --no-video --quiet
      S=/tmp/farm-bench/minibrot.h5
      { python3 benchmarks/encode.py --store $S --sink
        python3 benchmarks/encode.py --store $S --sink --encode --plain 1,4,16
      } 2>&1 | grep -v Warning | tee "$OUT/sinktrace.txt" ;;
    limits)
      # issue 21's limits: the whole command against its bound with the CPU each part
      # takes (x264 as plain ffmpeg, colouring alone, the render without video), what the
      # store's encoding costs one core, `farm encode` against plain ffmpeg, and start-up
      log "limits"
      W=/tmp/farm-limits
      python3 benchmarks/gpu_scaling.py --jobs heavy_1080p,minibrot_1080p,light_4k --configs 1,1nv \
        --ffmpeg-ks 1,4,16 --work $W 2>&1 | grep -v Warning | tee "$OUT/limits_whole.txt"
      for j in minibrot_1080p light_4k; do
        python3 -m farm render benchmarks/jobs/$j.toml --store $W/$j.h5 --restart --no-video --quiet \
          > /dev/null 2>&1
        python3 benchmarks/datapath.py --codec $W/$j.h5 --codec-frames 24 --levels 1,-1
      done 2>&1 | tee "$OUT/limits_codec.txt"
      S=$W/minibrot_1080p.h5
      { for i in 1 2; do
          python3 -c 'import resource, subprocess, sys, time
t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True); r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"farm encode: {time.perf_counter() - t:.2f} s, {r.ru_utime + r.ru_stime:.1f} CPU s")' \
            python3 -m farm encode $S --video $W/encode.mp4
          python3 benchmarks/encode.py --store $S --sink --encode
        done
        python3 benchmarks/encode.py --store $S --sink --plain 1,4,16
      } 2>&1 | grep -v Warning | tee "$OUT/limits_encode.txt"
      { python3 benchmarks/startup.py --floor
        for j in heavy_1080p heavy_1080p seahorse_frame_1080p; do python3 benchmarks/startup.py benchmarks/jobs/$j.toml; done
        python3 benchmarks/startup.py --render benchmarks/jobs/heavy_1080p.toml
      } 2>&1 | grep -v Warning | tee "$OUT/limits_startup.txt" ;;
  esac
done
log done

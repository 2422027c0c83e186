# The lent GPU machine's set-up, and the ffmpeg it is given.
#
# On the GPU machine, sourced at the start of every command (see benchmarks/README.md):
#
#     source benchmarks/gpu_prelude.sh && python3 benchmarks/pipeline.py
#
# installs the carried wheels (.whl: pyopencl and what it needs, imageio-ffmpeg) into
# /tmp/site, registers NVIDIA's OpenCL driver, puts the carried ffmpeg (.ff) on the PATH and
# writes the bytecode of numpy, h5py, mpmath, pyopencl and the farm. The machine has numpy,
# h5py, mpmath, mpi4py (Open MPI) and Pillow; it sets PYTHONDONTWRITEBYTECODE=1 and its
# libraries come without __pycache__, so without the last step every Python process there
# compiles them from source (0.5-0.7 s more start-up a process than a pip-installed machine
# has, and a second or more of CPU in each of a render's helper processes). The bytecode is
# written in place, as pip does at install (not PYTHONPYCACHEPREFIX: that moves the standard
# library's bytecode too, which then compiles in every process).
#
# Here, once, before a session with video figures (from the project root, after the wheels
# are in .whl):
#
#     bash benchmarks/gpu_prelude.sh --pack-ffmpeg
#
# xz-compresses the ffmpeg a user's `pip install` brings (imageio-ffmpeg 0.8: ffmpeg 9.0.2,
# 172 MB) from the checkout's .venv into .ff/ffmpeg.xz (about 50 MB) and moves
# imageio-ffmpeg's own wheel out of .whl into .whl-aside: both together are over the 64 MB
# a device call carries. Carry ".whl" and ".ff". Without .ff the machine gets
# imageio-ffmpeg 0.5.1's ffmpeg 4.2.2 from .whl (the GPU video figures before 2026-11-26
# used it; the two measured alike).

if [ "${1:-}" = "--pack-ffmpeg" ]; then
  (
    set -euo pipefail
    cd "$(git rev-parse --show-toplevel)"
    exe=$(.venv/bin/python -c "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())")
    for dir in .ff .whl-aside; do
      mkdir -p "$dir"
      grep -qxF "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >> .git/info/exclude
    done
    xz -T0 -6 -c "$exe" > .ff/ffmpeg.xz.part && mv .ff/ffmpeg.xz.part .ff/ffmpeg.xz
    for wheel in .whl/imageio_ffmpeg-*.whl; do
      [ -e "$wheel" ] && mv "$wheel" .whl-aside/
    done
    "$exe" -version | head -1
    du -sh .ff/ffmpeg.xz .whl
  )
  return $? 2>/dev/null || exit $?
fi

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD
mkdir -p /etc/OpenCL/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=/tmp/site/bin:$PATH
if [ -f .ff/ffmpeg.xz ] && [ ! -x /tmp/site/bin/ffmpeg ]; then
  mkdir -p /tmp/site/bin && xz -T0 -dc .ff/ffmpeg.xz > /tmp/site/bin/ffmpeg.part \
    && chmod +x /tmp/site/bin/ffmpeg.part && mv /tmp/site/bin/ffmpeg.part /tmp/site/bin/ffmpeg
fi
unset PYTHONDONTWRITEBYTECODE
python3 -m compileall -q -j 0 /tmp/site "$PWD/farm" "$PWD/benchmarks" \
  $(python3 -c "import os, numpy, mpmath, h5py; print(*(os.path.dirname(m.__file__) for m in (numpy, mpmath, h5py)))") \
  > /dev/null 2>&1 || true

# Sourced at the start of a command on the lent GPU machine (see benchmarks/gpu_session.sh):
# installs the carried wheels (.whl: pyopencl and its needs, imageio-ffmpeg) into /tmp/site
# and registers NVIDIA's OpenCL driver. The machine has numpy, h5py, mpmath, mpi4py (Open MPI)
# and Pillow.
#
# Bytecode: the machine sets PYTHONDONTWRITEBYTECODE=1 and its numpy, h5py and mpmath come
# without __pycache__, so every Python process there compiled them (and pyopencl, and the
# farm) from source: 0.5-0.7 s more start-up a process than a pip-installed machine has, and
# a second or more of CPU in each of a render's helper processes. So: bytecode written once,
# in place, as pip does at install. (Not PYTHONPYCACHEPREFIX: that moves the standard
# library's bytecode too, which then compiles in every process.)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD
mkdir -p /etc/OpenCL/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=/tmp/site/bin:$PATH
# ffmpeg: the one `pip install` gives a user (imageio-ffmpeg 0.8: ffmpeg 9.0.2) when
# benchmarks/gpu_ffmpeg.sh has put it in .ff/ (carry ".ff"); else imageio-ffmpeg 0.5.1's
# ffmpeg 4.2.2 from .whl, which every GPU video figure before 2026-11-26's fourteenth
# session used (the newer wheel's 172 MB binary is over what a call carries: xz brings it
# to 50 MB, with .whl then carried without imageio-ffmpeg's wheel).
if [ -f .ff/ffmpeg.xz ] && [ ! -x /tmp/site/bin/ffmpeg ]; then
  mkdir -p /tmp/site/bin && xz -T0 -dc .ff/ffmpeg.xz > /tmp/site/bin/ffmpeg.part \
    && chmod +x /tmp/site/bin/ffmpeg.part && mv /tmp/site/bin/ffmpeg.part /tmp/site/bin/ffmpeg
fi
unset PYTHONDONTWRITEBYTECODE
python3 -m compileall -q -j 0 /tmp/site "$PWD/farm" "$PWD/benchmarks" \
  $(python3 -c "import os, numpy, mpmath, h5py; print(*(os.path.dirname(m.__file__) for m in (numpy, mpmath, h5py)))") \
  > /dev/null 2>&1 || true

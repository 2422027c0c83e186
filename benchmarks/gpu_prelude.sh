# Sourced at the start of a command on the lent GPU machine (see benchmarks/gpu_session.sh):
# installs the carried wheels (.whl: pyopencl and its needs, imageio-ffmpeg) into /tmp/site
# and registers NVIDIA's OpenCL driver. The machine has numpy, h5py, mpmath, mpi4py (Open MPI)
# and Pillow.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD
mkdir -p /etc/OpenCL/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=/tmp/site/bin:$PATH

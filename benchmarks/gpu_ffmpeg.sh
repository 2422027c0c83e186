#!/usr/bin/env bash
# The ffmpeg a user's install brings, made ready for the lent GPU machine (which has none):
# the checkout's .venv imageio-ffmpeg binary (ffmpeg 9.0.2 with imageio-ffmpeg 0.8.1),
# xz-compressed into .ff/ffmpeg.xz (about 50 MB of its 172), kept out of git; and
# imageio-ffmpeg's own wheel moved out of .whl into .whl-aside, since both together are
# over the 64 MB a device call carries. benchmarks/gpu_prelude.sh installs it as `ffmpeg`
# on the PATH. Carry ".whl", ".ff" (and what the command needs).
# Usage (from the project root, after ../shared/tools/gpu-wheels.sh): bash benchmarks/gpu_ffmpeg.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
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

#!/usr/bin/env bash
# The README's stills, made by the farm's own commands (PoCL is enough: 480x270, one
# frame each): `farm render` of a one-frame job writes a PNG at output.video with .png;
# `farm encode --method M` recolours the stored frame. Run from the repository root.
set -eu
farm=${FARM:-farm}
for zoom in dendrite seahorse; do
  $farm render docs/stills/$zoom.toml --quiet
  for method in histogram smooth distance; do
    $farm encode renders/stills/$zoom.h5 --method $method --video docs/stills/${zoom}_$method.mp4
  done
done
# one picture comparing the methods (each still halved): rows dendrite, seahorse
python3 - <<'PY'
from PIL import Image
methods = ["shade", "histogram", "smooth", "distance"]
sheet = Image.new("RGB", (4 * 240, 2 * 135))
for row, zoom in enumerate(["dendrite", "seahorse"]):
    for col, m in enumerate(methods):
        path = f"docs/{zoom}_shade.png" if m == "shade" else f"docs/stills/{zoom}_{m}.png"
        sheet.paste(Image.open(path).resize((240, 135), Image.LANCZOS), (240 * col, 135 * row))
sheet.save("docs/methods.jpg", quality=88)
for zoom in ("dendrite", "seahorse"):  # smaller files for the repository
    Image.open(f"docs/{zoom}_shade.png").save(f"docs/{zoom}_shade.png", optimize=True)
PY
rm -f docs/stills/*_histogram.png docs/stills/*_smooth.png docs/stills/*_distance.png

#!/usr/bin/env bash
# Before the GPU checks on a machine without internet access: the wheels the GPU machine's image lacks (Python 3.12,
# x86-64) and the CIFAR-10 JPEG archive, into .gpu/ (git-ignored), which scripts/gpu_checks.sh installs and uses.
# Versions are those of this checkout's .venv (the ones the suite passes with here). Left out to keep the
# archive small: pydeck (11 MB, only st.pydeck_chart needs it) and
# the EfficientNet-Lite0 weights package (17 MB; only its weight-mapping test needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(captum plotly streamlit altair itsdangerous jsonschema jsonschema-specifications referencing rpds-py
          python-multipart starlette uvicorn watchdog websockets)
mkdir -p .gpu/whl .gpu/data
for name in "${PACKAGES[@]}"; do
    version=$(.venv/bin/python -m pip show "$name" | sed -n 's/^Version: //p')
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu/whl "$name==$version"
done
cp ../shared/data/cifar10-jpeg.tar.gz .gpu/data/
du -sh .gpu

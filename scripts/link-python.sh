#!/usr/bin/env bash
# Makes `import ptopt` work for /usr/bin/python3 without PYTHONPATH: writes
# ptopt-build.pth, holding the absolute path of build/python, into the user's
# site-packages (what `pip install -e` would do; Debian has no pip here).
# Remove that file to undo. Run by the README's two set-up commands after a
# build that made the package; `cmake --install build` is the system-wide
# alternative (it installs into /usr/local/lib/python3.X/dist-packages).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/python/ptopt/__init__.py ] || ! ls build/python/ptopt/_C*.so >/dev/null 2>&1; then
  echo "link-python: build/python/ptopt is not built (no pybind11 or Python headers?); skipped"
  exit 0
fi
site=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages() if site.ENABLE_USER_SITE else "")')
if [ -z "$site" ]; then
  echo "link-python: user site-packages are disabled; use PYTHONPATH=$PWD/build/python"
  exit 0
fi
mkdir -p "$site"
echo "$PWD/build/python" > "$site/ptopt-build.pth"
/usr/bin/python3 -c 'import ptopt' && echo "link-python: 'import ptopt' works for /usr/bin/python3 ($site/ptopt-build.pth -> $PWD/build/python)"

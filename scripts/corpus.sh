#!/usr/bin/env bash
# The whole real-model corpus (tests/corpus/run_corpus.py): every torchvision
# classification and segmentation model, scripted then traced, through
# `ptopt --passes ''`, -O1, -O2 and -O3, each output reloaded in stock PyTorch.
# Builds ptopt first. Hours on a 2-core machine; the table is rewritten after
# every model, so it can be watched while it runs:
#   build/corpus/full.md  (markdown)    build/corpus/full.json
# Extra arguments go to run_corpus.py, e.g.
#   scripts/corpus.sh --models vit_b_16,resnet50 --modes script
#   scripts/corpus.sh --max-params 150e6        # leave out the giant models
# Exit status 1 when any run FAILed or hit an ERROR.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh --target ptopt
mkdir -p build/corpus
exec /usr/bin/python3 tests/corpus/run_corpus.py --ptopt build/tools/ptopt --work build/corpus/full \
  --table build/corpus/full.md --json build/corpus/full.json "$@"

#!/usr/bin/env bash
# Regenerate fixtures/producers/ with each producer's own code (docs/producers.md).
#
# Each producer has a folder scripts/producer_fixtures/<producer>/ holding setup.sh (builds that
# producer's own virtual environment under .work/producers/<producer>/, pinned to the version the
# fixtures record) and make.py (run with that environment's python; writes
# fixtures/producers/<producer>/ and its MANIFEST.json). Producers never share an environment:
# their pins conflict with each other and with eaglehub's.
#
#   scripts/make_producer_fixtures.sh                 # every producer
#   scripts/make_producer_fixtures.sh speculators     # one
set -euo pipefail
cd "$(dirname "$0")/.."
here=scripts/producer_fixtures
producers=("$@")
if [ ${#producers[@]} -eq 0 ]; then
  for d in "$here"/*/; do producers+=("$(basename "$d")"); done
fi
for p in "${producers[@]}"; do
  [ -f "$here/$p/setup.sh" ] || { echo "no producer '$p' (have: $(ls "$here"))" >&2; exit 2; }
  echo "== $p: environment"
  bash "$here/$p/setup.sh" ".work/producers/$p"
  echo "== $p: fixtures"
  ".work/producers/$p/venv/bin/python" "$here/$p/make.py" --out "fixtures/producers/$p"
done

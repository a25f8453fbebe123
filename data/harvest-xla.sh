#!/bin/sh
# Harvest the releases with XLA (issue 25) into data/opregistry.sqlite, newest first,
# one release per command so that every finished release is loaded (and can be
# committed) before the next starts. While one release is harvested, the next one's
# venv is built (cached under ~/.cache/opregistry/venvs), so installing overlaps
# harvesting. Each release replaces its own rows atomically.
#
#   sh data/harvest-xla.sh                  # every release, 2.21 down to 1.13
#   sh data/harvest-xla.sh 2.19 2.18        # just these
#   OPREGISTRY=".venv/bin/python -m opregistry" LOGS=harvest-logs sh data/harvest-xla.sh
#
# Runs under `nice -n 19`: about 7 minutes per release on one core (the XLA part is
# ~0.3 s per op).
set -u
OPREGISTRY=${OPREGISTRY:-"python -m opregistry"}
PYTHON=${OPREGISTRY%% -m opregistry}
LOGS=${LOGS:-harvest-logs}
DB=${DB:-data/opregistry.sqlite}
RELEASES=${*:-"2.21 2.20 2.19 2.18 2.17 2.16 2.15 2.14 2.13 2.12 2.11 2.10 2.9 2.8 2.7 2.6 2.5 2.4 2.3 2.2 2.1 2.0 1.15 1.14 1.13"}
mkdir -p "$LOGS"
export TF_CPP_MIN_LOG_LEVEL=2

prebuild() {  # build the venv of release $1 in the background; its pid in $BUILDING
    nice -n 19 $PYTHON -c "import sys
from opregistry.harvest.environments import ensure_venv
from opregistry.harvest.recipes import recipe_for
print(ensure_venv(recipe_for(sys.argv[1])))" "$1" > "$LOGS/venv-$1.log" 2>&1 &
    BUILDING=$!
}

set -- $RELEASES
BUILDING=
[ $# -gt 0 ] && prebuild "$1"
while [ $# -gt 0 ]; do
    release=$1; shift
    [ -n "$BUILDING" ] && wait "$BUILDING"
    BUILDING=
    [ $# -gt 0 ] && prebuild "$1"
    echo "$(date -u +%H:%M:%S) harvesting $release" >> "$LOGS/harvest-xla.log"
    nice -n 19 $OPREGISTRY harvest --tf-version "$release" --xla --db "$DB" \
        > "$LOGS/$release.log" 2>&1
    echo "$(date -u +%H:%M:%S) $release: exit $? ($(tail -n 1 "$LOGS/$release.log"))" \
        >> "$LOGS/harvest-xla.log"
done
# give back the pages the replaced releases left free (docs/commands/db.md)
$OPREGISTRY db vacuum --db "$DB" >> "$LOGS/harvest-xla.log" 2>&1

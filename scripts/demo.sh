#!/usr/bin/env bash
# Installs, builds, formats a demo store and mounts it with the default engine.
# Running it again is harmless: it keeps the store and says where it is mounted.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
store=${FPGALZ4FS_DEMO_STORE:-/var/lib/fpgalz4fs-demo}
mnt=${FPGALZ4FS_DEMO_MOUNT:-/mnt/fpgalz4fs-demo}
"$src/scripts/install-deps.sh"
"$src/scripts/build.sh"
# the daemon, the tools, the card plugins this host could build, and the man pages
cmake --install "$src/build" >/dev/null
mkdir -p "$store" "$mnt"
if mountpoint -q "$mnt"; then
    echo "fpgalz4fs demo: already mounted: $store on $mnt"
    exit 0
fi
[ -f "$store/.fpgalz4fs" ] || mkfpgalz4fs "$store"
fpgalz4fs "$store" "$mnt"
echo "fpgalz4fs demo: $store is mounted on $mnt"
echo "  try: cp -r /usr/share/doc $mnt/ && du -sh $store $mnt"
echo "  counters: getfattr --only-values -n user.fpgalz4fs.stats $mnt"
echo "  unmount:  fusermount3 -u $mnt"

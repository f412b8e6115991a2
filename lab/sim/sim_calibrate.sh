#!/usr/bin/env bash
# rmacc-sim against the runs measured on 2 x H200 (bench/results §6.1): predicts each with
# the preset calibrated from the archive's figures (bench/results/) and prints predicted against
# measured. The
# measured column is copied from the bench/results section named in each row, not computed here
# (§4.2a: §4.2's "small calls by shape", commit a3b2de1).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${SIM:-build/lab/rmacc-sim}
echo "| run | measured (µs) | where | predicted (µs) | predicted / measured |"
echo "|---|---:|---|---:|---:|"
# preset nodes gpus traffic size measured where
while read -r preset nodes gpus traffic size measured where; do
  t=$("$SIM" --preset "$preset" --nodes "$nodes" --gpus "$gpus" --traffic "$traffic" \
        --bytes "$size" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["time_us"])')
  python3 -c "
m=[float(x) for x in '$measured'.split('/')]
t=$t
print('| %s×%s %s %s | %s | %s | %.1f | %s |' % ($nodes, $gpus, '$traffic', '$size',
      ' / '.join('%g' % x for x in m), '$where', t, ' / '.join('%.2f' % (t / x) for x in m)))"
done <<'RUNS'
h200 1 2 uniform 1M 56.4 §5.5
h200 1 2 uniform 16M 93.5 §5.5
h200 1 2 uniform 256M 468.3 §5.5
h200 1 2 uniform 4G 6604.1 §5.5
h200 1 2 zipf 1M 56.4 §5.5
h200 1 2 zipf 16M 144.5 §5.5
h200 1 2 zipf 256M 629.0 §5.5
h200 1 2 zipf 4G 8811 §5.5
h200-loopback 2 1 uniform 1K 81 §4.2a
h200-loopback 2 1 uniform 32K 76 §4.2a
h200-loopback 2 1 uniform 1M 269 §4.2a
h200-loopback 2 1 uniform 4M 841.7/961.9 §5.3
h200-loopback 2 1 uniform 16M 3430.9/3281.4 §5.3
h200-loopback 2 1 uniform 64M 17322/16707 §5.3
h200-loopback 2 1 uniform 256M 59594/58047 §5.3
h200-loopback 2 2 uniform 1K 128 §4.2a
h200-loopback 2 2 uniform 32K 119 §4.2a
h200-loopback 2 2 uniform 1M 322 §4.2a
h200-loopback 4 1 uniform 1K 173 §4.2a
h200-loopback 4 1 uniform 32K 185 §4.2a
h200-loopback 4 1 uniform 1M 494 §4.2a
h200-loopback 2 2 zipf 1K 294/301.0 §5.3/§4.2
h200-loopback 2 2 zipf 64K 184.6 §4.2
h200-loopback 2 2 zipf 1M 507.5 §4.2
h200-loopback 2 2 zipf 16M 4862/4098 §5.3/§4.2
h200-loopback 2 2 zipf 256M 78490/73848 §5.3/§4.2
h200-loopback 2 2 random 256K 421 §5.3
h200-loopback 2 2 random 64M 22537 §5.3
RUNS

#!/bin/sh
# The controller holds typed values, never wire JSON (docs/design/layout.md, "The training spec"):
#   1. no header of src/control/ names nlohmann, so no JSON type reaches the controller's interface;
#   2. no source of src/control/ calls json::parse, except the stored-document decoders counted in
#      ALLOWED below, which run when the state is loaded (Controller::Open, before the controller
#      thread starts), and the parses still made on the controller thread that are not yet typed,
#      also counted there. A count may only go down: a new parse fails this check, and so does a
#      count left higher than the file needs (lower it).
# Usage: controller_json.sh <source dir>
set -u
src="${1:?usage: controller_json.sh <source dir>}/src/control"
status=0

headers=$(grep -l 'nlohmann' "$src"/*.h 2>/dev/null)
if [ -n "$headers" ]; then
  echo "FAIL: src/control headers must not name nlohmann (decode at the api/ edge, or in a .cpp):"
  for h in $headers; do grep -n 'nlohmann' "$h" | sed "s|^|  ${h#"$src"/}:|"; done
  status=1
fi

# file count: why
ALLOWED='
cloudwatch_metrics.cpp 1: CloudWatchMetrics::LoadHour (load)
event_bus.cpp 3: DecodeDoc of rules, connections and API destinations (load)
metric_alarms.cpp 1: DecodeAlarmDoc (load)
metric_series.cpp 1: DecodeMetricSeries (load)
principals.cpp 1: the principals'"'"' documents (load)
system_metrics.cpp 2: DecodeSystemSeries (load); ParseSystemSampleLine reads an executor'"'"'s samples file (controller thread)
tuning.cpp 1: DecodeTuningJob (load)
'

for f in "$src"/*.cpp; do
  name=${f##*/}
  count=$(grep -c 'json::parse' "$f")
  allowed=$(printf '%s\n' "$ALLOWED" | sed -n "s/^$name \([0-9]*\):.*/\1/p")
  allowed=${allowed:-0}
  if [ "$count" -gt "$allowed" ]; then
    echo "FAIL: src/control/$name calls json::parse $count time(s), $allowed allowed; the controller takes typed"
    echo "      values decoded at the api/ edge (core/training_spec.h for training requests):"
    grep -n 'json::parse' "$f" | sed "s|^|  $name:|"
    status=1
  elif [ "$count" -lt "$allowed" ]; then
    echo "FAIL: src/control/$name calls json::parse $count time(s) but is allowed $allowed: lower its count in $0"
    status=1
  fi
done

[ "$status" -eq 0 ] && echo "ok: no nlohmann in src/control headers; json::parse only where counted"
exit "$status"

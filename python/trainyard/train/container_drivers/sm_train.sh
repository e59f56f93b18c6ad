#!/bin/bash
# Runs on each instance of a training job that a trainyard ModelTrainer made with SourceCode:
# finds the driver beside this script (the sm_drivers channel) and the host's Python, and hands
# over to the driver, which installs the requirements and runs the entry script or command.
set -e
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ]; then
  echo "sm_train.sh: no python3 or python on PATH" | tee -a "${TRAINYARD_OPT_ML:-/opt/ml}/output/failure" >&2
  exit 1
fi
echo "Starting training script ($python, driver $here/trainyard_driver.py)"
exec "$python" "$here/trainyard_driver.py"

#!/usr/bin/env bash
# Runs a zkcdc streaming job with spark-submit on a Spark cluster:
#   deploy/spark/submit.sh spark://HOST:7077 stream alerts --bootstrap-servers B [...]
# The Kafka and Avro jars come from zkcdc's cache (fetched with mvn once), zkcdc's own code
# travels as a zip (--py-files); every executor host needs Python 3.11+ with zkcdc's
# dependencies (pip install zkcdc) at the same path as PYSPARK_PYTHON.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 MASTER_URL stream alerts|state [OPTIONS]" >&2
  exit 2
fi
master=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
python=${PYSPARK_PYTHON:-python3}
# zkcdc's code zip: in a folder only this user can enter, removed when the job ends.
work=$(mktemp -d -t zkcdc-submit-XXXXXX)
trap 'rm -rf "$work"' EXIT
read -r spark_home jars zip schemas < <(ZKCDC_ZIP_DIR=$work "$python" - <<'PY'
import os
from pathlib import Path

import pyspark

from zkcdc.ground.schema_files import schema_dir
from zkcdc.streaming.job.spark_jars import spark_jars
from zkcdc.streaming.job.spark_session import package_zip

home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
zip_file = package_zip(Path(os.environ["ZKCDC_ZIP_DIR"]))
print(home, ",".join(str(p) for p in spark_jars()), zip_file, schema_dir())
PY
)
# The driver imports zkcdc from the zip, which holds no .avsc: point it at the schemas.
export PYSPARK_PYTHON=$python PYSPARK_DRIVER_PYTHON=$python ZKCDC_SCHEMA_DIR=$schemas
"$spark_home/bin/spark-submit" \
  --master "$master" \
  --properties-file "$here/spark-defaults.conf" \
  --jars "$jars" \
  --py-files "$zip" \
  "$here/zkcdc_job.py" "$@" &
job=$!
# Not exec: the zip's folder is removed when the job ends, so signals are passed on instead.
trap 'kill -TERM "$job" 2>/dev/null' TERM INT
status=0
while kill -0 "$job" 2>/dev/null; do
  wait "$job" || status=$?
done
exit "$status"

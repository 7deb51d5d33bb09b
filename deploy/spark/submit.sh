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
read -r spark_home jars zip schemas < <("$python" - <<'PY'
import os
from pathlib import Path

import pyspark

from capture.avro_codec import schema_dir
from streaming.spark_session import package_zip, spark_jars

home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
print(home, ",".join(str(p) for p in spark_jars()), package_zip(), schema_dir())
PY
)
# The driver imports zkcdc from the zip, which holds no .avsc: point it at the schemas.
export PYSPARK_PYTHON=$python PYSPARK_DRIVER_PYTHON=$python ZKCDC_SCHEMA_DIR=$schemas
exec "$spark_home/bin/spark-submit" \
  --master "$master" \
  --properties-file "$here/spark-defaults.conf" \
  --jars "$jars" \
  --py-files "$zip" \
  "$here/zkcdc_job.py" "$@"

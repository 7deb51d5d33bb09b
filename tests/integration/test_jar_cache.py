"""`stack up` leaves every jar in the cache, so a second `up` downloads nothing."""

from __future__ import annotations

import pytest
from unit.test_artifacts import never_runs

from zkcdc.ground.maven_jars import ArtifactCache, artifact_id
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.stack.kafka_jars import kafka_jars
from zkcdc.stack.settings import KAFKA_VERSION
from zkcdc.streaming.job.spark_jars import spark_jar_set

pytestmark = pytest.mark.integration


def test_the_real_cache_filled_by_stack_up_needs_no_second_download(cluster):
    """After the session's `stack up`, Kafka's and Spark's jars are all in the cache."""
    cache = ArtifactCache(default_cache_dir(), runner=never_runs)
    kafka = cache.fetch(kafka_jars(KAFKA_VERSION))
    assert any(p.name.startswith("kafka_2.13-3.9.") for p in kafka)
    assert any(p.name.startswith("reload4j-") for p in kafka)
    spark = {artifact_id(p.name) for p in cache.fetch(spark_jar_set())}
    assert {
        "spark-sql-kafka-0-10_2.13",
        "spark-avro_2.13",
        "kafka-clients",
        "commons-pool2",
    } <= spark

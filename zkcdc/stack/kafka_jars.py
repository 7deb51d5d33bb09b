"""The jars of Kafka (and the ZooKeeper server it carries) that the local stack runs."""

from __future__ import annotations

from zkcdc.ground.maven_jars import JarSet


def kafka_jars(version: str) -> JarSet:
    return JarSet(
        name=f"kafka-{version}",
        coordinates=(
            f"org.apache.kafka:kafka_2.13:{version}",
            f"org.apache.kafka:kafka-tools:{version}",
            # Kafka declares no log4j backend; these are the ones its own distribution ships.
            "org.slf4j:slf4j-reload4j:1.7.36",
            "ch.qos.reload4j:reload4j:1.2.25",
        ),
    )

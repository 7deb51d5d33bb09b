"""The capture daemon: Kafka's ZooKeeper tree as typed Avro change records."""

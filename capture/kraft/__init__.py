"""KRaft capture: Kafka's __cluster_metadata log read from disk, rendered as the ZooKeeper tree."""

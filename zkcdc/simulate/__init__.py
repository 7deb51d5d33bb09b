"""`zkcdc simulate`: Kafka's ZooKeeper tree and its incidents, written as Kafka would."""

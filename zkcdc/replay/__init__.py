"""`zkcdc replay`: captured event logs back into Kafka, or through the alert rules."""

"""A real local ZooKeeper + Kafka (ZooKeeper mode) cluster on loopback, run as plain processes."""

from zkcdc.stack.cluster import LocalStack, StackInfo
from zkcdc.stack.errors import StackError
from zkcdc.stack.settings import StackSettings

__all__ = ["LocalStack", "StackError", "StackInfo", "StackSettings"]

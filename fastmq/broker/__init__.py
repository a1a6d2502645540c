"""fastmq-broker: the RocketMQ-compatible broker (send, pull, offsets, retry, delay, registration)."""

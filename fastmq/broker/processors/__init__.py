"""The broker's request processors, one module per area as in RocketMQ: send, pull, client
management (heartbeats), consumer management (offsets, group membership) and admin."""

"""fastmq-namesrv: the route registry brokers register with and clients ask for routes."""

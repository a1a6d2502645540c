"""``fastmq-bench run``: workloads on Spark against fastmq, RocketMQ or Redis.

``workload`` reads the YAML files (the shipped ones in ``workloads/``), ``runner`` runs one
barrier stage per workload and driver and checks it against the broker, ``task`` is a Spark
task's clients and schedule, ``drivers`` the clients (fastmq, fastmq-raw, redis-streams),
``recorder`` + ``histogram`` the window, intervals and mergeable histograms, ``control`` the
driver's socket, ``cluster`` the embedded servers and admin requests, ``report`` the result files;
``median`` merges one commit's alternated runs (``fastmq-bench median``).
"""

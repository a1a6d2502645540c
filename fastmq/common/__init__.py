"""What the client, the NameServer and the broker share, as RocketMQ's ``common`` module is:
JSON state files with their ``.bak`` (:mod:`.json_file`), Java ``.properties`` files bound to
config objects (:mod:`.properties`), counters over a minute, hour and day (:mod:`.stats_item`),
and the two server commands' logging (:mod:`.server_log`) and front half (:mod:`.server_cli`).

Nothing here imports the client, the servers, the store or remoting: each of them may import any
of these rooms without pulling another floor in. The package itself loads none of its modules.
"""

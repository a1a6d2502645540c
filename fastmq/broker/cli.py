"""``fastmq-broker``: start a broker, as ``mqbroker`` does.

    fastmq-broker -c broker.conf [-n namesrvAddr] [-p] [--check-store DIR]

``-c`` reads one properties file with RocketMQ's key names: each key goes to whichever of
:class:`BrokerConfig` (brokerName, listenPort, namesrvAddr, ...) and :class:`MessageStoreConfig`
(storePathRootDir, flushDiskType, mappedFileSizeCommitLog, ...) knows it. ``-p`` prints the
effective configuration and exits. SIGTERM and SIGINT unregister, flush everything and exit 0.
``--check-store DIR`` runs the store's own consistency check on DIR (the broker must not be
running on it) and exits 1 when it reports problems. Logs go to stderr and to ``logPath``
(default ``~/logs/rocketmqlogs/broker.log``), rolled by size: ``--log-file``, ``--log-level``,
``--log-max-bytes``, ``--log-backups`` or the keys logPath, logLevel, logMaxBytes, logBackups
(:mod:`fastmq.server_log`).
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys

from .. import _ext
from ..cli_common import EXIT_CONFIG_ERROR, load_or_report, print_config, server_parser
from ..errors import FastMQError
from ..server_log import LOG_FORMAT, LOG_KEYS, LogConfig, add_log_options, apply_log_options, setup_logging
from ..properties import bind, config_items, load_properties
from ..remoting.loop import USING_UVLOOP, run
from ..store.config import MessageStoreConfig
from .config import BrokerConfig, check_configs, split_keys
from .controller import BrokerController

__all__ = ["main", "load_config"]

log = logging.getLogger("fastmq.broker")

DEFAULT_LOG_PATH = "~/logs/rocketmqlogs/broker.log"


def load_config(path: str | None, namesrv: str | None = None
                ) -> tuple[BrokerConfig, MessageStoreConfig, LogConfig]:
    """BrokerConfig, MessageStoreConfig and the logging keys from one properties file."""
    cfg, store = BrokerConfig(), MessageStoreConfig()
    log_cfg = LogConfig(logPath=DEFAULT_LOG_PATH)
    if path:
        props = load_properties(path)
        bind(log_cfg, {k: props.pop(k) for k in LOG_KEYS & props.keys()}, source=path)
        broker_keys, store_keys = split_keys(props, cfg, store)
        bind(store, store_keys, source=path)
        # (unknown keys go to bind too, which names them in a warning)
        bind(cfg, {k: v for k, v in props.items() if k not in store_keys}, source=path)
    if namesrv:
        cfg.namesrvAddr = namesrv
    check_configs(cfg, store)
    if store.brokerRole.upper() != "SLAVE":
        cfg.brokerId = 0  # BrokerStartup: a master is always id 0
    log_cfg.validate()
    return cfg, store, log_cfg


async def _serve(controller: BrokerController) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await controller.start()
    except BaseException:
        await controller.shutdown()
        raise
    cfg = controller.config
    print(f"The broker[{cfg.brokerName}, {cfg.broker_addr}] boot success. serializeType=JSON and name server is "
          f"{cfg.namesrvAddr} (extensions={'compiled' if _ext.USING_EXTENSIONS else 'pure'}, uvloop={USING_UVLOOP})",
          flush=True)
    await stop.wait()
    log.info("shutdown hook was invoked")
    await controller.shutdown()
    log.info("The broker shut down cleanly")


def check_store(directory: str, store: MessageStoreConfig) -> int:
    """Load the store in ``directory`` (recovering it) and print its consistency problems."""
    from ..store.message_store import MessageStore

    store.storePathRootDir = directory
    ms = MessageStore(store, store_host="127.0.0.1:0")
    ms.load()
    problems = ms.check_consistency()
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"store {directory}: commit log [{ms.commit_log_min_offset}, {ms.commit_log_max_offset}), "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("fastmq-broker", "fastmq broker (RocketMQ compatible)", "broker config properties file")
    parser.add_argument("-n", "--namesrvAddr", help="name server address list, e.g. 192.168.0.1:9876;192.168.0.2:9876")
    parser.add_argument("--check-store", metavar="DIR", help="check the store in DIR for consistency and exit")
    add_log_options(parser)
    args = parser.parse_args(argv)
    loaded = load_or_report("fastmq-broker", lambda: load_config(args.configFile, args.namesrvAddr))
    if loaded is None:
        return EXIT_CONFIG_ERROR
    cfg, store, file_log_cfg = loaded
    log_cfg = load_or_report("fastmq-broker", lambda: apply_log_options(file_log_cfg, args))
    if log_cfg is None:
        return EXIT_CONFIG_ERROR
    if args.printConfigItem:
        return print_config(cfg, store)
    if args.check_store:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT, stream=sys.stderr)
        try:
            return check_store(args.check_store, store)
        except (FastMQError, OSError) as exc:
            print(f"fastmq-broker: the store in {args.check_store} cannot be read: {exc}", file=sys.stderr)
            return 1
    setup_logging(log_cfg, "fastmq-broker")
    try:
        controller = BrokerController(cfg, store)
        controller.config_path = args.configFile  # where UPDATE_BROKER_CONFIG writes, as BrokerStartup's -c
        if args.configFile:  # the file's own logging keys survive that rewrite
            controller.extra_config = [(k, v) for k, v in config_items(file_log_cfg)]
        run(_serve(controller))
    except (OSError, FastMQError) as exc:
        log.error("cannot start the broker: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

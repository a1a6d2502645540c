"""``fastmq-broker``: start a broker, as ``mqbroker`` does.

    fastmq-broker -c broker.conf [-n namesrvAddr] [-p] [--check-store DIR [--repair]]

``-c`` reads one properties file with RocketMQ's key names: each key goes to whichever of
:class:`BrokerConfig` (brokerName, listenPort, namesrvAddr, ...) and :class:`MessageStoreConfig`
(storePathRootDir, flushDiskType, mappedFileSizeCommitLog, ...) knows it. ``-p`` prints the
effective configuration and exits. SIGTERM and SIGINT unregister, flush everything and exit 0.
``--check-store DIR`` checks the store in DIR read-only (refused while a broker runs on it or
when DIR holds no store: exit 2) and lists each problem with its file and position (exit 1);
``--repair`` added runs recovery on it first (see :func:`check_store`). Logs go to stderr and to ``logPath``
(default ``~/logs/rocketmqlogs/broker.log``), rolled by size: ``--log-file``, ``--log-level``,
``--log-max-bytes``, ``--log-backups`` or the keys logPath, logLevel, logMaxBytes, logBackups
(:mod:`fastmq.common.server_log`).
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys

from .. import _ext
from ..common.gc_pauses import freeze_survivors
from ..common.progress import Progress
from ..common.properties import bind, config_items, load_properties
from ..common.server_cli import EXIT_CONFIG_ERROR, load_or_report, print_config, server_parser
from ..common.server_log import LOG_FORMAT, LOG_KEYS, LogConfig, add_log_options, apply_log_options, setup_logging
from ..errors import FastMQError
from ..remoting.loop import USING_UVLOOP, run
from ..remoting.tls import load_tls_file, split_tls_keys
from ..store import StoreLockedError
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
        props = split_tls_keys(load_properties(path))[1]  # (the tls.* keys: load_tls_file)
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
    thaw = freeze_survivors(loop)  # what start() loaded stays out of full collections
    cfg = controller.config
    print(f"The broker[{cfg.brokerName}, {cfg.broker_addr}] boot success. serializeType=JSON and name server is "
          f"{cfg.namesrvAddr} (extensions={'compiled' if _ext.USING_EXTENSIONS else 'pure'}, uvloop={USING_UVLOOP})",
          flush=True)
    await stop.wait()
    log.info("shutdown hook was invoked")
    thaw()
    await controller.shutdown()
    log.info("The broker shut down cleanly")


def check_store(directory: str, store: MessageStoreConfig, *, repair: bool = False) -> int:
    """Check the store in ``directory`` read-only and print each finding with its file and
    position; with ``repair``, first run the broker's recovery on it (torn tail cut, damaged
    records set aside under ``damaged/``, queues rebuilt) and then check again.

    Returns 0 when no problem is found, 1 when one is, 2 when the store cannot be checked (no
    store at that path, or a running broker owns it).
    """
    from ..store.checkpoint import remove_abort_file
    from ..store.message_store import MessageStore
    from ..store.store_check import NotAStoreError, check_store_files

    store.storePathRootDir = directory
    store.storePathCommitLog = ""  # DIR's own commitlog/, whatever the config file names
    try:
        with Progress(f"checking {directory}") as bar:  # (on a terminal only)
            findings = check_store_files(store, bar)
        if repair:
            problems = [f for f in findings if f.kind == "PROBLEM"]
            print(f"store {directory}: {len(problems)} problem(s) before the repair")
            for f in problems:
                print(f"  {f}")
            ms = MessageStore(store, store_host="127.0.0.1:0")
            ms.load(repair=True)
            ms.shutdown()          # flushes what recovery rebuilt and gives the lock back
            remove_abort_file(store)  # recovered and flushed: the next start is a clean one
            with Progress(f"checking {directory} again") as bar:
                findings = check_store_files(store, bar)
    except (NotAStoreError, StoreLockedError) as exc:
        print(f"fastmq-broker: {exc}", file=sys.stderr)
        return 2
    problems = [f for f in findings if f.kind == "PROBLEM"]
    for f in findings:
        print(str(f))
    print(f"store {directory}: {len(problems)} problem(s)"
          + ("" if not problems or repair else "; --repair sets damaged records aside and rebuilds the queues"))
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("fastmq-broker", "fastmq broker (RocketMQ compatible)", "broker config properties file")
    parser.add_argument("-n", "--namesrvAddr", help="name server address list, e.g. 192.168.0.1:9876;192.168.0.2:9876")
    parser.add_argument("--check-store", metavar="DIR",
                        help="check the store in DIR (read-only) and exit: 0 sound, 1 problems found, 2 not checkable")
    parser.add_argument("--repair", action="store_true",
                        help="with --check-store: recover the store (cut a torn tail, set damaged records aside "
                             "under DIR/damaged, rebuild the queues), then check it")
    add_log_options(parser)
    args = parser.parse_args(argv)
    loaded = load_or_report("fastmq-broker", lambda: load_config(args.configFile, args.namesrvAddr))
    if loaded is None:
        return EXIT_CONFIG_ERROR
    cfg, store, file_log_cfg = loaded
    log_cfg = load_or_report("fastmq-broker", lambda: apply_log_options(file_log_cfg, args))
    if log_cfg is None:
        return EXIT_CONFIG_ERROR
    tls = load_or_report("fastmq-broker", lambda: load_tls_file(args.configFile))
    if tls is None:
        return EXIT_CONFIG_ERROR
    if args.printConfigItem:
        return print_config(cfg, store)
    if args.check_store:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT, stream=sys.stderr)
        try:
            return check_store(args.check_store, store, repair=args.repair)
        except (FastMQError, OSError) as exc:
            print(f"fastmq-broker: the store in {args.check_store} cannot be read: {exc}", file=sys.stderr)
            return 2
    if args.repair:
        print("fastmq-broker: --repair goes with --check-store DIR", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    setup_logging(log_cfg, "fastmq-broker")
    try:
        controller = BrokerController(cfg, store, tls=tls)
        controller.config_path = args.configFile  # where UPDATE_BROKER_CONFIG writes, as BrokerStartup's -c
        if args.configFile:  # the file's own logging keys survive that rewrite
            controller.extra_config = [(k, v) for k, v in config_items(file_log_cfg)]
            controller.extra_config += sorted(split_tls_keys(load_properties(args.configFile))[0].items())
        run(_serve(controller))
    except (OSError, FastMQError) as exc:
        log.error("cannot start the broker: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``fastmq-namesrv``: start a NameServer, as ``mqnamesrv`` does.

    fastmq-namesrv [-c namesrv.properties] [-p]

``-c`` reads RocketMQ's keys (listenPort, kvConfigPath, orderMessageEnable, ...); without it the
embedded defaults apply (port 9876). ``-p`` prints the effective configuration and exits. SIGTERM
and SIGINT shut the server down cleanly (exit status 0). Logs go to stderr and to ``logPath``,
rolled by size (``--log-file``, ``--log-level``, ``--log-max-bytes``, ``--log-backups``, or the
keys logLevel, logMaxBytes, logBackups: :mod:`fastmq.common.server_log`).
"""
from __future__ import annotations

import asyncio
import logging
import signal

from .. import _ext
from ..common.gc_pauses import freeze_survivors
from ..common.properties import bind, load_properties
from ..common.server_cli import EXIT_CONFIG_ERROR, load_or_report, print_config, server_parser
from ..common.server_log import LOG_KEYS, LogConfig, add_log_options, apply_log_options, setup_logging
from ..errors import FastMQError
from ..remoting.loop import USING_UVLOOP, run
from ..remoting.tls import load_tls_file, split_tls_keys
from .config import NamesrvConfig, NamesrvServerConfig
from .controller import NamesrvController

__all__ = ["main", "load_config"]

log = logging.getLogger("fastmq.namesrv")



def load_config(path: str | None) -> tuple[NamesrvConfig, NamesrvServerConfig, LogConfig]:
    """The defaults, overlaid with the properties file when one is given; the logging keys
    (logPath stays NamesrvConfig's, as before)."""
    cfg, server, log_cfg = NamesrvConfig(), NamesrvServerConfig(), LogConfig()
    if path:
        props = split_tls_keys(load_properties(path))[1]  # (the tls.* keys: load_tls_file)
        bind(log_cfg, {k: props.pop(k) for k in (LOG_KEYS - {"logPath"}) & props.keys()}, source=path)
        mine = {k: v for k, v in props.items() if hasattr(server, k)}
        bind(server, mine, source=path)
        bind(cfg, {k: v for k, v in props.items() if k not in mine}, source=path)
    cfg.validate()
    server.validate()
    log_cfg.logPath = cfg.logPath
    log_cfg.validate()
    return cfg, server, log_cfg


async def _serve(controller: NamesrvController) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await controller.start()
    thaw = freeze_survivors(loop)  # the routes stay out of full collections
    print(f"The Name Server boot success. serializeType=JSON (listening on {controller.port}, "
          f"extensions={'compiled' if _ext.USING_EXTENSIONS else 'pure'}, uvloop={USING_UVLOOP})", flush=True)
    await stop.wait()
    log.info("shutdown hook was invoked")
    thaw()
    await controller.shutdown()
    log.info("The Name Server shut down cleanly")


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("fastmq-namesrv", "fastmq NameServer (RocketMQ compatible)",
                           "namesrv config properties file")
    add_log_options(parser)
    args = parser.parse_args(argv)
    loaded = load_or_report("fastmq-namesrv", lambda: load_config(args.configFile))
    if loaded is None:
        return EXIT_CONFIG_ERROR
    cfg, server, file_log_cfg = loaded
    log_cfg = load_or_report("fastmq-namesrv", lambda: apply_log_options(file_log_cfg, args))
    if log_cfg is None:
        return EXIT_CONFIG_ERROR
    tls = load_or_report("fastmq-namesrv", lambda: load_tls_file(args.configFile))
    if tls is None:
        return EXIT_CONFIG_ERROR
    if args.printConfigItem:
        return print_config(cfg, server)
    setup_logging(log_cfg, "fastmq-namesrv")
    try:
        run(_serve(NamesrvController(cfg, server, tls=tls)))
    except (OSError, FastMQError) as exc:
        log.error("cannot start the Name Server: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

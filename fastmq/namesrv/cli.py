"""``fastmq-namesrv``: start a NameServer, as ``mqnamesrv`` does.

    fastmq-namesrv [-c namesrv.properties] [-p]

``-c`` reads RocketMQ's keys (listenPort, kvConfigPath, orderMessageEnable, ...); without it the
embedded defaults apply (port 9876). ``-p`` prints the effective configuration and exits. SIGTERM
and SIGINT shut the server down cleanly (exit status 0). Logs go to stderr and to ``logPath``.
"""
from __future__ import annotations

import asyncio
import logging
import signal

from .. import _ext
from ..errors import FastMQError
from ..cli_common import EXIT_CONFIG_ERROR, load_or_report, print_config, server_parser
from ..server_log import setup_logging
from ..properties import bind, load_properties
from ..remoting.loop import USING_UVLOOP, run
from .config import NamesrvConfig, NamesrvServerConfig
from .controller import NamesrvController

__all__ = ["main", "load_config"]

log = logging.getLogger("fastmq.namesrv")



def load_config(path: str | None) -> tuple[NamesrvConfig, NamesrvServerConfig]:
    """The defaults, overlaid with the properties file when one is given."""
    cfg, server = NamesrvConfig(), NamesrvServerConfig()
    if path:
        props = load_properties(path)
        mine = {k: v for k, v in props.items() if hasattr(server, k)}
        bind(server, mine, source=path)
        bind(cfg, {k: v for k, v in props.items() if k not in mine}, source=path)
    cfg.validate()
    server.validate()
    return cfg, server


async def _serve(controller: NamesrvController) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await controller.start()
    print(f"The Name Server boot success. serializeType=JSON (listening on {controller.port}, "
          f"extensions={'compiled' if _ext.USING_EXTENSIONS else 'pure'}, uvloop={USING_UVLOOP})", flush=True)
    await stop.wait()
    log.info("shutdown hook was invoked")
    await controller.shutdown()
    log.info("The Name Server shut down cleanly")


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("fastmq-namesrv", "fastmq NameServer (RocketMQ compatible)",
                           "namesrv config properties file")
    args = parser.parse_args(argv)
    loaded = load_or_report("fastmq-namesrv", lambda: load_config(args.configFile))
    if loaded is None:
        return EXIT_CONFIG_ERROR
    cfg, server = loaded
    if args.printConfigItem:
        return print_config(cfg, server)
    setup_logging(cfg.logPath, "fastmq-namesrv")
    try:
        run(_serve(NamesrvController(cfg, server)))
    except (OSError, FastMQError) as exc:
        log.error("cannot start the Name Server: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

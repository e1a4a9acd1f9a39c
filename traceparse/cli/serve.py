"""``traceparse serve``: the TensorBoard dashboard on its own, for a logdir."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from traceparse.cli import _options as options
from traceparse.cli.base import Command

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from traceparse.output.terminal import Terminal

DEFAULT_PORT = 6007  # TensorBoard's is 6006: both can run side by side


class ServeCommand(Command):
    """Serve the traceparse dashboard for a logdir in a browser, without TensorBoard.

    The page is the one TensorBoard shows with traceparse's plugin installed
    (pip install 'traceparse[tensorboard]'): every run under LOGDIR that holds
    captures, its peak per allocator and leak verdict, and for the chosen run
    the report `traceparse report --format html` writes. Runs are analysed in
    the background, one at a time, and kept in memory; a new capture appears
    when the page next refreshes. Nothing is written into LOGDIR. Listens on
    127.0.0.1 unless --host says otherwise. Ctrl-C stops it.
    """

    name = "serve"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse serve logs/\n"
            "  traceparse serve logs/ --port 8080\n"
            "inside TensorBoard instead:\n"
            "  pip install 'traceparse[tensorboard]' && tensorboard --logdir logs/"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        options.add_capture(parser, "logdir", "LOGDIR", "log directory to serve")
        parser.add_argument(
            "--port",
            type=options.port_type,
            default=DEFAULT_PORT,
            metavar="N",
            help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
        )
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            metavar="ADDRESS",
            help="address to listen on (default 127.0.0.1: this machine only)",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.errors import NoCaptureError
        from traceparse.files.discover import find_captures
        from traceparse.integrations.tensorboard import Dashboard, serve_app

        try:
            find_captures(args.logdir)  # a missing LOGDIR is said now, not as a 404 later
        except NoCaptureError:
            term.warn(f"{args.logdir}: no captures yet; they appear on the page once written")
        dashboard = Dashboard(args.logdir)
        server = make_server(args.host, args.port, serve_app(dashboard))
        port = server.server_address[1]
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            term.warn(f"listening on {args.host}: anyone who can reach it sees these captures")
        url = f"http://{_url_host(args.host)}:{port}/"
        # Said even with --quiet: the address is what the command is for.
        print(f"traceparse dashboard of {args.logdir} at {url} (Ctrl-C stops)", file=term.err)
        term.err.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            dashboard.close()
        return 0


def make_server(host: str, port: int, app: Any) -> WSGIServer:
    """A threaded wsgiref server (a slow request never holds up the others), quiet per request."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from traceparse.errors import UsageError

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        return make_server(host, port, app, server_class=Threaded, handler_class=Quiet)
    except OSError as exc:
        raise UsageError(
            f"{host}:{port}: cannot listen there ({exc.strerror or exc}); "
            "choose another --port or --host"
        ) from exc


def _url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host

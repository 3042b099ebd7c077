"""The waitress internals server.py builds on: they fail here, loudly, if waitress moves them."""

from __future__ import annotations

import http.client
import inspect
import socket
import threading
from importlib.metadata import version

import pytest
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer
from waitress.task import ErrorTask, Task, WSGITask
from waitress.utilities import RequestEntityTooLarge, RequestHeaderFieldsTooLarge

from people_service.server import AnswerTask, Channel, RefusalTask, create_server
from people_service.web.lifecycle import REFUSED


def test_waitress_is_the_pinned_version():
    assert version("waitress") == "3.0.2"


def test_the_internals_server_py_extends_are_where_it_expects_them():
    assert HTTPChannel.task_class is WSGITask
    assert HTTPChannel.error_task_class is ErrorTask
    assert BaseWSGIServer.channel_class is HTTPChannel
    for name in ("build_response_header", "set_close_on_finish", "has_body"):
        assert hasattr(Task, name), name
    assert hasattr(WSGITask, "execute") and hasattr(ErrorTask, "execute")
    assert "self.set_close_on_finish()" in inspect.getsource(Task.build_response_header)
    assert hasattr(WSGITask, "get_environment")
    for name in ("handle_close", "handle_read", "readable", "received", "service"):
        assert hasattr(HTTPChannel, name), name
    assert hasattr(wasyncore.dispatcher, "recv")
    assert inspect.signature(HTTPRequestParser.parse_header).parameters.keys() == {
        "self",
        "header_plus",
    }
    for error in (RequestEntityTooLarge("x"), RequestHeaderFieldsTooLarge("x")):
        assert isinstance(error.code, int) and error.body == "x"
    assert issubclass(RefusalTask, AnswerTask) and issubclass(AnswerTask, WSGITask)
    assert Channel.task_class is AnswerTask and Channel.error_task_class is RefusalTask


class TinyApp:
    """A WSGI app that answers 204 and records what a refused request brought."""

    config = {"MAX_BODY_BYTES": 1024}

    def __init__(self):
        self.refusals = []

    def __call__(self, environ, start_response):
        if REFUSED in environ:
            self.refusals.append(environ[REFUSED])
            start_response("413 Payload Too Large", [("Content-Length", "0")])
            return [b""]
        start_response("204 No Content", [])
        return [b""]


@pytest.fixture
def tiny():
    app = TinyApp()
    server = create_server(app, host="127.0.0.1", port=0, threads=2)
    stop = threading.Event()

    def run():  # as server.serve does: the loop closes the server itself, in its own thread
        while not stop.is_set():
            server.asyncore.loop(timeout=0.05, map=server._map, count=1)
        server.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield app, server.effective_port
    stop.set()
    thread.join(5)


def test_a_204_keeps_its_http_1_1_connection(tiny):
    _, port = tiny
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    sockets = []
    for _ in range(3):
        connection.request("DELETE", "/x")
        response = connection.getresponse()
        response.read()
        assert response.status == 204
        assert response.getheader("Connection") is None
        sockets.append(connection.sock)
    assert sockets[0] is sockets[1] is sockets[2]
    connection.close()


def test_a_body_over_the_limit_reaches_the_app_as_a_refusal(tiny):
    app, port = tiny
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"Connection: close" in answer
    assert app.refusals == [(413, None)]

"""The bare WSGI baseline the benchmark compares against: waitress serving a constant answer."""

import logging
import sys

from waitress import serve

BODY = b'{"id":"42","name":"Baseline"}\n'


def app(environ, start_response):
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    start_response("200 OK", headers)
    return [BODY]


if __name__ == "__main__":
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth" under load
    serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]), _quiet=True)

"""gunicorn for people-service: `gunicorn -c deploy/gunicorn.conf.py app:app`."""

import signal

from people_service import runtime

bind = "127.0.0.1:8080"  # loopback, where deploy/nginx.conf proxies to
workers = 2  # one per core
worker_class = "gthread"  # threads wait on the database and on streams, not on slow clients
threads = 8  # as `people-service serve`; EVENT_STREAMS is 4 under other servers


def post_worker_init(worker):
    """SIGTERM ends this worker's open event streams at once, then stops it as gunicorn does:
    a stream is not an in-flight request to wait graceful_timeout for."""
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum, frame):
        runtime.end_streams()
        previous(signum, frame)

    signal.signal(signal.SIGTERM, stop)


def worker_exit(server, worker):
    """Close what this worker opened: the delivery worker, usage counts, connections."""
    runtime.close()

"""A reference, not the service: Flask plus one sqlite3 primary-key lookup, under the same waitress.

It has no authentication, rate limit, validation, ETag or access log; what it reaches is the
ceiling for any Flask route that reads one row, measured in the same run as everything else.
"""

import logging
import sqlite3
import sys
import threading

from flask import Flask
from waitress import serve

app = Flask(__name__)
local = threading.local()
DATABASE = sys.argv[3]
SELECT = "SELECT id, name, age, email, street, city, country FROM people WHERE id = ?"


@app.get("/person/<int:person_id>")
def person(person_id):
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = sqlite3.connect(DATABASE, check_same_thread=False)
    row = conn.execute(SELECT, (person_id,)).fetchone()
    address = {"street": row[4], "city": row[5], "country": row[6]}
    return {"id": str(row[0]), "name": row[1], "age": row[2], "email": row[3], "address": address}


if __name__ == "__main__":
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]))

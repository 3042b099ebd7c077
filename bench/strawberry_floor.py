"""A peer, not the service: FastAPI + Strawberry answering the one-person query over the same
sqlite3 file, served by uvicorn. No authentication, rate limit or access log.

Usage: python bench/strawberry_floor.py PORT DATABASE  (needs fastapi, strawberry-graphql, uvicorn)
"""

import sqlite3
import sys

import strawberry
import uvicorn
from fastapi import FastAPI
from strawberry.fastapi import GraphQLRouter

DATABASE = sys.argv[2]
SELECT = "SELECT id, name, age, email, street, city, country FROM people WHERE id = ?"
# sync resolvers run on the event loop's one thread: one connection serves them all
conn = sqlite3.connect(DATABASE, check_same_thread=False)


@strawberry.type
class Address:
    street: str
    city: str
    country: str


@strawberry.type
class Person:
    id: strawberry.ID
    name: str
    age: int | None
    email: str | None
    address: Address | None


@strawberry.type
class Query:
    @strawberry.field
    def person(self, id: strawberry.ID) -> Person | None:
        row = conn.execute(SELECT, (int(id),)).fetchone()
        if row is None:
            return None
        address = Address(street=row[4], city=row[5], country=row[6])
        return Person(id=str(row[0]), name=row[1], age=row[2], email=row[3], address=address)


app = FastAPI()
app.include_router(GraphQLRouter(strawberry.Schema(Query)), prefix="/graphql")


@app.get("/health")
def health():
    return {"status": "ok"}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")

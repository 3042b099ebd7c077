// Apollo Client 3 with its persisted-queries link (useGETForHashedQueries) against the
// service: node apq-client.mjs URL KEY; prints the answers and the requests it made.
import { ApolloClient, InMemoryCache, HttpLink, gql } from "@apollo/client/core/index.js";
import { createPersistedQueryLink } from "@apollo/client/link/persisted-queries/index.js";
import { createHash } from "node:crypto";

const [url, key] = process.argv.slice(2);
const seen = [];
const logged = async (input, init) => {
  const response = await fetch(input, init);
  seen.push({ method: init.method || "GET", url: String(input).length, status: response.status,
              hasQuery: (init.body || String(input)).includes("query") && (init.body || decodeURIComponent(String(input))).includes("person(") });
  return response;
};
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const link = createPersistedQueryLink({ sha256, useGETForHashedQueries: true }).concat(
  new HttpLink({ uri: url, headers: { "X-API-Key": key }, fetch: logged })
);
const client = new ApolloClient({ link, cache: new InMemoryCache() });
const query = gql`query One($id: ID) { person(id: $id) { name } }`;
const results = [];
for (let i = 0; i < 2; i++) {
  const result = await client.query({ query, variables: { id: "1" }, fetchPolicy: "no-cache" });
  results.push(result.data.person.name);
}
console.log(JSON.stringify({ results, seen }));

// Starts GraphiQL on /graphql; a file rather than an inline script, so that the page's
// Content-Security-Policy can refuse every inline script.
"use strict";
window.addEventListener("load", function () {
  var root = document.getElementById("graphiql");
  var config = JSON.parse(root.dataset.config);
  var fetcher = GraphiQL.createFetcher({ url: config.endpoint });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultEditorToolsVisibility: "headers",
      shouldPersistHeaders: false,
    })
  );
});

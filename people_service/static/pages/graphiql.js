// Starts GraphiQL on this page's own URL; a file rather than an inline script, so that the
// page's Content-Security-Policy can refuse every inline script.
"use strict";
window.addEventListener("load", function () {
  var root = document.getElementById("graphiql");
  var hint = document.getElementById("key-hint");
  var fetcher = GraphiQL.createFetcher({
    url: window.location.pathname,
    // shows the page's hint on how to send a key while the endpoint answers 401
    fetch: function () {
      return window.fetch.apply(window, arguments).then(function (response) {
        hint.hidden = response.status !== 401;
        return response;
      });
    },
  });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultEditorToolsVisibility: "headers",
      // as Playground does: the key entered once stays with this browser for this site
      shouldPersistHeaders: true,
    })
  );
});

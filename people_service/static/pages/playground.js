// Starts GraphQL Playground on this page's own URL; a file rather than an inline script, so that
// the page's Content-Security-Policy can refuse every inline script.
"use strict";
window.addEventListener("load", function () {
  var root = document.getElementById("root");
  var config = JSON.parse(root.dataset.config);
  config.endpoint = window.location.pathname; // never ?endpoint= from a link
  watchForKey(window.location.pathname);
  GraphQLPlayground.init(root, config);
});

// Shows the page's hint on how to send a key while the endpoint answers 401, hides it after.
function watchForKey(endpoint) {
  var hint = document.getElementById("key-hint");
  var fetch = window.fetch;
  window.fetch = function (resource, options) {
    var answer = fetch.apply(this, arguments);
    var url = typeof resource === "string" ? resource : resource.url;
    if (new URL(url, window.location.href).pathname === endpoint) {
      answer.then(function (response) {
        hint.hidden = response.status !== 401;
      });
    }
    return answer;
  };
}

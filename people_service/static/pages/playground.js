// Starts GraphQL Playground on /graphql; a file rather than an inline script, so that the page's
// Content-Security-Policy can refuse every inline script.
"use strict";
window.addEventListener("load", function () {
  var root = document.getElementById("root");
  GraphQLPlayground.init(root, JSON.parse(root.dataset.config));
});
